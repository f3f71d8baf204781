// Runs the PowerSGD bench part alone (hook_bench runs it with the others):
//   bazel run //tests/hooks/powersgd:powersgd_bench_run -- [rank] [iterations] [error_feedback 0/1]
#include <cstdio>
#include <cstdlib>

#include "examples/benchmarks/powersgd_bench_part.h"

int main(int argc, char** argv) {
  ddpx::PowerSGDBenchConfig config;
  if (argc > 1) config.rank = atoi(argv[1]);
  if (argc > 2) config.iterations = atoi(argv[2]);
  if (argc > 3) config.use_error_feedback = atoi(argv[3]) != 0;
  auto r = ddpx::run_powersgd_bench(config);
  if (!r.ok()) {
    fprintf(stderr, "powersgd bench: %s\n", r.status().ToString().c_str());
    return 1;
  }
  printf("%s", r->report().c_str());
  printf("RESULT %s\n", r->result_fields().c_str());
  return 0;
}

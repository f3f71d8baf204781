// What the GPU benchmarks share: leaving on an error with its message, and
// saying plainly when there is no GPU to measure.
#ifndef DDPX_EXAMPLES_BENCHMARKS_BENCH_SUPPORT_H_
#define DDPX_EXAMPLES_BENCHMARKS_BENCH_SUPPORT_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "cuda/stream.h"

namespace ddpx {

inline void exit_on_error(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  exit(1);
}

// True (after printing "NO GPU ... RESULT gpu=none") when nothing can run.
inline bool report_no_gpu() {
  std::string why = cuda_unavailable_reason();
  if (why.empty()) return false;
  printf("NO GPU: nothing measured (%s)\nRESULT gpu=none\n", why.c_str());
  return true;
}

}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_BENCH_SUPPORT_H_

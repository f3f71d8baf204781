// Uses nothing but the process-group library: init_process_group, then an
// allreduce of a large buffer, a broadcast and a barrier, checking every
// result.
//
//   bazel run //examples:pg_only -- --nproc=2          # forks 2 local ranks
//   RANK=0 WORLD_SIZE=2 MASTER_ADDR=host MASTER_PORT=29500 pg_only   # env://
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/launcher/launcher.h"
#include "process_group/init.h"

ABSL_FLAG(int, nproc, 1,
          "Local ranks to fork (when RANK is unset); each joins via env://.");
ABSL_FLAG(std::string, backend, "gloo", "gloo, round_robin:gloo*2, nccl ...");
ABSL_FLAG(std::string, init, "env://", "env://, tcp://host:port, file:///path");
ABSL_FLAG(int, mib, 64, "Size of the allreduced buffer in MiB.");
ABSL_FLAG(int, iters, 5, "Timed allreduce iterations.");

namespace {

int fail(const std::string& what) {
  fprintf(stderr, "pg_only: %s\n", what.c_str());
  return 1;
}

int run_rank() {
  ddpx::InitOptions options;
  options.backend = absl::GetFlag(FLAGS_backend);
  options.init_method = absl::GetFlag(FLAGS_init);
  options.timeout = std::chrono::seconds(60);
  absl::StatusOr<std::shared_ptr<ddpx::ProcessGroup>> group =
      ddpx::init_process_group(options);
  if (!group.ok()) return fail(group.status().ToString());
  ddpx::ProcessGroup& pg = **group;
  const int rank = pg.rank(), world = pg.size();

  // allreduce: every rank contributes rank+1 everywhere; the sum is known.
  const int64_t n = int64_t{absl::GetFlag(FLAGS_mib)} * (1 << 20) / 4;
  ddpx::Tensor buffer = ddpx::Tensor::zeros({n}, ddpx::DType::kFloat32);
  double best_s = 1e30;
  for (int it = 0; it < absl::GetFlag(FLAGS_iters); ++it) {
    buffer.fill_(rank + 1);
    auto start = std::chrono::steady_clock::now();
    absl::Status s = pg.allreduce({buffer})->wait();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) return fail(s.ToString());
    best_s = std::min(best_s, secs);
    const float want = world * (world + 1) / 2.0f;
    for (int64_t i = 0; i < n; i += 4093) {
      if (buffer.data_as<float>()[i] != want) {
        return fail("allreduce element " + std::to_string(i) + " is " +
                    std::to_string(buffer.data_as<float>()[i]) + ", expected " +
                    std::to_string(want));
      }
    }
  }

  // broadcast from rank 0.
  ddpx::Tensor header = ddpx::Tensor::from_vector<int64_t>({rank == 0 ? 42 : -1, n});
  absl::Status s = pg.broadcast({header})->wait();
  if (!s.ok()) return fail(s.ToString());
  if (header.item(0) != 42) return fail("broadcast did not deliver rank 0's value");

  s = pg.barrier()->wait();
  if (!s.ok()) return fail(s.ToString());
  if (rank == 0) {
    double bytes = static_cast<double>(buffer.nbytes());
    printf("pg_only: %d ranks, backend %s: allreduce %d MiB best %.1f ms, "
           "algbw %.2f GB/s, busbw %.2f GB/s; broadcast and barrier OK; "
           "%llu ops, %llu payload bytes\n",
           world, pg.backend_name().c_str(), absl::GetFlag(FLAGS_mib), best_s * 1e3,
           bytes / best_s / 1e9, bytes / best_s / 1e9 * 2.0 * (world - 1) / world,
           static_cast<unsigned long long>(pg.counters().ops.load()),
           static_cast<unsigned long long>(pg.counters().payload_bytes.load()));
  }
  ddpx::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc > 1 && std::getenv("RANK") == nullptr) {
    // Parent: re-run this binary once per rank with the env:// variables.
    ddpx::launcher::LaunchOptions launch;
    launch.nproc = nproc;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) return fail("cannot find this executable (/proc/self/exe)");
    launch.program.assign(self, static_cast<size_t>(len));
    for (int i = 1; i < argc; ++i) launch.args.push_back(argv[i]);
    ddpx::launcher::LaunchResult result = ddpx::launcher::launch_local_ranks(launch);
    if (result.exit_code != 0) fprintf(stderr, "pg_only: %s\n", result.message.c_str());
    return result.exit_code;
  }
  return run_rank();
}

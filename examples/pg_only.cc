// Uses nothing but the process-group library: init_process_group, then an
// allreduce of a large buffer, a broadcast and a barrier, checking every
// result.
//
//   bazel run //examples:pg_only -- --nproc=2          # forks 2 local ranks
//   RANK=0 WORLD_SIZE=2 MASTER_ADDR=host MASTER_PORT=29500 pg_only   # env://
//
// --inject_fault=... makes one rank misbehave on purpose (for the flight
// recorder's tests, tests/flight_recorder): the others must fail naming it.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/launcher/launcher.h"
#include "process_group/tracing/flight_recorder.h"
#include "process_group/rendezvous/init.h"

ABSL_FLAG(int, nproc, 1,
          "Local ranks to fork (when RANK is unset); each joins via env://.");
ABSL_FLAG(std::string, backend, "gloo", "gloo, round_robin:gloo*2, nccl ...");
ABSL_FLAG(std::string, init, "env://", "env://, tcp://host:port, file:///path");
ABSL_FLAG(int, mib, 64, "Size of the allreduced buffer in MiB.");
ABSL_FLAG(int64_t, numel, 0, "Elements of the allreduced buffer (0: --mib's).");
ABSL_FLAG(int, iters, 5, "Timed allreduce iterations.");
ABSL_FLAG(int, rank, -1, "This process's rank (tcp:// and file:// init; -1: from RANK).");
ABSL_FLAG(int, world_size, -1, "Ranks in the job (tcp:// and file:// init; -1: from WORLD_SIZE).");
ABSL_FLAG(int, timeout_s, 60, "Collective and rendezvous timeout in seconds.");
ABSL_FLAG(std::string, trace_dir, "",
          "Flight recorder dumps go here (rank<R>.jsonl; sets DDPX_TRACE_DIR): on a failed op, "
          "on SIGUSR1, on a peer's request. tools/trace_analyze DIR reads them.");
ABSL_FLAG(std::string, inject_fault, "",
          "FAULT INJECTION, for tests only: one rank misbehaves at allreduce iteration "
          "--inject_fault_at: skip_allreduce (it skips that allreduce), wrong_count (it "
          "allreduces one element more), wrong_root (its broadcast after the loop names root 1), "
          "sigstop / sigkill (it sends itself that signal).");
ABSL_FLAG(int, inject_fault_rank, 1, "FAULT INJECTION: the rank that misbehaves.");
ABSL_FLAG(int, inject_fault_at, 2, "FAULT INJECTION: the allreduce iteration it happens at.");

namespace {

int fail(const std::string& what) {
  fprintf(stderr, "pg_only: %s\n", what.c_str());
  return 1;
}

int run_rank() {
  ddpx::InitOptions options;
  options.backend = absl::GetFlag(FLAGS_backend);
  options.init_method = absl::GetFlag(FLAGS_init);
  options.timeout = std::chrono::seconds(absl::GetFlag(FLAGS_timeout_s));
  options.rank = absl::GetFlag(FLAGS_rank);
  options.world_size = absl::GetFlag(FLAGS_world_size);
  if (options.init_method.rfind("env://", 0) != 0) {
    if (options.rank < 0 && getenv("RANK") != nullptr) options.rank = atoi(getenv("RANK"));
    if (options.world_size < 0 && getenv("WORLD_SIZE") != nullptr)
      options.world_size = atoi(getenv("WORLD_SIZE"));
  }
  if (const std::string dir = absl::GetFlag(FLAGS_trace_dir); !dir.empty()) {
    setenv("DDPX_TRACE_DIR", dir.c_str(), 1);
  }
  absl::StatusOr<std::shared_ptr<ddpx::ProcessGroup>> group =
      ddpx::init_process_group(options);
  if (!group.ok()) return fail(group.status().ToString());
  ddpx::ProcessGroup& pg = **group;
  const int rank = pg.rank(), world = pg.size();
  const std::string fault = absl::GetFlag(FLAGS_inject_fault);
  const bool faulty = !fault.empty() && rank == absl::GetFlag(FLAGS_inject_fault_rank);
  const int fault_at = absl::GetFlag(FLAGS_inject_fault_at);
  auto fault_now = [&](const char* kind, int it) { return faulty && fault == kind && it == fault_at; };
  auto announce = [&](const char* what) {
    fprintf(stderr, "pg_only: FAULT INJECTION: rank %d %s (pid %d)\n", rank, what, getpid());
    fflush(stderr);
  };

  // allreduce: every rank contributes rank+1 everywhere; the sum is known.
  const int64_t n = absl::GetFlag(FLAGS_numel) > 0
                        ? absl::GetFlag(FLAGS_numel)
                        : int64_t{absl::GetFlag(FLAGS_mib)} * (1 << 20) / 4;
  ddpx::Tensor buffer = ddpx::Tensor::zeros({n}, ddpx::DType::kFloat32);
  double best_s = 1e30;
  for (int it = 0; it < absl::GetFlag(FLAGS_iters); ++it) {
    // The flight recorder files this iteration's ops under it (tools/trace_analyze
    // tells a skipped op from another by it).
    const ddpx::TraceSite site("pg_only iteration", -1, it);
    if (fault_now("sigstop", it)) {
      announce("stops itself (SIGSTOP)");
      raise(SIGSTOP);
    }
    if (fault_now("sigkill", it)) {
      announce("kills itself (SIGKILL)");
      raise(SIGKILL);
    }
    if (fault_now("skip_allreduce", it)) {
      announce("skips an allreduce");
      continue;
    }
    buffer.fill_(rank + 1);
    auto start = std::chrono::steady_clock::now();
    absl::Status s;
    if (fault_now("wrong_count", it)) {
      announce("allreduces one element more");
      s = pg.allreduce({ddpx::Tensor::zeros({n + 1}, ddpx::DType::kFloat32)})->wait();
      if (s.ok()) continue;
    } else {
      s = pg.allreduce({buffer})->wait();
    }
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
  ddpx::BroadcastOptions from;
  if (faulty && fault == "wrong_root") {
    announce("broadcasts from root 1");
    from.root_rank = 1;
  }
  absl::Status s = pg.broadcast({header}, from)->wait();
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

// Runs N local ranks of one program and supervises them.
//
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT (a free port picked here unless given), which is what
// --init=env:// reads. Nothing is restarted: the first rank to fail (non-zero
// exit or a signal) makes the launcher terminate the others (SIGTERM, then
// SIGKILL after a grace period) and report which rank failed and how.
// SIGINT/SIGTERM/SIGHUP sent to the launcher are forwarded to every rank.
// A program that cannot be executed fails the launch at once, naming it.
// The processes themselves are //examples/launcher:child_process children.
#ifndef DDPX_EXAMPLES_LAUNCHER_LAUNCHER_H_
#define DDPX_EXAMPLES_LAUNCHER_LAUNCHER_H_

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace ddpx::launcher {

struct LaunchOptions {
  int nproc = 1;
  std::string program;             // a path, or a name looked up on PATH
  std::vector<std::string> args;   // argv[1..] for every rank
  std::string master_addr = "127.0.0.1";
  int master_port = 0;             // 0: pick a free port
  // Extra variables for every rank ("OPENBLAS_NUM_THREADS", "1").
  std::vector<std::pair<std::string, std::string>> env;
  // How long ranks get to exit after SIGTERM before SIGKILL.
  std::chrono::milliseconds grace{5000};
};

struct LaunchResult {
  // 0 when every rank exited 0; otherwise the failing rank's exit status, or
  // 128 + signal number, or 1 when the launch itself failed.
  int exit_code = 0;
  int failed_rank = -1;
  // "rank 1 (pid 4242) exited with status 3" / "... was killed by signal 9
  // (Killed)"; empty on success.
  std::string message;
};

LaunchResult launch_local_ranks(const LaunchOptions& options);

// A TCP port that was free a moment ago, below the kernel's ephemeral
// range so no outgoing connection takes it before the caller binds it; -1
// if none could be found.
int pick_free_port();

}  // namespace ddpx::launcher

#endif  // DDPX_EXAMPLES_LAUNCHER_LAUNCHER_H_

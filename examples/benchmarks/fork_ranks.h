// Runs a job's ranks as forked processes of this program, for benchmarks and
// multi-process tests: real processes, real TCP, one store server.
#ifndef DDPX_EXAMPLES_BENCHMARKS_FORK_RANKS_H_
#define DDPX_EXAMPLES_BENCHMARKS_FORK_RANKS_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/launcher/launcher.h"

namespace ddpx {

using launcher::pick_free_port;  // examples/launcher/launcher.h

struct RankExit {
  int rank;
  int exit_code;    // -1 when killed by a signal
  int signal = 0;   // the signal, if any
};

// Forks `nproc` children, each running body(rank) and exiting with its
// return value; waits up to `timeout` for all of them (killing the rest
// after that). Call it before this process starts any thread: the children
// carry on with only the forking thread.
absl::StatusOr<std::vector<RankExit>> fork_ranks(
    int nproc, const std::function<int(int rank)>& body,
    std::chrono::milliseconds timeout);

}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_FORK_RANKS_H_

// Test helper: runs one program per rank as real processes and collects each
// rank's exit status and output. The processes are
// //examples/launcher:child_process children, each writing stdout and stderr
// to its own log file under TEST_TMPDIR.
#ifndef DDPX_TESTS_PROCESS_GROUP_RANK_PROCESSES_H_
#define DDPX_TESTS_PROCESS_GROUP_RANK_PROCESSES_H_

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ddpx {
namespace testing_util {

struct RankRun {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string output;  // stdout and stderr together
  bool ok() const { return exit_code == 0 && signal == 0; }
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// Starts `program` with args_for(rank) and env_for(rank) set on top of this
// process's environment, for each rank; waits up to `deadline`, then kills
// the stragglers (they show up with signal 9). A rank that cannot be started
// shows up with exit code 127 and the reason as its output.
std::vector<RankRun> run_ranks(const std::string& program, int nproc,
                               const std::function<std::vector<std::string>(int)>& args_for,
                               const std::function<EnvVars(int)>& env_for,
                               std::chrono::seconds deadline);

// The path of a runfile of this workspace, e.g. "tests/process_group/pg_worker".
std::string runfile(const std::string& path);

// A scratch path under TEST_TMPDIR that nothing else uses.
std::string scratch_path(const std::string& name);

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

}  // namespace testing_util
}  // namespace ddpx

#endif  // DDPX_TESTS_PROCESS_GROUP_RANK_PROCESSES_H_

// Runs a helper binary as a real child process with its stdout on a pipe,
// for the store tests that need several processes. Spawning, waiting and
// killing are //examples/launcher:child_process; this adds reading the
// child's stdout line by line.
#ifndef DDPX_TESTS_STORE_SUBPROCESS_H_
#define DDPX_TESTS_STORE_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/launcher/child_process.h"

namespace ddpx {
namespace store_test {

// Path of a binary in this test's runfiles, e.g. "store/tcp_store_server".
std::string runfile(const std::string& workspace_relative);

class Subprocess {
 public:
  // argv[0] is a path or a name on PATH; stderr stays this process's.
  static absl::StatusOr<Subprocess> spawn(const std::vector<std::string>& argv);
  Subprocess(Subprocess&& other) noexcept = default;
  Subprocess& operator=(Subprocess&&) = delete;
  // The child is killed (SIGKILL) and reaped if still running.

  // Next line of the child's stdout (without '\n').
  absl::StatusOr<std::string> read_line(std::chrono::milliseconds timeout);
  // Everything the child writes until it closes stdout or the timeout passes.
  std::string read_rest(std::chrono::milliseconds timeout);
  // Exit code (or 128+signal); DeadlineExceeded if still running.
  absl::StatusOr<int> wait(std::chrono::milliseconds timeout);
  void kill(int signal) { child_.kill(signal); }
  pid_t pid() const { return child_.pid(); }

 private:
  explicit Subprocess(launcher::ChildProcess child) : child_(std::move(child)) {}
  // Reads what is available within `left` into buffered_; false at EOF or
  // on a read error.
  bool fill(std::chrono::milliseconds left);

  launcher::ChildProcess child_;
  std::string buffered_;
};

}  // namespace store_test
}  // namespace ddpx

#endif  // DDPX_TESTS_STORE_SUBPROCESS_H_

// Runs a helper binary as a real child process (posix_spawn) with its stdout
// on a pipe, for the store tests that need several processes.
#ifndef DDPX_TESTS_STORE_SUBPROCESS_H_
#define DDPX_TESTS_STORE_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpx {
namespace testing {

// Path of a binary in this test's runfiles, e.g. "store/tcp_store_server".
std::string runfile(const std::string& workspace_relative);

class Subprocess {
 public:
  static absl::StatusOr<Subprocess> spawn(const std::vector<std::string>& argv);
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess();  // kills the child if still running

  // Next line of the child's stdout (without '\n').
  absl::StatusOr<std::string> read_line(std::chrono::milliseconds timeout);
  // Everything the child writes until it closes stdout or the timeout passes.
  std::string read_rest(std::chrono::milliseconds timeout);
  // Exit code (or 128+signal); DeadlineExceeded if still running.
  absl::StatusOr<int> wait(std::chrono::milliseconds timeout);
  void kill(int signal);
  pid_t pid() const { return pid_; }

 private:
  Subprocess(pid_t pid, int out_fd) : pid_(pid), out_fd_(out_fd) {}
  pid_t pid_;
  int out_fd_;
  bool reaped_ = false;
  int status_ = 0;
  std::string buffered_;
};

}  // namespace testing
}  // namespace ddpx

#endif  // DDPX_TESTS_STORE_SUBPROCESS_H_

#include "tests/store/subprocess.h"

#include <poll.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ddpx {
namespace store_test {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds until(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
}

}  // namespace

std::string runfile(const std::string& workspace_relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    return absl::StrCat(srcdir, "/", workspace, "/", workspace_relative);
  }
  return workspace_relative;  // bazel run: the cwd is the runfiles root
}

absl::StatusOr<Subprocess> Subprocess::spawn(const std::vector<std::string>& argv) {
  launcher::SpawnOptions options;
  options.argv = argv;
  options.output = launcher::SpawnOptions::Output::kPipe;
  absl::StatusOr<launcher::ChildProcess> child = launcher::ChildProcess::spawn(options);
  if (!child.ok()) return child.status();
  return Subprocess(*std::move(child));
}

bool Subprocess::fill(std::chrono::milliseconds left) {
  pollfd p{child_.stdout_fd(), POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return true;  // nothing yet
  char buf[4096];
  ssize_t n = read(child_.stdout_fd(), buf, sizeof(buf));
  if (n <= 0) return false;
  buffered_.append(buf, static_cast<size_t>(n));
  return true;
}

absl::StatusOr<std::string> Subprocess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    std::chrono::milliseconds left = until(deadline);
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("no line from pid ", pid(), " (so far: '", buffered_, "')"));
    }
    if (!fill(left)) {
      return absl::UnavailableError(
          absl::StrCat("pid ", pid(), " closed stdout (so far: '", buffered_, "')"));
    }
  }
}

std::string Subprocess::read_rest(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (std::chrono::milliseconds left = until(deadline); left.count() > 0;
       left = until(deadline)) {
    if (!fill(left)) break;
  }
  return std::exchange(buffered_, std::string());
}

absl::StatusOr<int> Subprocess::wait(std::chrono::milliseconds timeout) {
  absl::StatusOr<launcher::ExitStatus> status = child_.wait_for(timeout);
  if (!status.ok()) return status.status();
  return status->shell_code();
}

}  // namespace store_test
}  // namespace ddpx

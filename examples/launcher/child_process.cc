#include "examples/launcher/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace ddpx::launcher {
namespace {

constexpr std::chrono::milliseconds kPollInterval{5};

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

bool is_executable_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

// execvp's lookup, done before fork: the child may only make
// async-signal-safe calls, and searching PATH allocates.
absl::StatusOr<std::string> resolve_program(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("spawn: empty argv[0]");
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (is_executable_file(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("cannot exec ", name,
                                          ": no executable of that name on PATH (",
                                          path ? path : "unset", ")"));
}

// This process's environment with `overrides` set on top.
std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry(*e);
    absl::string_view name = entry.substr(0, entry.find('='));
    bool replaced = std::any_of(overrides.begin(), overrides.end(),
                                [&](const auto& kv) { return kv.first == name; });
    if (!replaced) env.emplace_back(entry);
  }
  // The last of several overrides of one name wins, as with setenv.
  for (size_t i = 0; i < overrides.size(); ++i) {
    bool overridden_later =
        std::any_of(overrides.begin() + i + 1, overrides.end(),
                    [&](const auto& kv) { return kv.first == overrides[i].first; });
    if (!overridden_later) env.push_back(overrides[i].first + "=" + overrides[i].second);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Between fork and exec: async-signal-safe calls only. A failure is reported
// to the parent as an errno on `error_fd` (closed by a successful exec).
[[noreturn]] void become_child(const SpawnOptions& o, pid_t parent, int out_fd,
                               int error_fd, const char* path, char* const argv[],
                               char* const envp[]) {
  for (const auto& [sig, action] : o.restore_signal_actions) sigaction(sig, &action, nullptr);
  if (o.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
  }
  const bool redirected =
      out_fd < 0 || (dup2(out_fd, STDOUT_FILENO) >= 0 &&
                     (!o.stderr_with_stdout || dup2(out_fd, STDERR_FILENO) >= 0));
  if (redirected) execve(path, argv, envp);
  const int err = errno;
  ssize_t ignored = write(error_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

}  // namespace

ExitStatus ExitStatus::from_wait_status(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) s.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  return s;
}

int ExitStatus::shell_code() const {
  if (signal != 0) return 128 + signal;
  return exit_code >= 0 ? exit_code : 1;
}

std::string ExitStatus::describe() const {
  if (unknown) return "ended with an unknown status (reaped elsewhere)";
  if (signal != 0) {
    return absl::StrCat("was killed by signal ", signal, " (", strsignal(signal), ")");
  }
  return absl::StrCat("exited with status ", exit_code);
}

absl::StatusOr<ChildProcess> ChildProcess::spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return absl::InvalidArgumentError("spawn: empty argv");
  absl::StatusOr<std::string> path = resolve_program(o.argv[0]);
  if (!path.ok()) return path.status();
  // Everything the child needs is built here, before fork.
  std::vector<std::string> argv_strings = o.argv;
  std::vector<std::string> env_strings = child_environment(o.env);
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<char*> envp = c_strings(env_strings);

  Fd out_read, out_write;
  if (o.output == SpawnOptions::Output::kPipe) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
      return absl::InternalError(absl::StrCat("spawn ", o.argv[0], ": pipe: ", strerror(errno)));
    }
    out_read.reset(fds[0]);
    out_write.reset(fds[1]);
  } else if (o.output == SpawnOptions::Output::kFile) {
    out_write.reset(open(o.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out_write.get() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("spawn ", o.argv[0], ": cannot create ",
                                                     o.output_path, ": ", strerror(errno)));
    }
  }
  int error_fds[2];
  if (pipe2(error_fds, O_CLOEXEC) < 0) {
    return absl::InternalError(absl::StrCat("spawn ", o.argv[0], ": pipe: ", strerror(errno)));
  }
  Fd error_read(error_fds[0]), error_write(error_fds[1]);

  const pid_t parent = getpid();
  fflush(nullptr);  // the child must not inherit (and lose) our buffered output
  const pid_t pid = fork();
  if (pid == 0) {
    become_child(o, parent, out_write.get(), error_write.get(), path->c_str(), argv.data(),
                 envp.data());
  }
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("spawn ", o.argv[0], ": fork: ", strerror(errno)));
  }
  error_write.reset();
  out_write.reset();
  // The pipe closes without data once exec succeeded.
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(error_read.get(), &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  if (n == sizeof(child_errno)) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot exec ", *path, ": ", strerror(child_errno)));
  }
  return ChildProcess(pid, out_read.release());
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      status_(std::move(other.status_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    status_ = std::move(other.status_);
  }
  return *this;
}

ChildProcess::~ChildProcess() { release(); }

void ChildProcess::release() {
  if (pid_ > 0 && !status_.has_value()) {
    ::kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
  pid_ = -1;
  stdout_fd_ = -1;
}

std::optional<ExitStatus> ChildProcess::try_wait() {
  if (status_.has_value() || pid_ <= 0) return status_;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = ExitStatus::from_wait_status(status);
  } else if (r < 0 && errno == ECHILD) {
    ExitStatus unknown;
    unknown.unknown = true;
    status_ = unknown;
  }
  return status_;
}

absl::StatusOr<ExitStatus> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (std::optional<ExitStatus> s = try_wait()) return *s;
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("pid ", pid_, " still running after ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

void ChildProcess::kill(int signal) {
  if (pid_ > 0 && !status_.has_value()) ::kill(pid_, signal);
}

void reap_all(std::vector<ChildProcess>& children,
              std::chrono::steady_clock::time_point kill_at) {
  bool killed = false;
  for (;;) {
    bool running = false;
    for (ChildProcess& c : children) running |= !c.try_wait().has_value();
    if (!running) return;
    if (!killed && std::chrono::steady_clock::now() >= kill_at) {
      for (ChildProcess& c : children) c.kill(SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace ddpx::launcher

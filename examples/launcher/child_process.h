// One child process: spawned from an argv with its environment and output
// chosen up front, then polled, waited for with a timeout, signalled and
// reaped. The local launcher and the test helpers that run real processes
// (tests/store/subprocess, tests/process_group/rank_processes) share it, so
// the fork/exec/wait/kill/timeout logic exists once.
//
//   SpawnOptions o;
//   o.argv = {"/path/to/worker", "--rank=1"};
//   o.env = {{"RANK", "1"}};
//   o.output = SpawnOptions::Output::kFile;
//   o.output_path = "/tmp/rank1.log";
//   absl::StatusOr<ChildProcess> child = ChildProcess::spawn(o);
//   absl::StatusOr<ExitStatus> done = child->wait_for(std::chrono::seconds(30));
#ifndef DDPX_EXAMPLES_LAUNCHER_CHILD_PROCESS_H_
#define DDPX_EXAMPLES_LAUNCHER_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpx::launcher {

// How a child ended, decoded from waitpid's status.
struct ExitStatus {
  int exit_code = -1;  // -1 when it did not exit normally
  int signal = 0;      // the signal that killed it; 0 when it exited
  // Set when someone else reaped the child (a waitpid(-1) elsewhere), so
  // how it ended is unknown.
  bool unknown = false;

  static ExitStatus from_wait_status(int status);
  bool success() const { return exit_code == 0; }
  // The shell's convention: the exit code, or 128 + the signal (1 if unknown).
  int shell_code() const;
  // "exited with status 3", "was killed by signal 9 (Killed)".
  std::string describe() const;
};

struct SpawnOptions {
  // argv[0] is a path, or a bare name looked up on PATH (like execvp).
  std::vector<std::string> argv;
  // Set on top of this process's environment (replacing a variable of the
  // same name).
  std::vector<std::pair<std::string, std::string>> env;

  enum class Output {
    kInherit,  // the child writes where this process does
    kPipe,     // stdout to a pipe this process reads (ChildProcess::stdout_fd)
    kFile,     // stdout to output_path, created or truncated
  };
  Output output = Output::kInherit;
  std::string output_path;        // kFile only
  bool stderr_with_stdout = false;  // kPipe/kFile: stderr goes there too

  // The child gets SIGKILL when this process dies, even by SIGKILL, so no
  // rank outlives its launcher.
  bool die_with_parent = false;
  // Signal dispositions the child restores before exec. A parent that
  // installed handlers passes the ones they replaced, so that a signal the
  // parent's own parent ignored (nohup) stays ignored in the child.
  std::vector<std::pair<int, struct sigaction>> restore_signal_actions;
};

class ChildProcess {
 public:
  // Fails, naming the program, when it cannot be found or executed, or the
  // output file cannot be created; the child is not left behind then.
  static absl::StatusOr<ChildProcess> spawn(const SpawnOptions& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();  // SIGKILLs and reaps a child still running

  pid_t pid() const { return pid_; }
  // Output::kPipe: the read end of the child's stdout (owned here); else -1.
  int stdout_fd() const { return stdout_fd_; }

  // The exit status once the child has ended (reaping it), nullopt while it
  // runs. Never blocks.
  std::optional<ExitStatus> try_wait();
  // Waits up to `timeout`; DeadlineExceeded naming the pid if still running.
  absl::StatusOr<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  // Sends `signal` unless the child was already reaped (its pid may have
  // been reused by then).
  void kill(int signal);

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}
  void release();

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::optional<ExitStatus> status_;
};

// Waits until every child has ended; those still running at `kill_at` get
// SIGKILL and are then reaped. Afterwards every child has its exit status.
void reap_all(std::vector<ChildProcess>& children,
              std::chrono::steady_clock::time_point kill_at);

}  // namespace ddpx::launcher

#endif  // DDPX_EXAMPLES_LAUNCHER_CHILD_PROCESS_H_

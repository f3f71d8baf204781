#include "examples/benchmarks/fork_ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"

namespace ddpx {

absl::StatusOr<std::vector<RankExit>> fork_ranks(
    int nproc, const std::function<int(int rank)>& body,
    std::chrono::milliseconds timeout) {
  std::vector<pid_t> pids;
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      for (pid_t p : pids) kill(p, SIGKILL);
      return absl::InternalError(absl::StrCat("fork of rank ", r, " failed"));
    }
    if (pid == 0) {
      // A rank must not outlive a launcher that was killed.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int code = body(r);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<RankExit> exits(nproc);
  std::vector<bool> done(nproc, false);
  int remaining = nproc;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (remaining > 0) {
    for (int r = 0; r < nproc; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        --remaining;
        exits[r].rank = r;
        if (WIFEXITED(status)) {
          exits[r].exit_code = WEXITSTATUS(status);
        } else {
          exits[r].exit_code = -1;
          exits[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        }
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string stuck;
      for (int r = 0; r < nproc; ++r) {
        if (done[r]) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        absl::StrAppend(&stuck, stuck.empty() ? "" : ", ", r);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "ranks [", stuck, "] still running after ", timeout.count(),
          " ms; killed"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return exits;
}

}  // namespace ddpx

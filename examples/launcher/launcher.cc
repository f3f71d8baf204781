#include "examples/launcher/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace ddpx::launcher {
namespace {

// The signal handler's view of the children: async-signal-safe globals.
constexpr int kMaxRanks = 4096;
volatile sig_atomic_t g_child_count = 0;
volatile pid_t g_children[kMaxRanks];
volatile sig_atomic_t g_forwarded_signal = 0;

void forward_signal(int sig) {
  g_forwarded_signal = sig;
  for (int i = 0; i < g_child_count; ++i)
    if (g_children[i] > 0) kill(g_children[i], sig);
}

const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

std::string describe(int rank, pid_t pid, int status) {
  std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (WIFEXITED(status)) return who + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return who + " was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return who + " stopped with wait status " + std::to_string(status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

[[noreturn]] void exec_rank(const LaunchOptions& o, int rank, int port) {
  // Die with the launcher even if it is SIGKILLed (no orphaned ranks).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const std::pair<const char*, std::string> vars[] = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nproc)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"GROUP_RANK", "0"},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)},
  };
  for (const auto& [name, value] : vars) setenv(name, value.c_str(), 1);
  for (const auto& [name, value] : o.env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(o.program.c_str()));
  for (const std::string& a : o.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(o.program.c_str(), argv.data());
  fprintf(stderr, "launcher: rank %d: cannot exec %s: %s\n", rank, o.program.c_str(),
          strerror(errno));
  _exit(127);
}

// Waits for every child still running, SIGKILLing those alive after `grace`.
void reap_all(std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  bool killed = false;
  for (;;) {
    bool any = false;
    for (pid_t& pid : pids) {
      if (pid <= 0) continue;
      int status;
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) {
        pid = -1;
      } else {
        any = true;
      }
    }
    if (!any) return;
    if (!killed && std::chrono::steady_clock::now() >= deadline) {
      for (pid_t pid : pids)
        if (pid > 0) kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int pick_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

LaunchResult launch_local_ranks(const LaunchOptions& o) {
  LaunchResult result;
  if (o.nproc < 1 || o.nproc > kMaxRanks) {
    result.exit_code = 1;
    result.message = "launcher: --nproc must be in [1, " + std::to_string(kMaxRanks) +
                     "], got " + std::to_string(o.nproc);
    return result;
  }
  // Bare names are looked up on PATH by execvp.
  if (o.program.find('/') != std::string::npos && access(o.program.c_str(), X_OK) != 0) {
    result.exit_code = 1;
    result.message = "launcher: " + o.program + " is not executable: " + strerror(errno);
    return result;
  }
  const int port = o.master_port > 0 ? o.master_port : pick_free_port();
  if (port <= 0) {
    result.exit_code = 1;
    result.message = "launcher: could not find a free TCP port on 127.0.0.1";
    return result;
  }

  g_forwarded_signal = 0;
  g_child_count = 0;
  struct sigaction forward {}, previous[3];
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &forward, &previous[i]);

  std::vector<pid_t> pids(o.nproc, -1);
  fflush(nullptr);  // children must not re-emit our buffered output
  for (int rank = 0; rank < o.nproc; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &previous[i], nullptr);
      exec_rank(o, rank, port);
    }
    if (pid < 0) {
      result.exit_code = 1;
      result.message = "launcher: fork for rank " + std::to_string(rank) +
                       " failed: " + strerror(errno);
      break;
    }
    pids[rank] = pid;
    g_children[rank] = pid;
    g_child_count = rank + 1;
  }

  int running = 0;
  for (pid_t pid : pids) running += pid > 0;
  while (result.exit_code == 0 && running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int rank = -1;
    for (int r = 0; r < o.nproc; ++r)
      if (pids[r] == pid) rank = r;
    if (rank < 0) continue;  // not ours
    pids[rank] = -1;
    g_children[rank] = -1;
    --running;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      result.failed_rank = rank;
      result.exit_code = exit_code_of(status);
      result.message = "launcher: " + describe(rank, pid, status);
      if (g_forwarded_signal != 0) {
        result.message += " after the launcher forwarded signal " +
                          std::to_string(g_forwarded_signal);
      } else if (o.nproc > 1) {
        result.message += "; stopping the other ranks";
      }
    }
  }
  // Fail fast: whatever is still running goes down with the first failure.
  for (pid_t pid : pids)
    if (pid > 0) kill(pid, SIGTERM);
  reap_all(pids, o.grace);
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &previous[i], nullptr);
  g_child_count = 0;
  if (result.exit_code == 0 && g_forwarded_signal != 0) {
    result.exit_code = 128 + g_forwarded_signal;
    result.message = "launcher: stopped by signal " + std::to_string(g_forwarded_signal);
  }
  return result;
}

}  // namespace ddpx::launcher

#include "tests/process_group/rank_processes.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace ddpx {
namespace testing_util {
namespace {

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string scratch_path(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = tmp != nullptr ? tmp : "/tmp";
  return dir + "/" + name + "." + std::to_string(getpid()) + "." +
         std::to_string(counter++);
}

std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr) return path;
  return std::string(srcdir) + "/" + (workspace ? workspace : "ddpx") + "/" + path;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

std::vector<RankRun> run_ranks(const std::string& program, int nproc,
                               const std::function<std::vector<std::string>(int)>& args_for,
                               const std::function<EnvVars(int)>& env_for,
                               std::chrono::seconds deadline) {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int rank = 0; rank < nproc; ++rank) {
    // Built before fork: only async-signal-safe calls between fork and exec.
    std::vector<std::string> argv_s = {program};
    for (std::string& a : args_for(rank)) argv_s.push_back(a);
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) env_s.push_back(*e);
    for (auto& [k, v] : env_for(rank)) env_s.push_back(k + "=" + v);
    std::vector<char*> argv = c_strings(argv_s);
    std::vector<char*> envp = c_strings(env_s);
    logs.push_back(scratch_path("rank" + std::to_string(rank) + ".log"));
    const char* log = logs.back().c_str();
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    pids.push_back(pid);
  }

  std::vector<RankRun> runs(nproc);
  std::vector<bool> done(nproc, pids.empty());
  int remaining = nproc;
  auto kill_at = std::chrono::steady_clock::now() + deadline;
  while (remaining > 0) {
    for (int i = 0; i < nproc; ++i) {
      if (done[i]) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      done[i] = true;
      --remaining;
      if (WIFEXITED(status)) runs[i].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) runs[i].signal = WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() > kill_at) {
      for (int i = 0; i < nproc; ++i) {
        if (!done[i]) kill(pids[i], SIGKILL);
      }
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int i = 0; i < nproc; ++i) runs[i].output = read_file(logs[i]);
  return runs;
}

}  // namespace testing_util
}  // namespace ddpx

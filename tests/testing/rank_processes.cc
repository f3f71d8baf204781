#include "tests/testing/rank_processes.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ddpx::rank_processes {
namespace {

std::string read_proc_file(pid_t pid, const char* name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces and
// parentheses, so the fields are read after its last ')'.
bool live_child_of(pid_t pid, pid_t parent) {
  const std::string stat = read_proc_file(pid, "stat");
  const size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return false;
  char state = 0;
  int ppid = 0;
  if (sscanf(stat.c_str() + close_paren + 1, " %c %d", &state, &ppid) != 2) return false;
  return ppid == parent && state != 'Z' && state != 'X';
}

bool has_variable(pid_t pid, const std::string& assignment) {
  std::istringstream env(read_proc_file(pid, "environ"));
  for (std::string entry; std::getline(env, entry, '\0');) {
    if (entry == assignment) return true;
  }
  return false;
}

}  // namespace

pid_t find_rank_process(pid_t parent, int rank) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  const std::string want = "RANK=" + std::to_string(rank);
  pid_t found = -1;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = atoi(e->d_name);
    if (pid <= 0 || !live_child_of(pid, parent) || !has_variable(pid, want)) continue;
    found = pid;
    break;
  }
  closedir(proc);
  return found;
}

}  // namespace ddpx::rank_processes

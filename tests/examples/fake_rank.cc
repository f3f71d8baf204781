// fake_rank OUT_DIR MODE [ARG]: a process the launcher tests start as ranks.
// Writes OUT_DIR/rank<RANK>.env with its rendezvous variables, then:
//   ok                 exit 0
//   fail R CODE        rank R exits with CODE, others sleep 60 s
//   crash R            rank R kills itself with SIGKILL, others sleep 60 s
//   wait               write OUT_DIR/rank<RANK>.ready, sleep until a signal,
//                      write OUT_DIR/rank<RANK>.signal holding its number
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string g_dir;
std::string g_rank;

void write_file(const std::string& name, const std::string& text) {
  FILE* f = fopen((g_dir + "/rank" + g_rank + name).c_str(), "w");
  if (f == nullptr) _exit(90);
  fputs(text.c_str(), f);
  fclose(f);
}

// Prepared before the handler is installed: the handler may only make
// async-signal-safe calls (open, write, _exit).
char g_signal_path[4096];

void on_signal(int sig) {
  const int fd = open(g_signal_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char digits[4] = {static_cast<char>('0' + sig / 10), static_cast<char>('0' + sig % 10)};
  if (fd >= 0) {
    ssize_t ignored = write(fd, sig >= 10 ? digits : digits + 1, sig >= 10 ? 2 : 1);
    (void)ignored;
    close(fd);
  }
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_dir = argv[1];
  const std::string mode = argv[2];
  const char* rank = getenv("RANK");
  g_rank = rank ? rank : "unset";
  std::string env;
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                           "MASTER_ADDR", "MASTER_PORT"}) {
    const char* v = getenv(name);
    env += std::string(name) + "=" + (v ? v : "") + "\n";
  }
  write_file(".env", env);
  if (mode == "ok") return 0;
  if (mode == "fail" && argc == 5) {
    if (g_rank == argv[3]) return atoi(argv[4]);
    sleep(60);
    return 0;
  }
  if (mode == "crash" && argc == 4) {
    if (g_rank == argv[3]) raise(SIGKILL);
    sleep(60);
    return 0;
  }
  if (mode == "wait") {
    snprintf(g_signal_path, sizeof(g_signal_path), "%s/rank%s.signal", g_dir.c_str(),
             g_rank.c_str());
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    write_file(".ready", "");
    for (;;) pause();
  }
  return 2;
}

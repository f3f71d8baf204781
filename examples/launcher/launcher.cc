#include "examples/launcher/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <random>
#include <thread>

#include "examples/launcher/child_process.h"

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

// How often the launcher looks for a rank that ended.
constexpr std::chrono::milliseconds kPollInterval{10};

// The rendezvous variables env:// reads, then the caller's extras.
std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& o,
                                                                  int rank, int port) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nproc)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"GROUP_RANK", "0"},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)},
  };
  for (const auto& kv : o.env) env.push_back(kv);
  return env;
}

std::string describe(int rank, pid_t pid, const ExitStatus& status) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") " +
         status.describe();
}

}  // namespace

namespace {

// Whether a listening socket could bind `port` on every address right now
// (0: any port, whose number is returned through `port`).
bool can_bind(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (ok) *port = ntohs(addr.sin_port);
  close(fd);
  return ok;
}

// The first port of the kernel's ephemeral range (outgoing connections'
// local ports).
int ephemeral_low() {
  int low = 32768, high = 60999;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    fclose(f);
  }
  return low;
}

}  // namespace

int pick_free_port() {
  // Below the ephemeral range: between this check and the caller's bind no
  // outgoing connection can take the port as its local end, which a port
  // from bind(0) is exposed to (jobs and tests side by side then fail with
  // "Address already in use").
  constexpr int kFirst = 10000;
  const int low = ephemeral_low();
  if (low - kFirst >= 1000) {
    std::mt19937 gen(std::random_device{}() ^ static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> dist(kFirst, low - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      int port = dist(gen);
      if (can_bind(&port)) return port;
    }
  }
  int port = 0;
  return can_bind(&port) ? port : -1;
}

LaunchResult launch_local_ranks(const LaunchOptions& o) {
  LaunchResult result;
  if (o.nproc < 1 || o.nproc > kMaxRanks) {
    result.exit_code = 1;
    result.message = "launcher: --nproc must be in [1, " + std::to_string(kMaxRanks) +
                     "], got " + std::to_string(o.nproc);
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

  // ranks[r] is rank r's process; a failed spawn stops the list short.
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < o.nproc; ++rank) {
    SpawnOptions spawn;
    spawn.argv = {o.program};
    spawn.argv.insert(spawn.argv.end(), o.args.begin(), o.args.end());
    spawn.env = rank_environment(o, rank, port);
    spawn.die_with_parent = true;  // no orphaned ranks if the launcher is SIGKILLed
    for (int i = 0; i < 3; ++i) spawn.restore_signal_actions.push_back({kForwarded[i], previous[i]});
    absl::StatusOr<ChildProcess> child = ChildProcess::spawn(spawn);
    if (!child.ok()) {
      result.exit_code = 1;
      result.failed_rank = rank;
      result.message = "launcher: rank " + std::to_string(rank) + ": " +
                       std::string(child.status().message());
      break;
    }
    g_children[rank] = child->pid();
    g_child_count = rank + 1;
    ranks.push_back(*std::move(child));
  }

  int running = static_cast<int>(ranks.size());
  while (result.exit_code == 0 && running > 0) {
    for (int rank = 0; rank < static_cast<int>(ranks.size()) && result.exit_code == 0; ++rank) {
      if (g_children[rank] <= 0) continue;  // already reaped
      std::optional<ExitStatus> status = ranks[rank].try_wait();
      if (!status.has_value()) continue;
      g_children[rank] = -1;
      --running;
      if (status->success()) continue;
      result.failed_rank = rank;
      result.exit_code = status->shell_code();
      result.message = "launcher: " + describe(rank, ranks[rank].pid(), *status);
      if (g_forwarded_signal != 0) {
        result.message += " after the launcher forwarded signal " +
                          std::to_string(g_forwarded_signal);
      } else if (o.nproc > 1) {
        result.message += "; stopping the other ranks";
      }
    }
    if (result.exit_code == 0 && running > 0) std::this_thread::sleep_for(kPollInterval);
  }
  // Fail fast: whatever is still running goes down with the first failure.
  for (ChildProcess& rank : ranks) rank.kill(SIGTERM);
  reap_all(ranks, std::chrono::steady_clock::now() + o.grace);
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &previous[i], nullptr);
  g_child_count = 0;
  if (result.exit_code == 0 && g_forwarded_signal != 0) {
    result.exit_code = 128 + g_forwarded_signal;
    result.message = "launcher: stopped by signal " + std::to_string(g_forwarded_signal);
  }
  return result;
}

}  // namespace ddpx::launcher

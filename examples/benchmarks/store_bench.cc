// TCPStore benchmark: our epoll server against torch's own TCPStore server
// (libuv backend) under the same client load, in the same run.
//
//   bazel run //examples/benchmarks:store_bench
//
// Both servers run as separate processes (ours: //store:tcp_store_server,
// torch's: a python3 child); one epoll-driven swarm of raw-protocol clients
// (store_bench_swarm.h) loads each in turn. Measures: rendezvous of N
// clients (connect, validate, ADD a counter, WAIT on a barrier), closed-loop
// set/get/add throughput and latency with 1/16/256 clients, and server RSS
// per idle connection. The closed loop also runs against a canned-reply
// responder that does only the socket work (store_bench_floor.h): the most
// any server can do with this load generator on this machine. Last line:
// RESULT key=value ...
#include <dirent.h>
#include <sys/resource.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "examples/benchmarks/store_bench_floor.h"
#include "examples/benchmarks/store_bench_hostile.h"
#include "examples/benchmarks/store_bench_swarm.h"
#include "tests/store/subprocess.h"

ABSL_FLAG(std::string, sizes, "64,1024,4096,16384", "rendezvous sizes");
ABSL_FLAG(int, window, 1024, "connection handshakes in flight at once");
ABSL_FLAG(double, op_seconds, 1.0, "seconds per (op, client count) measurement");
ABSL_FLAG(int, torch_max_rendezvous, 256,
          "largest rendezvous run against torch's server: here it answers only "
          "~48 newly connected clients per 5 s, so 16384 would take ~30 min");
ABSL_FLAG(std::string, clients, "1,16,256", "client counts for the op benchmark");
ABSL_FLAG(std::string, python, "python3", "python with torch, for the anchor");
ABSL_FLAG(bool, torch, true, "compare against torch's server when importable");
ABSL_FLAG(bool, floor, true,
          "also measure the floor: a canned-reply responder doing only the socket "
          "work (store_bench_floor.h), the best any server could do here");
ABSL_FLAG(bool, floor_server, false, "internal: run as the floor responder");
ABSL_FLAG(bool, hostile, true,
          "also run the hostile phase (store_bench_hostile.h) on a fresh server: "
          "PING p99 of a well-behaved client and the server's RSS growth");

namespace ddpx {
namespace {

using bench::Op;
using bench::OpStats;
using bench::Swarm;
using store_test::Subprocess;

constexpr char kTorchServer[] = R"(
import sys, time
try:
    import torch.distributed as dist
except Exception as e:
    print("unavailable", repr(e), flush=True)
    sys.exit(0)
from datetime import timedelta
s = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True,
                  wait_for_workers=False, timeout=timedelta(seconds=900))
print("port", s.port, flush=True)
while True:
    time.sleep(3600)
)";

struct Server {
  std::string name;
  std::unique_ptr<Subprocess> process;
  uint16_t port = 0;
};

// Starts a server process whose first stdout line ends with its port.
absl::StatusOr<Server> start(const std::string& name, const std::vector<std::string>& argv) {
  auto p = Subprocess::spawn(argv);
  if (!p.ok()) return p.status();
  Server s;
  s.name = name;
  s.process = std::make_unique<Subprocess>(std::move(*p));
  auto line = s.process->read_line(std::chrono::milliseconds(60000));
  if (!line.ok()) return line.status();
  unsigned port = 0;
  if (!absl::SimpleAtoi(line->substr(line->rfind(' ') + 1), &port) || port == 0) {
    return absl::UnavailableError(absl::StrCat(name, ": ", *line));
  }
  s.port = static_cast<uint16_t>(port);
  return s;
}

// Resident memory of a process, in KiB.
double rss_kib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      double kib = 0;
      (void)absl::SimpleAtod(std::string(absl::StripAsciiWhitespace(
                                 line.substr(6, line.find("kB") - 6))),
                             &kib);
      return kib;
    }
  }
  return NAN;
}

// CPU time the process's threads have run, in ns (sum of every
// /proc/PID/task/TID/schedstat). Unlike wall-clock throughput it barely
// depends on what else the machine is doing.
double cpu_ns(pid_t pid) {
  double total = 0;
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return NAN;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(absl::StrCat(dir, "/", e->d_name, "/schedstat"));
    double ns = 0;
    if (f >> ns) total += ns;
  }
  closedir(d);
  return total;
}

void raise_fd_limit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  std::printf("fd limit: %llu\n", static_cast<unsigned long long>(r.rlim_cur));
}

std::vector<int> parse_ints(const std::string& csv) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(csv, ',', absl::SkipEmpty())) {
    int v;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

// Best of a few runs.
double rendezvous(Server& server, int n, int repeats) {
  double best = NAN;
  Swarm swarm("127.0.0.1", server.port);
  for (int r = 0; r < repeats; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // closes settle
    auto t = swarm.rendezvous(n, absl::GetFlag(FLAGS_window),
                              absl::StrCat(n, "-", r), std::chrono::seconds(120));
    if (!t.ok()) {
      std::printf("  %s rendezvous %d: %s\n", server.name.c_str(), n,
                  t.status().ToString().c_str());
      return best;
    }
    best = std::isnan(best) ? *t : std::min(best, *t);
    swarm.close_all();
  }
  return best;
}

// A fresh server process's RSS growth with `n` validated, idle connections
// open, per connection (KiB). Kernel socket buffers are not in RSS.
double kib_per_idle_connection(Server& fresh, int n) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double before = rss_kib(fresh.process->pid());
  Swarm swarm("127.0.0.1", fresh.port);
  auto t = swarm.rendezvous(n, absl::GetFlag(FLAGS_window), "memory",
                            std::chrono::seconds(120));
  if (!t.ok()) return NAN;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return (rss_kib(fresh.process->pid()) - before) / n;
}

// This binary, to start it again as the floor responder.
std::string self_path() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "/proc/self/exe";
}

}  // namespace
}  // namespace ddpx

int main(int argc, char** argv) {
  using namespace ddpx;
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_floor_server)) return bench::run_canned_reply_server();
  raise_fd_limit();
  {
    // Other work on the machine skews every figure; say how busy it was.
    std::ifstream loadavg("/proc/loadavg");
    std::string one, five;
    loadavg >> one >> five;
    std::printf("load average at start: %s (1 min) %s (5 min), %u cores\n", one.c_str(),
                five.c_str(), std::thread::hardware_concurrency());
  }

  auto start_ours = [] {
    return start("ddpx", {store_test::runfile("store/tcp_store_server"), "--port=0"});
  };
  auto start_torch = [] {
    return start("torch", {absl::GetFlag(FLAGS_python), "-c", kTorchServer});
  };
  std::vector<Server> servers;
  auto ours = start_ours();
  if (!ours.ok()) {
    std::fprintf(stderr, "cannot start our server: %s\n", ours.status().ToString().c_str());
    return 1;
  }
  servers.push_back(std::move(*ours));
  if (absl::GetFlag(FLAGS_torch)) {
    auto torch = start_torch();
    if (torch.ok()) {
      servers.push_back(std::move(*torch));
    } else {
      std::printf("torch anchor unavailable (%s): measuring ours alone\n",
                  torch.status().ToString().c_str());
    }
  }
  const bool have_torch = servers.size() == 2;

  std::printf("\n== rendezvous: N clients connect, validate, add, wait on a barrier ==\n");
  double ours_16k = NAN, torch_16k = NAN;
  double vs_torch_rendezvous = NAN;  // at the largest N run on both
  int vs_torch_rendezvous_n = 0;
  int largest = 0;
  std::vector<int> sizes = parse_ints(absl::GetFlag(FLAGS_sizes));
  if (have_torch) {  // the largest size torch can do, as an extra point
    const int cap = absl::GetFlag(FLAGS_torch_max_rendezvous);
    if (std::find(sizes.begin(), sizes.end(), cap) == sizes.end()) sizes.push_back(cap);
    std::sort(sizes.begin(), sizes.end());
  }
  for (int n : sizes) {
    const int repeats = n >= 16384 ? 2 : 3;
    double t[2] = {NAN, NAN};
    t[0] = rendezvous(servers[0], n, repeats);
    const bool torch_too = have_torch && n <= absl::GetFlag(FLAGS_torch_max_rendezvous);
    if (torch_too) t[1] = rendezvous(servers[1], n, 1);
    std::printf("N=%-6d ddpx %8.4f s", n, t[0]);
    if (torch_too) {
      std::printf("   torch %8.4f s   torch/ddpx %.1fx", t[1], t[1] / t[0]);
      vs_torch_rendezvous = t[1] / t[0];
      vs_torch_rendezvous_n = n;
    } else if (have_torch) {
      std::printf("   torch not run (over --torch_max_rendezvous)");
    }
    std::printf("\n");
    std::fflush(stdout);
    if (n == 16384) {
      ours_16k = t[0];
      torch_16k = t[1];
    }
    largest = std::max(largest, n);
  }

  // Memory on fresh processes, so earlier runs' freed memory cannot hide it.
  double ours_kib = NAN, torch_kib = NAN;
  if (largest > 0) {
    auto fresh = start_ours();
    if (fresh.ok()) ours_kib = kib_per_idle_connection(*fresh, largest);
    if (have_torch) {
      auto fresh_torch = start_torch();
      if (fresh_torch.ok()) {
        torch_kib = kib_per_idle_connection(
            *fresh_torch, std::min(largest, absl::GetFlag(FLAGS_torch_max_rendezvous)));
      }
    }
    std::printf("server RSS growth per idle connection (fresh server): ddpx %.3f KiB (%d open)",
                ours_kib, largest);
    if (have_torch) {
      std::printf(", torch %.3f KiB (%d open)", torch_kib,
                  std::min(largest, absl::GetFlag(FLAGS_torch_max_rendezvous)));
    }
    std::printf("\n");
  }

  // The same closed loop against our server, torch's and the floor (a
  // canned-reply responder doing only the socket work; see
  // store_bench_floor.h), each with its process CPU per op.
  std::vector<Server*> targets;
  for (Server& s : servers) targets.push_back(&s);
  std::optional<Server> floor;
  if (absl::GetFlag(FLAGS_floor)) {
    auto f = start("floor", {self_path(), "--floor_server"});
    if (f.ok()) {
      floor = std::move(*f);
      targets.push_back(&*floor);
    } else {
      std::printf("floor server unavailable: %s\n", f.status().ToString().c_str());
    }
  }
  std::printf("\n== closed-loop ops (64-byte values; set = SET+PING) ==\n");
  std::printf("server CPU = the server process's CPU per op; client CPU = the load "
              "generator's (one thread) per op\n");
  struct Totals {
    uint64_t ops = 0;
    double seconds = 0, server_cpu_ns = 0, client_cpu_s = 0;
    double ops_per_s() const { return ops / seconds; }
    double server_us() const { return server_cpu_ns / 1e3 / ops; }
    double client_us() const { return client_cpu_s * 1e6 / ops; }
  };
  std::map<std::string, Totals> at16;
  for (int clients : parse_ints(absl::GetFlag(FLAGS_clients))) {
    std::map<std::string, Totals> totals;
    for (Op op : {Op::kSet, Op::kGet, Op::kAdd}) {
      std::printf("%s clients=%-3d", bench::op_name(op), clients);
      double first_ops = NAN;
      for (Server* server : targets) {
        Swarm swarm("127.0.0.1", server->port);
        const double cpu_before = cpu_ns(server->process->pid());
        auto r = swarm.closed_loop(clients, op, absl::GetFlag(FLAGS_op_seconds));
        const double cpu = cpu_ns(server->process->pid()) - cpu_before;
        if (!r.ok()) {
          std::printf(" | %s: %s", server->name.c_str(), r.status().ToString().c_str());
          continue;
        }
        Totals& t = totals[server->name];
        t.ops += r->ops;
        t.seconds += r->seconds;
        t.server_cpu_ns += cpu;
        t.client_cpu_s += r->client_cpu_s;
        std::printf(" | %s %7.0f ops/s p50 %6.1f us p99 %7.1f us", server->name.c_str(),
                    r->ops_per_s(), r->p50_us, r->p99_us);
        if (server == targets.front()) first_ops = r->ops_per_s();
        if (server->name == "torch") std::printf(" (ddpx/torch %.2fx)", first_ops / r->ops_per_s());
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    // Server CPU includes connecting and preloading, the same for all.
    std::printf("  clients=%d CPU per op:", clients);
    for (Server* server : targets) {
      const Totals& t = totals[server->name];
      std::printf("  %s server %.2f us client %.2f us |", server->name.c_str(), t.server_us(),
                  t.client_us());
    }
    std::printf("\n");
    if (clients == 16) at16 = totals;
  }
  auto get16 = [&](const std::string& name) {
    auto it = at16.find(name);
    return it == at16.end() ? Totals{0, NAN, NAN, NAN} : it->second;
  };
  const Totals ours16 = get16("ddpx"), torch16 = get16("torch"), floor16 = get16("floor");
  // Wall-clock figures swing with the machine's load; CPU per op does not.
  // On a quiet machine each process gets a core, so a closed loop runs at
  // most 1 / (CPU per op) of its server and of its load generator, whichever
  // is slower: that "ceiling" is what the ratio can be at best.
  auto ceiling = [](const Totals& t) {
    return 1e6 / std::max(t.server_us(), t.client_us());
  };
  double ceiling_vs_torch = NAN;
  if (floor) {
    ceiling_vs_torch = ceiling(floor16) / ceiling(torch16);
    std::printf(
        "\nfloor, 16 clients: a responder doing only epoll_wait + recv + send per request\n"
        "  server CPU per op: floor %.2f us, ddpx %.2f us, torch %.2f us: even the floor "
        "costs only %.2fx less than torch (ddpx %.2fx)\n"
        "  ceiling with a core each (quiet machine): floor %.0f, ddpx %.0f, torch %.0f ops/s "
        "(load generator %.2f us/op): no server can pass %.2fx torch here (ddpx %.2fx)\n",
        floor16.server_us(), ours16.server_us(), torch16.server_us(),
        torch16.server_us() / floor16.server_us(), torch16.server_us() / ours16.server_us(),
        ceiling(floor16), ceiling(ours16), ceiling(torch16), ours16.client_us(),
        ceiling_vs_torch, ceiling(ours16) / ceiling(torch16));
  }

  bench::HostileFigures hostile;
  hostile.ping_p99_ms = hostile.rss_growth_mib = NAN;
  if (absl::GetFlag(FLAGS_hostile)) {
    std::printf("\n== hostile clients, fresh ddpx server: 8 non-reading clients owed 400 x "
                "1 MiB each, a 4000 x 1 MiB MULTI_GET, CHECK of 4M keys, WAIT on 80K "
                "keys + the MULTI_SET creating them; one client PINGs meanwhile ==\n");
    auto fresh = start_ours();
    absl::StatusOr<bench::HostileFigures> h =
        fresh.ok() ? bench::measure_hostile(
                         fresh->port, [&] { return rss_kib(fresh->process->pid()) / 1024; })
                   : absl::StatusOr<bench::HostileFigures>(fresh.status());
    if (h.ok()) {
      hostile = *h;
      std::printf("%.2f s, %d PINGs answered: p50 %.2f ms p99 %.2f ms max %.2f ms; server RSS "
                  "growth %.1f MiB\n",
                  hostile.seconds, hostile.pings, hostile.ping_p50_ms, hostile.ping_p99_ms,
                  hostile.ping_max_ms, hostile.rss_growth_mib);
    } else {
      std::printf("hostile phase failed: %s\n", h.status().ToString().c_str());
    }
  }

  std::printf(
      "RESULT rendezvous_16384_s=%.4f ops_per_s_16=%.0f vs_torch_rendezvous=%.1f "
      "vs_torch_rendezvous_n=%d vs_torch_ops=%.2f kib_per_idle_conn=%.3f "
      "torch_rendezvous_16384_s=%.4f torch_ops_per_s_16=%.0f "
      "torch_kib_per_idle_conn=%.3f server_cpu_us_per_op_16=%.2f "
      "torch_server_cpu_us_per_op_16=%.2f vs_torch_cpu_per_op=%.2f "
      "floor_ops_per_s_16=%.0f floor_server_cpu_us_per_op_16=%.2f "
      "client_cpu_us_per_op_16=%.2f ceiling_vs_torch_ops=%.2f floor_ceiling_vs_torch_ops=%.2f "
      "hostile_ping_p99_ms=%.2f hostile_rss_growth_mib=%.1f\n",
      ours_16k, ours16.ops_per_s(), vs_torch_rendezvous, vs_torch_rendezvous_n,
      ours16.ops_per_s() / torch16.ops_per_s(), ours_kib, torch_16k, torch16.ops_per_s(),
      torch_kib, ours16.server_us(), torch16.server_us(),
      torch16.server_us() / ours16.server_us(), floor16.ops_per_s(), floor16.server_us(),
      ours16.client_us(), ceiling(ours16) / ceiling(torch16), ceiling_vs_torch,
      hostile.ping_p99_ms, hostile.rss_growth_mib);
  return 0;
}

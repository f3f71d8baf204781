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
// per idle connection. Last line: RESULT key=value ...
#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

namespace ddpx {
namespace {

using bench::Op;
using bench::OpStats;
using bench::Swarm;
using testing::Subprocess;

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

double ratio(double ours, double theirs) { return ours / theirs; }

}  // namespace
}  // namespace ddpx

int main(int argc, char** argv) {
  using namespace ddpx;
  absl::ParseCommandLine(argc, argv);
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
    return start("ddpx", {testing::runfile("store/tcp_store_server"), "--port=0"});
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

  std::printf("\n== closed-loop ops (64-byte values; set = SET+PING) ==\n");
  double ours_ops_16 = NAN, torch_ops_16 = NAN;
  double ours_cpu_us_16 = NAN, torch_cpu_us_16 = NAN;
  for (int clients : parse_ints(absl::GetFlag(FLAGS_clients))) {
    uint64_t total_ops[2] = {0, 0};
    double total_s[2] = {0, 0};
    double total_cpu_ns[2] = {0, 0};
    for (Op op : {Op::kSet, Op::kGet, Op::kAdd}) {
      OpStats st[2];
      for (size_t s = 0; s < servers.size(); ++s) {
        Swarm swarm("127.0.0.1", servers[s].port);
        const double cpu_before = cpu_ns(servers[s].process->pid());
        auto r = swarm.closed_loop(clients, op, absl::GetFlag(FLAGS_op_seconds));
        total_cpu_ns[s] += cpu_ns(servers[s].process->pid()) - cpu_before;
        if (!r.ok()) {
          std::printf("  %s %s x%d: %s\n", servers[s].name.c_str(), bench::op_name(op),
                      clients, r.status().ToString().c_str());
          continue;
        }
        st[s] = *r;
        total_ops[s] += r->ops;
        total_s[s] += r->seconds;
      }
      std::printf("%s clients=%-3d ddpx %9.0f ops/s p50 %6.1f us p99 %7.1f us", bench::op_name(op),
                  clients, st[0].ops_per_s(), st[0].p50_us, st[0].p99_us);
      if (have_torch) {
        std::printf(" | torch %9.0f ops/s p50 %6.1f us p99 %7.1f us | %.2fx",
                    st[1].ops_per_s(), st[1].p50_us, st[1].p99_us,
                    ratio(st[0].ops_per_s(), st[1].ops_per_s()));
      }
      std::printf("\n");
    }
    // Includes connecting and preloading, the same for both servers.
    std::printf("  server CPU per op, clients=%d: ddpx %.2f us", clients,
                total_cpu_ns[0] / 1e3 / total_ops[0]);
    if (have_torch) {
      std::printf(", torch %.2f us (torch/ddpx %.2fx)", total_cpu_ns[1] / 1e3 / total_ops[1],
                  (total_cpu_ns[1] / total_ops[1]) / (total_cpu_ns[0] / total_ops[0]));
    }
    std::printf("\n");
    if (clients == 16) {
      ours_ops_16 = total_ops[0] / total_s[0];
      ours_cpu_us_16 = total_cpu_ns[0] / 1e3 / total_ops[0];
      if (have_torch) {
        torch_ops_16 = total_ops[1] / total_s[1];
        torch_cpu_us_16 = total_cpu_ns[1] / 1e3 / total_ops[1];
      }
    }
  }

  std::printf(
      "RESULT rendezvous_16384_s=%.4f ops_per_s_16=%.0f vs_torch_rendezvous=%.1f "
      "vs_torch_rendezvous_n=%d vs_torch_ops=%.2f kib_per_idle_conn=%.3f "
      "torch_rendezvous_16384_s=%.4f torch_ops_per_s_16=%.0f "
      "torch_kib_per_idle_conn=%.3f server_cpu_us_per_op_16=%.2f "
      "torch_server_cpu_us_per_op_16=%.2f vs_torch_cpu_per_op=%.2f\n",
      ours_16k, ours_ops_16, vs_torch_rendezvous, vs_torch_rendezvous_n,
      ratio(ours_ops_16, torch_ops_16), ours_kib, torch_16k, torch_ops_16, torch_kib,
      ours_cpu_us_16, torch_cpu_us_16, torch_cpu_us_16 / ours_cpu_us_16);
  return 0;
}

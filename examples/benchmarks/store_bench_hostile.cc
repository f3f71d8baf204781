#include "examples/benchmarks/store_bench_hostile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/protocol.h"
#include "tests/store/raw_client.h"

namespace ddpx {
namespace bench {
namespace {

using protocol::FrameWriter;
using protocol::QueryType;
using std::chrono::milliseconds;
using store_test::RawClient;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = 1 << 20;

std::string list_frame(QueryType type, size_t n, const std::string& key_prefix,
                       bool numbered) {
  std::string f;
  FrameWriter w(&f);
  w.query(type).u64(n);
  for (size_t i = 0; i < n; ++i) {
    w.bytes(numbered ? absl::StrCat(key_prefix, i) : key_prefix);
  }
  return f;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace

absl::StatusOr<HostileFigures> measure_hostile(uint16_t port,
                                               const std::function<double()>& rss_mib) {
  RawClient setup(port);
  if (!setup.connected()) return absl::UnavailableError("hostile phase: cannot connect");
  setup.validate();
  std::string f;
  FrameWriter(&f)
      .query(QueryType::kSet).bytes("/big").bytes(std::string(kMiB, 'b'))
      .query(QueryType::kSet).bytes("/k").bytes("v")
      .query(QueryType::kPing).u32(1);
  setup.send_bytes(f);
  if (setup.read_exactly(4, milliseconds(10000)).empty()) {
    return absl::UnavailableError("hostile phase: the server did not answer the setup");
  }
  // Every frame is built before the clock starts: the load generator's own
  // CPU then goes to sending, not to formatting 40 MB of keys beside the
  // pinger on a 2-core machine.
  const std::string amplifying = list_frame(QueryType::kMultiGet, 400, "/big", false);
  const std::string too_big = list_frame(QueryType::kMultiGet, 4000, "/big", false);
  const std::string check = list_frame(QueryType::kCheck, 4000000, "/k", false);
  const std::string wait = list_frame(QueryType::kWait, 80000, "/w", true);
  std::string multi_set;
  FrameWriter w(&multi_set);
  w.query(QueryType::kMultiSet).u64(80000);
  for (int i = 0; i < 80000; ++i) w.bytes(absl::StrCat("/w", i)).bytes("x");
  const double rss_before = rss_mib();

  std::atomic<bool> stop{false};
  std::atomic<double> rss_peak{rss_before};
  std::thread sampler([&] {
    while (!stop) {
      rss_peak = std::max(rss_peak.load(), rss_mib());
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  std::vector<double> ping_ms;
  std::thread pinger([&] {
    RawClient client(port);
    client.validate();
    std::string ping;
    FrameWriter(&ping).query(QueryType::kPing).u32(7);
    while (!stop) {
      const auto start = Clock::now();
      client.send_bytes(ping);
      if (client.read_exactly(4, milliseconds(30000)).empty()) break;
      ping_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      std::this_thread::sleep_for(milliseconds(1));
    }
  });

  const auto phase_start = Clock::now();
  // 8 clients that never read, each owed 400 references to the 1 MiB value
  // (a copy each used to cost the server 400 MiB).
  std::vector<std::unique_ptr<RawClient>> greedy;
  for (int i = 0; i < 8; ++i) {
    greedy.push_back(std::make_unique<RawClient>(port));
    greedy.back()->validate();
    greedy.back()->send_bytes(amplifying);
  }
  // One asking for 4000 at once: refused with an error reply.
  {
    RawClient refused(port);
    refused.validate();
    refused.send_bytes(too_big);
    refused.read_until_closed(milliseconds(10000));
  }
  // CHECK of 4M present keys (a 40 MB frame).
  {
    RawClient checker(port);
    checker.validate();
    checker.send_bytes(check);
    checker.read_exactly(1, milliseconds(60000));
  }
  // WAIT on 80K distinct keys, then the MULTI_SET that creates them.
  {
    RawClient waiter(port);
    waiter.validate();
    waiter.send_bytes(wait);
    RawClient setter(port);
    setter.validate();
    setter.send_bytes(multi_set);
    waiter.read_exactly(1, milliseconds(60000));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - phase_start).count();
  stop = true;
  pinger.join();
  sampler.join();

  HostileFigures out;
  out.pings = static_cast<int>(ping_ms.size());
  out.ping_p50_ms = percentile(ping_ms, 0.50);
  out.ping_p99_ms = percentile(ping_ms, 0.99);
  out.ping_max_ms = ping_ms.empty() ? 0 : ping_ms.back();
  out.rss_growth_mib = rss_peak.load() - rss_before;
  out.seconds = seconds;
  return out;
}

}  // namespace bench
}  // namespace ddpx

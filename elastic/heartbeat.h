// Liveness of the members of an elastic job, through the store: every
// process beats (a counter under hb/<member id>, bumped every interval by a
// thread of its own on its own store connection), and anyone can tell a
// member that stopped beating: its counter has not moved for `misses`
// intervals. A SIGSTOPped process stops beating as surely as a dead one;
// unlike a dead one, it does not close its connections, so the heartbeat is
// what finds it before an op's timeout.
#ifndef DDPX_ELASTIC_HEARTBEAT_H_
#define DDPX_ELASTIC_HEARTBEAT_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "store/store.h"

namespace ddpx::elastic {

std::string heartbeat_key(int64_t member);

// Beats for `member` until destroyed. The first beat is written before the
// constructor returns, so a member is never seen without one. After each
// beat, `after_beat` (if set) runs on the beating thread with its store
// (the group looks at the others' beats there, so a silence is already
// timed when someone asks).
class Heartbeat {
 public:
  Heartbeat(std::unique_ptr<Store> store, int64_t member, std::chrono::milliseconds interval,
            std::function<void(Store&)> after_beat = nullptr);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  // The last error of a beat (the store gone), OK while beats go through.
  absl::Status status() const;

 private:
  void run();
  std::unique_ptr<Store> store_;
  const int64_t member_;
  const std::chrono::milliseconds interval_;
  const std::function<void(Store&)> after_beat_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  absl::Status status_;
  uint64_t count_ = 0;
  std::thread thread_;
};

// What one process has seen of the others' beats: for each member, the last
// counter value and when (on this process's clock) it last changed.
// Thread-safe.
class HeartbeatWatch {
 public:
  explicit HeartbeatWatch(std::chrono::milliseconds dead_after) : dead_after_(dead_after) {}
  // Reads the members' counters (one store round trip).
  absl::Status refresh(Store& store, const std::vector<int64_t>& members);
  // True when `member`'s counter has not moved for dead_after (or it never
  // beat) since this watch first looked at it.
  bool stale(int64_t member) const;
  std::chrono::milliseconds dead_after() const { return dead_after_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Seen {
    std::string value;
    Clock::time_point changed;
  };
  const std::chrono::milliseconds dead_after_;
  mutable std::mutex mu_;
  std::map<int64_t, Seen> seen_;
};

}  // namespace ddpx::elastic

#endif  // DDPX_ELASTIC_HEARTBEAT_H_

// A request, from any thread, that every op still waiting on a group's
// shared-memory channels give up at once: an elastic job abandons a
// generation whose member stopped answering (docs/elastic.md) without
// waiting for each op's timeout. A waiter looks at it between its sleeps
// (channel.cc), fails its channel with the given error naming the culprit,
// and so its peers' waits on it end too (ChannelControl::abandoned).
#ifndef DDPX_PROCESS_GROUP_SHM_ABORT_SIGNAL_H_
#define DDPX_PROCESS_GROUP_SHM_ABORT_SIGNAL_H_

#include <atomic>
#include <mutex>

#include "absl/status/status.h"

namespace ddpx {
namespace shm {

class AbortSignal {
 public:
  // The first call wins; `why` must not be OK. `culprit`: the rank the
  // waiters give up on (-1: none known).
  void raise(const absl::Status& why, int culprit) {
    std::lock_guard<std::mutex> lock(mu_);
    if (raised_.load(std::memory_order_relaxed) || why.ok()) return;
    why_ = why;
    culprit_ = culprit;
    raised_.store(true, std::memory_order_release);
  }
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  absl::Status why() const {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }
  int culprit() const {
    std::lock_guard<std::mutex> lock(mu_);
    return culprit_;
  }

 private:
  mutable std::mutex mu_;
  std::atomic<bool> raised_{false};
  absl::Status why_;
  int culprit_ = -1;
};

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_ABORT_SIGNAL_H_

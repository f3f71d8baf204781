#include "examples/trainer/timed_hook.h"

#include <time.h>

namespace ddpx::trainer {

TimedCommHook::TimedCommHook(std::unique_ptr<CommHook> inner) : inner_(std::move(inner)) {}

int64_t TimedCommHook::now_ns() {
  // Explicitly CLOCK_MONOTONIC: the benchmark compares stamps across
  // processes, which steady_clock does not promise.
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::shared_ptr<Future<Tensor>> TimedCommHook::run(GradBucket& bucket) {
  size_t slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot = spans_.size();
    spans_.push_back({bucket.index(), now_ns(), 0});
  }
  // DDP waits on the returned future, so the stamp is written before DDP
  // sees the bucket as done.
  return inner_->run(bucket)->then([this, slot](Tensor& result) {
    const int64_t done = now_ns();
    std::lock_guard<std::mutex> lock(mu_);
    if (slot < spans_.size()) spans_[slot].done_ns = done;
    return result;
  });
}

std::vector<CommSpan> TimedCommHook::take_spans() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CommSpan> out;
  out.swap(spans_);
  return out;
}

}  // namespace ddpx::trainer

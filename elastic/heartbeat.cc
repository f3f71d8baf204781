#include "elastic/heartbeat.h"

#include "absl/strings/str_cat.h"

namespace ddpx::elastic {

std::string heartbeat_key(int64_t member) { return absl::StrCat("hb/", member); }

Heartbeat::Heartbeat(std::unique_ptr<Store> store, int64_t member,
                     std::chrono::milliseconds interval, std::function<void(Store&)> after_beat)
    : store_(std::move(store)),
      member_(member),
      interval_(interval),
      after_beat_(std::move(after_beat)) {
  status_ = store_->set(heartbeat_key(member_), absl::StrCat(count_++));
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

absl::Status Heartbeat::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void Heartbeat::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, interval_, [this] { return stop_; })) return;
    const uint64_t n = count_++;
    lock.unlock();
    absl::Status s = store_->set(heartbeat_key(member_), absl::StrCat(n));
    if (s.ok() && after_beat_) after_beat_(*store_);
    lock.lock();
    status_ = s;
  }
}

absl::Status HeartbeatWatch::refresh(Store& store, const std::vector<int64_t>& members) {
  const Clock::time_point now = Clock::now();
  if (members.empty()) return absl::OkStatus();
  // Every member beats once before it is known to anyone (Heartbeat's
  // constructor), so every key exists and this does not wait.
  std::vector<std::string> keys;
  for (int64_t m : members) keys.push_back(heartbeat_key(m));
  absl::StatusOr<std::vector<Bytes>> values = store.multi_get(keys, std::chrono::seconds(10));
  if (!values.ok()) return values.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < members.size(); ++i) {
    const int64_t m = members[i];
    const std::string value = to_string((*values)[i]);
    auto it = seen_.find(m);
    if (it == seen_.end()) {
      seen_[m] = Seen{value, now};
    } else if (it->second.value != value) {
      it->second = Seen{value, now};
    }
  }
  return absl::OkStatus();
}

bool HeartbeatWatch::stale(int64_t member) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(member);
  if (it == seen_.end()) return false;  // not looked at yet: no evidence
  return Clock::now() - it->second.changed >= dead_after_;
}

}  // namespace ddpx::elastic

// What the TCPStore server holds in memory, counted against its limit.
//
// A stored value is reference-counted: the map holds one reference and every
// reply that sends it holds another, so a GET or MULTI_GET queues a pointer,
// never a copy. Naming a 1 MiB value a thousand times in one MULTI_GET costs
// a thousand references, not a gigabyte.
#ifndef DDPX_STORE_STORED_VALUE_H_
#define DDPX_STORE_STORED_VALUE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace ddpx {

// Bytes the server holds for its clients: values (stored, or kept alive by
// a reply still being sent), partial requests, queued reply bytes and wait
// registrations. Allocator overhead is not counted. Written by the event
// loop thread only; read from any thread.
class MemoryMeter {
 public:
  // limit 0: no limit.
  explicit MemoryMeter(uint64_t limit = 0) : limit_(limit) {}

  void add(uint64_t n) { used_.store(used() + n, std::memory_order_relaxed); }
  void sub(uint64_t n) { used_.store(used() - n, std::memory_order_relaxed); }
  // Replaces an amount counted earlier with its new size.
  void change(uint64_t* counted, uint64_t now) {
    used_.store(used() - *counted + now, std::memory_order_relaxed);
    *counted = now;
  }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  // Whether `more` bytes may be added without passing the limit.
  bool fits(uint64_t more) const {
    return limit_ == 0 || (more <= limit_ && used() <= limit_ - more);
  }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

class StoredValue {
 public:
  // Bookkeeping per value besides its bytes (control block, map slot).
  static constexpr uint64_t kOverhead = 64;

  StoredValue(MemoryMeter* meter, absl::string_view bytes)
      : meter_(meter), bytes_(bytes.data(), bytes.size()) {
    meter_->change(&counted_, footprint());
  }
  ~StoredValue() { meter_->sub(counted_); }
  StoredValue(const StoredValue&) = delete;
  StoredValue& operator=(const StoredValue&) = delete;

  absl::string_view bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

  // In-place changes, for a value no reply holds (the caller checks).
  void assign(absl::string_view bytes) {
    bytes_.assign(bytes.data(), bytes.size());
    meter_->change(&counted_, footprint());
  }
  void append(absl::string_view bytes) {
    bytes_.append(bytes.data(), bytes.size());
    meter_->change(&counted_, footprint());
  }
  size_t capacity() const { return bytes_.capacity(); }

 private:
  uint64_t footprint() const { return bytes_.capacity() + kOverhead; }

  MemoryMeter* meter_;
  std::string bytes_;
  uint64_t counted_ = 0;
};

using ValueRef = std::shared_ptr<StoredValue>;

}  // namespace ddpx

#endif  // DDPX_STORE_STORED_VALUE_H_

// The key-value store processes use to find each other (c10d's Store seam).
//
// Every call returns an absl::Status (or StatusOr) instead of throwing. Errors
// name what went wrong: the keys that were missing, the timeout that expired,
// the peer that went away.
#ifndef DDPX_STORE_STORE_H_
#define DDPX_STORE_STORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddpx {

using Bytes = std::vector<uint8_t>;

Bytes to_bytes(absl::string_view s);
std::string to_string(const Bytes& b);

class Store {
 public:
  // c10d's default store timeout (300 s).
  static constexpr std::chrono::milliseconds kDefaultTimeout{300000};

  explicit Store(std::chrono::milliseconds timeout = kDefaultTimeout)
      : timeout_ms_(timeout.count()) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Sets `key` to `value`, waking anyone waiting for it.
  virtual absl::Status set(const std::string& key, const Bytes& value) = 0;

  // Blocks until `key` exists or `timeout` passes (DeadlineExceeded naming the
  // key and the timeout). The timeout is this call's own: it neither reads
  // nor changes the store's default, so threads (or PrefixStores) sharing one
  // store can each wait as long as they need.
  virtual absl::StatusOr<Bytes> get(const std::string& key,
                                    std::chrono::milliseconds timeout) = 0;
  // The same with the store's default timeout().
  absl::StatusOr<Bytes> get(const std::string& key) { return get(key, timeout()); }

  // Atomically adds `delta` to the int64 counter at `key` (created at 0) and
  // returns the new value. The value is stored as its decimal text, as torch
  // does, so get() of a counter returns e.g. "3".
  virtual absl::StatusOr<int64_t> add(const std::string& key,
                                      int64_t delta) = 0;

  // torch semantics: if `key` is missing and `expected` is empty, or the
  // current value equals `expected`, stores `desired` and returns it;
  // otherwise returns the current value (or `expected` if `key` is missing).
  virtual absl::StatusOr<Bytes> compare_set(const std::string& key,
                                            const Bytes& expected,
                                            const Bytes& desired) = 0;

  // Blocks until every key exists; DeadlineExceeded names the missing keys.
  virtual absl::Status wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) = 0;
  absl::Status wait(const std::vector<std::string>& keys) {
    return wait(keys, timeout());
  }

  // Non-blocking: true when every key exists.
  virtual absl::StatusOr<bool> check(const std::vector<std::string>& keys) = 0;

  // Returns whether the key existed.
  virtual absl::StatusOr<bool> delete_key(const std::string& key) = 0;

  virtual absl::StatusOr<int64_t> num_keys() = 0;

  // Blocks (like get) until every key exists or `timeout` passes.
  virtual absl::StatusOr<std::vector<Bytes>> multi_get(
      const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  absl::StatusOr<std::vector<Bytes>> multi_get(const std::vector<std::string>& keys) {
    return multi_get(keys, timeout());
  }
  virtual absl::Status multi_set(const std::vector<std::string>& keys,
                                 const std::vector<Bytes>& values) = 0;

  // Appends to the value at `key` (creating it).
  virtual absl::Status append(const std::string& key, const Bytes& value) = 0;

  // An independent handle on the same store, for use from another thread.
  virtual absl::StatusOr<std::unique_ptr<Store>> clone() = 0;

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_ms_.load(std::memory_order_relaxed));
  }
  // The default for calls given no timeout. Atomic: a store shared by threads
  // may have its default set while another thread reads it; a caller that
  // wants a different timeout for one call passes it to that call instead.
  void set_timeout(std::chrono::milliseconds timeout) {
    timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
  }

  // Conveniences for text values.
  absl::Status set(const std::string& key, absl::string_view value) {
    return set(key, to_bytes(value));
  }
  absl::Status set(const std::string& key, const char* value) {
    return set(key, to_bytes(value));
  }
  absl::StatusOr<std::string> get_string(const std::string& key) {
    return get_string(key, timeout());
  }
  absl::StatusOr<std::string> get_string(const std::string& key,
                                         std::chrono::milliseconds timeout);

 private:
  std::atomic<int64_t> timeout_ms_;
};

// "DeadlineExceeded: timed out after 300000 ms waiting for keys [a, b]".
absl::Status wait_timeout_error(const std::vector<std::string>& missing,
                                std::chrono::milliseconds timeout);

}  // namespace ddpx

#endif  // DDPX_STORE_STORE_H_

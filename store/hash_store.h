// An in-memory, thread-safe Store for ranks that live in one process
// (tests, single-process jobs).
#ifndef DDPX_STORE_HASH_STORE_H_
#define DDPX_STORE_HASH_STORE_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "store/store.h"

namespace ddpx {

class HashStore : public Store {
 public:
  explicit HashStore(std::chrono::milliseconds timeout = kDefaultTimeout);

  absl::Status set(const std::string& key, const Bytes& value) override;
  absl::StatusOr<Bytes> get(const std::string& key,
                            std::chrono::milliseconds timeout) override;
  using Store::get;
  absl::StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  absl::StatusOr<Bytes> compare_set(const std::string& key,
                                    const Bytes& expected,
                                    const Bytes& desired) override;
  absl::Status wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  using Store::wait;
  absl::StatusOr<bool> check(const std::vector<std::string>& keys) override;
  absl::StatusOr<bool> delete_key(const std::string& key) override;
  absl::StatusOr<int64_t> num_keys() override;
  absl::StatusOr<std::vector<Bytes>> multi_get(
      const std::vector<std::string>& keys,
      std::chrono::milliseconds timeout) override;
  using Store::multi_get;
  absl::Status multi_set(const std::vector<std::string>& keys,
                         const std::vector<Bytes>& values) override;
  absl::Status append(const std::string& key, const Bytes& value) override;
  // Clones share the same map.
  absl::StatusOr<std::unique_ptr<Store>> clone() override;
  using Store::set;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable changed;
    std::map<std::string, Bytes> data;
  };
  HashStore(std::shared_ptr<State> state, std::chrono::milliseconds timeout);
  // Waits with state_->mu held; returns the keys still missing at the deadline.
  std::vector<std::string> wait_locked(std::unique_lock<std::mutex>& lock,
                                       const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout);

  std::shared_ptr<State> state_;
};

}  // namespace ddpx

#endif  // DDPX_STORE_HASH_STORE_H_

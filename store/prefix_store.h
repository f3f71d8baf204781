// Namespaces every key of an underlying store under "<prefix>/", so several
// groups (or jobs) share one store without their keys colliding.
#ifndef DDPX_STORE_PREFIX_STORE_H_
#define DDPX_STORE_PREFIX_STORE_H_

#include <memory>

#include "store/store.h"

namespace ddpx {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> underlying);

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
  // Counts the keys of the whole underlying store, as torch's PrefixStore does.
  absl::StatusOr<int64_t> num_keys() override;
  absl::StatusOr<std::vector<Bytes>> multi_get(
      const std::vector<std::string>& keys,
      std::chrono::milliseconds timeout) override;
  using Store::multi_get;
  absl::Status multi_set(const std::vector<std::string>& keys,
                         const std::vector<Bytes>& values) override;
  absl::Status append(const std::string& key, const Bytes& value) override;
  absl::StatusOr<std::unique_ptr<Store>> clone() override;
  using Store::set;

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& underlying() const { return underlying_; }

 private:
  std::string join(const std::string& key) const;
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> underlying_;
};

}  // namespace ddpx

#endif  // DDPX_STORE_PREFIX_STORE_H_

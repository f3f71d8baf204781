#include "store/prefix_store.h"

#include "absl/strings/str_cat.h"

namespace ddpx {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> underlying)
    : Store(underlying->timeout()),
      prefix_(std::move(prefix)),
      underlying_(std::move(underlying)) {}

std::string PrefixStore::join(const std::string& key) const {
  return absl::StrCat(prefix_, "/", key);
}

std::vector<std::string> PrefixStore::join(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

absl::Status PrefixStore::set(const std::string& key, const Bytes& value) {
  return underlying_->set(join(key), value);
}

// Blocking calls pass the timeout along with the call: the underlying store
// may be shared with other PrefixStores and threads, so its default timeout
// is never touched.
absl::StatusOr<Bytes> PrefixStore::get(const std::string& key,
                                       std::chrono::milliseconds timeout) {
  return underlying_->get(join(key), timeout);
}

absl::StatusOr<int64_t> PrefixStore::add(const std::string& key, int64_t delta) {
  return underlying_->add(join(key), delta);
}

absl::StatusOr<Bytes> PrefixStore::compare_set(const std::string& key,
                                               const Bytes& expected,
                                               const Bytes& desired) {
  return underlying_->compare_set(join(key), expected, desired);
}

absl::Status PrefixStore::wait(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  return underlying_->wait(join(keys), timeout);
}

absl::StatusOr<bool> PrefixStore::check(const std::vector<std::string>& keys) {
  return underlying_->check(join(keys));
}

absl::StatusOr<bool> PrefixStore::delete_key(const std::string& key) {
  return underlying_->delete_key(join(key));
}

absl::StatusOr<int64_t> PrefixStore::num_keys() {
  return underlying_->num_keys();
}

absl::StatusOr<std::vector<Bytes>> PrefixStore::multi_get(
    const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  return underlying_->multi_get(join(keys), timeout);
}

absl::Status PrefixStore::multi_set(const std::vector<std::string>& keys,
                                    const std::vector<Bytes>& values) {
  return underlying_->multi_set(join(keys), values);
}

absl::Status PrefixStore::append(const std::string& key, const Bytes& value) {
  return underlying_->append(join(key), value);
}

absl::StatusOr<std::unique_ptr<Store>> PrefixStore::clone() {
  absl::StatusOr<std::unique_ptr<Store>> inner = underlying_->clone();
  if (!inner.ok()) return inner.status();
  auto out = std::make_unique<PrefixStore>(
      prefix_, std::shared_ptr<Store>(std::move(*inner)));
  out->set_timeout(timeout());
  return std::unique_ptr<Store>(std::move(out));
}

}  // namespace ddpx

#include "process_group/gloo/store_adapter.h"

#include "gloo/common/error.h"

namespace ddpx {
namespace {

[[noreturn]] void throw_status(const absl::Status& status) {
  throw gloo::IoException("store: " + status.ToString());
}

}  // namespace

void GlooStoreAdapter::set(const std::string& key,
                           const std::vector<char>& data) {
  Bytes value(data.begin(), data.end());
  absl::Status s = store_.set(prefix_ + key, value);
  if (!s.ok()) throw_status(s);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  absl::StatusOr<Bytes> value = store_.get(prefix_ + key);
  if (!value.ok()) throw_status(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  absl::Status s = store_.wait(prefixed(keys));
  if (!s.ok()) throw_status(s);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  absl::Status s = store_.wait(prefixed(keys), timeout);
  if (!s.ok()) throw_status(s);
}

std::vector<std::string> GlooStoreAdapter::prefixed(
    const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefix_ + k);
  return out;
}

}  // namespace ddpx

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
  absl::Status s = store_.set(key, value);
  if (!s.ok()) throw_status(s);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  absl::StatusOr<Bytes> value = store_.get(key);
  if (!value.ok()) throw_status(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  absl::Status s = store_.wait(keys);
  if (!s.ok()) throw_status(s);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  absl::Status s = store_.wait(keys, timeout);
  if (!s.ok()) throw_status(s);
}

}  // namespace ddpx

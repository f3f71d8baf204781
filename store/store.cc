#include "store/store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {

Bytes to_bytes(absl::string_view s) { return Bytes(s.begin(), s.end()); }

std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

absl::StatusOr<std::string> Store::get_string(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  absl::StatusOr<Bytes> value = get(key, timeout);
  if (!value.ok()) return value.status();
  return to_string(*value);
}

absl::Status wait_timeout_error(const std::vector<std::string>& missing,
                                std::chrono::milliseconds timeout) {
  return absl::DeadlineExceededError(
      absl::StrCat("store: timed out after ", timeout.count(),
                   " ms waiting for keys [", absl::StrJoin(missing, ", "), "]"));
}

}  // namespace ddpx

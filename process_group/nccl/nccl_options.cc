#include "process_group/nccl/nccl_options.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ddpx {
namespace nccl {
namespace {

absl::Status read_bool(const char* name, const char* value, bool* out) {
  if (value == nullptr) return absl::OkStatus();
  std::string v(value);
  if (v == "1" || v == "true") {
    *out = true;
  } else if (v == "0" || v == "false") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", v, " is not a boolean (use 0 or 1)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status check_options(const NcclOptions& options) {
  if (options.timeout <= std::chrono::milliseconds::zero()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl: timeout must be positive, got ", options.timeout.count(), " ms"));
  }
  if (options.watchdog_poll < std::chrono::milliseconds(1) ||
      options.watchdog_poll > std::chrono::milliseconds(60000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: watchdog poll interval must be 1..60000 ms, got ",
                     options.watchdog_poll.count(), " ms"));
  }
  return absl::OkStatus();
}

absl::StatusOr<NcclOptions> options_from_env(
    NcclOptions base, const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* name) { return getenv_fn ? getenv_fn(name) : std::getenv(name); };
  if (absl::Status s = read_bool("DDPX_NCCL_BLOCKING_WAIT", get("DDPX_NCCL_BLOCKING_WAIT"),
                                 &base.blocking_wait);
      !s.ok())
    return s;
  if (absl::Status s = read_bool("DDPX_NCCL_HIGH_PRIORITY_STREAM",
                                 get("DDPX_NCCL_HIGH_PRIORITY_STREAM"),
                                 &base.high_priority_stream);
      !s.ok())
    return s;
  if (const char* poll = get("DDPX_NCCL_WATCHDOG_POLL_MS")) {
    int64_t ms = 0;
    if (!absl::SimpleAtoi(poll, &ms)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DDPX_NCCL_WATCHDOG_POLL_MS=", poll, " is not a number of milliseconds"));
    }
    base.watchdog_poll = std::chrono::milliseconds(ms);
  }
  if (absl::Status s = check_options(base); !s.ok()) return s;
  return base;
}

}  // namespace nccl
}  // namespace ddpx

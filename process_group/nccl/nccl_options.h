// Options of the nccl backend, with their environment variables and checks.
// Plain C++ (tested on the CPU).
#ifndef DDPX_PROCESS_GROUP_NCCL_NCCL_OPTIONS_H_
#define DDPX_PROCESS_GROUP_NCCL_NCCL_OPTIONS_H_

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace ddpx {
namespace nccl {

struct NcclOptions {
  // Default timeout of an op (the front end passes concrete ones).
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // Collectives on high-priority streams (CUDA priority -1).
  bool high_priority_stream = false;
  // wait() blocks the host until the op is done (and times out), instead of
  // only making the caller's stream wait. DDPX_NCCL_BLOCKING_WAIT=1.
  bool blocking_wait = false;
  // How often the watchdog looks at pending work and communicators.
  // DDPX_NCCL_WATCHDOG_POLL_MS.
  std::chrono::milliseconds watchdog_poll = std::chrono::milliseconds(100);
};

// Errors name the variable, its value and what is allowed.
absl::Status check_options(const NcclOptions& options);

// Reads DDPX_NCCL_BLOCKING_WAIT (0/1), DDPX_NCCL_HIGH_PRIORITY_STREAM (0/1) and
// DDPX_NCCL_WATCHDOG_POLL_MS (1..60000) over `base`. `getenv` is injectable
// for tests.
absl::StatusOr<NcclOptions> options_from_env(
    NcclOptions base,
    const std::function<const char*(const char*)>& getenv_fn = nullptr);

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_NCCL_OPTIONS_H_

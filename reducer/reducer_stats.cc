#include "reducer/reducer_stats.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddpx {

std::string ReducerStats::str() const {
  std::string out = absl::StrFormat(
      "step %d [%s]: %d buckets, %.3f MB gradients, %.3f MB sent (compression %.2fx), "
      "comm wait %.3f ms of %.3f ms, %d active ranks",
      step, hook, num_buckets, gradient_bytes / 1e6, bytes_communicated / 1e6,
      compression_ratio, comm_wait_seconds * 1e3, step_seconds * 1e3, active_ranks);
  if (unused_parameters > 0) absl::StrAppend(&out, ", ", unused_parameters, " unused parameters");
  if (buckets_rebuilt) absl::StrAppend(&out, ", buckets rebuilt");
  return out;
}

}  // namespace ddpx

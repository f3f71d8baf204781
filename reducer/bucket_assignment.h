// Which gradients share a bucket: torch's compute_bucket_assignment_by_size.
//
// Gradients are taken in the order they are expected to become ready
// (reverse registration order at first, the observed ready order after the
// rebuild). Each (dtype, device) pair fills its own open bucket; a bucket
// closes once its size reaches the current limit, and the limits advance
// through `size_limits_bytes` per pair, staying on the last one (so
// {1 MiB, 25 MiB} gives a small first bucket that starts communicating early,
// then 25 MiB buckets). Buckets come out ordered by when their first
// gradient is expected, which is the order they are launched in.
#ifndef DDPX_REDUCER_BUCKET_ASSIGNMENT_H_
#define DDPX_REDUCER_BUCKET_ASSIGNMENT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"

namespace ddpx {

struct GradientSpec {
  int64_t numel = 0;
  DType dtype = DType::kFloat32;
  Device device;
  size_t nbytes() const { return static_cast<size_t>(numel) * dtype_size(dtype); }
};

struct BucketSpec {
  // Indices into the GradientSpec list, in the order they sit in the bucket.
  std::vector<size_t> gradients;
  // The limit this bucket was filled against.
  size_t size_limit_bytes = 0;
};

// `order` is a permutation of [0, grads.size()): the expected ready order.
// `size_limits_bytes` is non-empty. Errors name the bad index or limit.
absl::StatusOr<std::vector<BucketSpec>> compute_bucket_assignment(
    const std::vector<GradientSpec>& grads, const std::vector<size_t>& order,
    const std::vector<size_t>& size_limits_bytes);

// Reverse registration order: n-1, n-2, ..., 0.
std::vector<size_t> reverse_order(size_t n);

// Megabytes (as in torch's bucket_cap_mb, 2^20 bytes) to bytes.
size_t mb_to_bytes(double mb);

}  // namespace ddpx

#endif  // DDPX_REDUCER_BUCKET_ASSIGNMENT_H_

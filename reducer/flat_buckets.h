// Flat buffers holding several tensors back to back, built from a
// BucketSpec list: the memory layout shared by the reducer's gradient
// buckets and the coalesced broadcast of model state.
#ifndef DDPX_REDUCER_FLAT_BUCKETS_H_
#define DDPX_REDUCER_FLAT_BUCKETS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "reducer/bucket_assignment.h"

namespace ddpx {

struct FlatBucket {
  // Indices into the tensor list the bucket was built from, in buffer order.
  std::vector<size_t> members;
  std::vector<int64_t> offsets;  // in elements
  std::vector<Shape> shapes;
  Tensor buffer;                 // flat, zero-initialized
  std::vector<Tensor> views;     // views[k] = buffer.view(offsets[k], shapes[k])
};

// Allocates one buffer per spec on the members' device, with the members'
// dtype. `like[i]` gives the shape, dtype and device of tensor i. Errors if
// a spec mixes dtypes or devices.
absl::StatusOr<std::vector<FlatBucket>> make_flat_buckets(
    const std::vector<BucketSpec>& specs, const std::vector<Tensor>& like);

// GradientSpecs (numel, dtype, device) of `tensors`.
std::vector<GradientSpec> gradient_specs(const std::vector<Tensor>& tensors);

// Copies tensors[members[k]] into views[k] for every member, or back. Back:
// when `written` is not empty, only members m with written[m] are.
absl::Status copy_into_bucket(const FlatBucket& bucket, const std::vector<Tensor>& tensors);
absl::Status copy_out_of_bucket(const FlatBucket& bucket, const std::vector<Tensor>& tensors,
                                const std::vector<bool>& written = {});

}  // namespace ddpx

#endif  // DDPX_REDUCER_FLAT_BUCKETS_H_

// Byte offsets of the pieces alltoall_base sends and receives. Plain C++.
#ifndef DDPX_PROCESS_GROUP_NCCL_ALLTOALL_PLAN_H_
#define DDPX_PROCESS_GROUP_NCCL_ALLTOALL_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ddpx {
namespace nccl {

struct Piece {
  int64_t offset = 0;  // elements from the tensor's start
  int64_t count = 0;   // elements
};

struct AlltoallPlan {
  std::vector<Piece> send;  // per peer rank
  std::vector<Piece> recv;
};

// Split sizes count first-dimension rows (empty: equal splits, the first
// dimension divisible by size). Errors name the tensor and the sizes.
absl::StatusOr<AlltoallPlan> alltoall_plan(const Tensor& output, const Tensor& input,
                                           const std::vector<int64_t>& output_split_sizes,
                                           const std::vector<int64_t>& input_split_sizes,
                                           int size);

}  // namespace nccl
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_NCCL_ALLTOALL_PLAN_H_

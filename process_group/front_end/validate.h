// Argument checks for every ProcessGroup op, run before a backend sees them.
// They are the only ones on an op's way down: backends trust what passes
// (core/backend.h; the Gloo backend's paths check nothing again,
// process_group/gloo/execution_plan.h).
//
// Each function returns OK or an InvalidArgument error whose message starts
// with the op's name and says what was expected and what came, e.g.
//   "allreduce: tensor 1 has dtype float64, expected float32 (the dtype of
//    tensor 0)".
// They only read shapes, dtypes and devices; no data is touched.
#ifndef DDPX_PROCESS_GROUP_FRONT_END_VALIDATE_H_
#define DDPX_PROCESS_GROUP_FRONT_END_VALIDATE_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/options.h"
#include "core/tensor.h"
#include "core/work.h"

namespace ddpx {
namespace validate {

// A rank that must lie in [0, size): "broadcast: root_rank 3 is out of range
// for a group of size 2 (valid: 0..1)".
absl::Status rank_in_range(OpType op, const char* what, int rank, int size);

// Non-empty, every tensor defined, one dtype and one device across the list;
// with same_numel, one element count too.
absl::Status tensor_list(OpType op, const TensorList& tensors, bool same_numel);

// `tensor` has the dtype and device of `like`, and `numel` elements.
absl::Status matches(OpType op, const std::string& what, const Tensor& tensor,
                     const Tensor& like, int64_t numel);

absl::Status allreduce(const TensorList& tensors, ReduceOp reduce_op);
absl::Status allreduce_coalesced(const TensorList& tensors, ReduceOp reduce_op);
absl::Status broadcast(const TensorList& tensors, const BroadcastOptions& opts,
                       int size);
absl::Status reduce(const TensorList& tensors, const ReduceOptions& opts,
                    int size);
absl::Status allgather(const std::vector<TensorList>& outputs,
                       const TensorList& inputs, int size);
absl::Status allgather_into_tensor(const Tensor& output, const Tensor& input,
                                   int size);
absl::Status reduce_scatter(const TensorList& outputs,
                            const std::vector<TensorList>& inputs,
                            ReduceOp reduce_op, int size);
absl::Status reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                   ReduceOp reduce_op, int size);
absl::Status gather(const std::vector<TensorList>& outputs,
                    const TensorList& inputs, int root_rank, int rank, int size);
absl::Status scatter(const TensorList& outputs,
                     const std::vector<TensorList>& inputs, int root_rank,
                     int rank, int size);
absl::Status alltoall(const TensorList& outputs, const TensorList& inputs,
                      int size);
absl::Status alltoall_base(const Tensor& output, const Tensor& input,
                           const std::vector<int64_t>& output_split_sizes,
                           const std::vector<int64_t>& input_split_sizes,
                           int size);
// An op's timeout, once resolved: positive.
absl::Status timeout(OpType op, std::chrono::milliseconds timeout);
// Peer in range and not this rank (recv_anysource: some other rank
// exists); tag non-negative.
absl::Status send_recv(OpType op, const TensorList& tensors, int peer,
                       int tag, int rank, int size);

}  // namespace validate
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_FRONT_END_VALIDATE_H_

// Runs one collective of the Gloo backend on its worker: the execution plan
// (execution_plan.h) picks the path, and the steps every path shares are
// done here, once, around whichever path runs:
//   - fold: an op over several local tensors reduces them into one first
//     (the first, or reduce's root tensor), so a path moves one buffer;
//   - AVG: every path reduces as SUM, and the result is divided by the
//     group size here (finish_reduction);
//   - copy back: the result goes from that buffer to the other tensors;
//   - staging: lists of tensors go through one contiguous buffer (the
//     worker's scratch) unless they already are one piece of memory.
// Tags, the op's timeout, tracing and error naming come with the OpContext
// from GlooBackend::enqueue; the front end counts the payload bytes.
// Throws what the paths throw (gloo's exceptions, StatusError).
#ifndef DDPX_PROCESS_GROUP_GLOO_COLLECTIVE_RUNNER_H_
#define DDPX_PROCESS_GROUP_GLOO_COLLECTIVE_RUNNER_H_

#include <cstdint>
#include <vector>

#include "core/options.h"
#include "core/tensor.h"
#include "core/work.h"
#include "process_group/gloo/execution_plan.h"
#include "process_group/gloo/op_context.h"

namespace ddpx {

// The AVG step: `result` holds a SUM over `size` ranks; for AVG it is
// divided in place, for every other op left alone.
void finish_reduction(const Tensor& result, ReduceOp op, int size);

class CollectiveRunner {
 public:
  // `plan` outlives the runner (both belong to one GlooBackend).
  CollectiveRunner(const ExecutionPlan& plan, int rank, int size)
      : plan_(plan), rank_(rank), size_(size) {}

  // Every tensor gets the reduction of all ranks' tensors (torch's
  // multi-tensor allreduce).
  void allreduce(const OpContext& c, const TensorList& tensors, ReduceOp op) const;
  // One flat message for all of them.
  void allreduce_coalesced(const OpContext& c, const TensorList& tensors, ReduceOp op) const;
  void broadcast(const OpContext& c, const TensorList& tensors, int root, int root_tensor) const;
  // In place, like torch: the root's tensor gets the result; on other ranks
  // the tensor is the paths' scratch and holds partial results afterwards.
  void reduce(const OpContext& c, const TensorList& tensors, ReduceOp op, int root,
              int root_tensor) const;
  // outputs[i][r] gets rank r's inputs[i].
  void allgather(const OpContext& c, const std::vector<TensorList>& outputs,
                 const TensorList& inputs) const;
  void allgather_into_tensor(const OpContext& c, const Tensor& output, const Tensor& input) const;
  void reduce_scatter(const OpContext& c, const TensorList& outputs,
                      const std::vector<TensorList>& inputs, ReduceOp op) const;
  void reduce_scatter_tensor(const OpContext& c, const Tensor& output, const Tensor& input,
                             ReduceOp op) const;
  // On the root, outputs[0][r] gets rank r's inputs[0].
  void gather(const OpContext& c, const std::vector<TensorList>& outputs,
              const TensorList& inputs, int root) const;
  // On the root, inputs[0][r] goes to rank r's outputs[0].
  void scatter(const OpContext& c, const TensorList& outputs,
               const std::vector<TensorList>& inputs, int root) const;
  void alltoall(const OpContext& c, const TensorList& outputs, const TensorList& inputs) const;
  // Per-rank byte counts (split sizes already turned into bytes).
  void alltoall_base(const OpContext& c, const Tensor& output, const Tensor& input,
                     const std::vector<int64_t>& out_bytes,
                     const std::vector<int64_t>& in_bytes) const;
  void barrier(const OpContext& c) const;

 private:
  // The path of one tensor's allreduce, in place on `t` (no fold, no AVG).
  void allreduce_one(const OpContext& c, const Tensor& t, ReduceOp op) const;
  // allgather of raw bytes; `tag` is the op's for this tensor.
  void allgather_bytes(const OpContext& c, const void* in, void* out, size_t nbytes_per_rank,
                       uint32_t tag) const;
  // reduce_scatter of `input` (size chunks of output.numel()) into `output`,
  // the paths' scratch at `scratch` (reduce_scatter_scratch() elements).
  void reduce_scatter_one(const OpContext& c, Path path, const void* input, const Tensor& output,
                          ReduceOp op, uint32_t tag, void* scratch) const;
  int64_t reduce_scatter_scratch(Path path, const void* input, const Tensor& output) const;

  const ExecutionPlan& plan_;
  const int rank_;
  const int size_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_COLLECTIVE_RUNNER_H_

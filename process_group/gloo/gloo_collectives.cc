// GlooBackend's collectives: each queues a body that CollectiveRunner runs on
// the worker, along the path the group's execution plan picks for it
// (execution_plan.h). `match` (match_key) goes into the op's tags.
#include "process_group/gloo/gloo_backend.h"
#include "process_group/gloo/gloo_internal.h"

namespace ddpx {
namespace {

uint64_t total_bytes(const TensorList& tensors) {
  uint64_t n = 0;
  for (const Tensor& t : tensors) n += t.nbytes();
  return n;
}

// Per-rank byte counts of a tensor split along its first dimension.
std::vector<int64_t> split_bytes(const Tensor& t, const std::vector<int64_t>& rows, int size) {
  std::vector<int64_t> bytes(size);
  if (rows.empty()) {
    for (int r = 0; r < size; ++r) bytes[r] = t.nbytes() / size;
    return bytes;
  }
  const int64_t rows_total = t.dim() > 0 ? t.size(0) : 1;
  const int64_t row_bytes = rows_total > 0 ? t.nbytes() / rows_total : 0;
  for (int r = 0; r < size; ++r) bytes[r] = rows[r] * row_bytes;
  return bytes;
}

}  // namespace

std::shared_ptr<Work> GlooBackend::allreduce(const TensorList& tensors,
                                             const AllreduceOptions& opts) {
  if (std::shared_ptr<Work> work = small_allreduce_here(tensors, opts)) return work;
  return enqueue(OpType::kAllreduce, TensorSummary(tensors), opts.timeout,
                 [this, tensors, opts](const OpContext& c) mutable -> absl::StatusOr<TensorList> {
                   runner_->allreduce(c, tensors, opts.op);
                   return std::move(tensors);  // the body runs once
                 },
                 tensors.empty() ? 0 : match_key(tensors[0].nbytes(), tensors[0].dtype(), -1));
}

std::shared_ptr<Work> GlooBackend::allreduce_coalesced(
    const TensorList& tensors, const AllreduceOptions& opts) {
  return enqueue(
      OpType::kAllreduceCoalesced, TensorSummary(tensors), opts.timeout,
      [this, tensors, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->allreduce_coalesced(c, tensors, opts.op);
        return tensors;
      },
      tensors.empty() ? 0 : match_key(total_bytes(tensors), tensors[0].dtype(), -1));
}

std::shared_ptr<Work> GlooBackend::broadcast(const TensorList& tensors,
                                             const BroadcastOptions& opts) {
  return enqueue(
      OpType::kBroadcast, TensorSummary(tensors), opts.timeout,
      [this, tensors, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->broadcast(c, tensors, opts.root_rank, opts.root_tensor);
        return tensors;
      },
      tensors.empty() ? 0
                      : match_key(tensors[0].nbytes(), tensors[0].dtype(), opts.root_rank));
}

std::shared_ptr<Work> GlooBackend::reduce(const TensorList& tensors,
                                          const ReduceOptions& opts) {
  return enqueue(
      OpType::kReduce, TensorSummary(tensors), opts.timeout,
      [this, tensors, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->reduce(c, tensors, opts.op, opts.root_rank, opts.root_tensor);
        return tensors;
      },
      tensors.empty() ? 0
                      : match_key(tensors[0].nbytes(), tensors[0].dtype(), opts.root_rank));
}

std::shared_ptr<Work> GlooBackend::allgather(
    const std::vector<TensorList>& outputs, const TensorList& inputs,
    const AllgatherOptions& opts) {
  return enqueue(
      OpType::kAllgather, TensorSummary(inputs), opts.timeout,
      [this, outputs, inputs](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->allgather(c, outputs, inputs);
        TensorList flat_outputs;
        for (const TensorList& list : outputs) {
          flat_outputs.insert(flat_outputs.end(), list.begin(), list.end());
        }
        return flat_outputs;
      });
}

std::shared_ptr<Work> GlooBackend::allgather_into_tensor(
    const Tensor& output, const Tensor& input, const AllgatherOptions& opts) {
  return enqueue(
      OpType::kAllgatherIntoTensor, TensorSummary(input), opts.timeout,
      [this, output, input](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->allgather_into_tensor(c, output, input);
        return TensorList{output};
      });
}

std::shared_ptr<Work> GlooBackend::reduce_scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ReduceScatterOptions& opts) {
  return enqueue(
      OpType::kReduceScatter, TensorSummary(outputs), opts.timeout,
      [this, outputs, inputs, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->reduce_scatter(c, outputs, inputs, opts.op);
        return outputs;
      });
}

std::shared_ptr<Work> GlooBackend::reduce_scatter_tensor(
    const Tensor& output, const Tensor& input,
    const ReduceScatterOptions& opts) {
  return enqueue(
      OpType::kReduceScatterTensor, TensorSummary(input), opts.timeout,
      [this, output, input, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->reduce_scatter_tensor(c, output, input, opts.op);
        return TensorList{output};
      });
}

std::shared_ptr<Work> GlooBackend::gather(
    const std::vector<TensorList>& outputs, const TensorList& inputs,
    const GatherOptions& opts) {
  return enqueue(
      OpType::kGather, TensorSummary(inputs), opts.timeout,
      [this, outputs, inputs, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->gather(c, outputs, inputs, opts.root_rank);
        return rank() == opts.root_rank ? outputs[0] : TensorList{};
      });
}

std::shared_ptr<Work> GlooBackend::scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ScatterOptions& opts) {
  return enqueue(
      OpType::kScatter, TensorSummary(outputs), opts.timeout,
      [this, outputs, inputs, opts](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->scatter(c, outputs, inputs, opts.root_rank);
        return outputs;
      });
}

std::shared_ptr<Work> GlooBackend::alltoall(const TensorList& outputs,
                                            const TensorList& inputs,
                                            const AllToAllOptions& opts) {
  return enqueue(
      OpType::kAlltoall, TensorSummary(inputs), opts.timeout,
      [this, outputs, inputs](const OpContext& c) -> absl::StatusOr<TensorList> {
        runner_->alltoall(c, outputs, inputs);
        return outputs;
      });
}

std::shared_ptr<Work> GlooBackend::alltoall_base(
    const Tensor& output, const Tensor& input,
    const std::vector<int64_t>& output_split_sizes,
    const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  std::vector<int64_t> in_bytes = split_bytes(input, input_split_sizes, size());
  std::vector<int64_t> out_bytes = split_bytes(output, output_split_sizes, size());
  return enqueue(OpType::kAlltoallBase, TensorSummary(input), opts.timeout,
                 [this, output, input, in_bytes, out_bytes](
                     const OpContext& c) -> absl::StatusOr<TensorList> {
                   runner_->alltoall_base(c, output, input, out_bytes, in_bytes);
                   return TensorList{output};
                 });
}

std::shared_ptr<Work> GlooBackend::barrier(const BarrierOptions& opts) {
  return enqueue(OpType::kBarrier, TensorSummary(), opts.timeout,
                 [this](const OpContext& c) -> absl::StatusOr<TensorList> {
                   runner_->barrier(c);
                   return TensorList{};
                 });
}

}  // namespace ddpx

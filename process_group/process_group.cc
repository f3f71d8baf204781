#include "process_group/process_group.h"

#include <utility>

#include "process_group/debug_check.h"
#include "process_group/validate.h"

namespace ddpx {
namespace {

uint64_t bytes_of(const TensorList& tensors) {
  uint64_t n = 0;
  for (const Tensor& t : tensors) n += t.nbytes();
  return n;
}

uint64_t bytes_of(const std::vector<TensorList>& lists) {
  uint64_t n = 0;
  for (const TensorList& l : lists) n += bytes_of(l);
  return n;
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<Backend> backend,
                           std::shared_ptr<Store> store,
                           std::chrono::milliseconds timeout)
    : backend_(std::move(backend)), store_(std::move(store)), timeout_(timeout) {
  if (debug_detail_from_env() && store_ != nullptr) {
    debug_ = std::make_unique<DebugChecker>(store_, rank(), size());
  }
}

ProcessGroup::~ProcessGroup() = default;

std::chrono::milliseconds ProcessGroup::resolve(
    std::chrono::milliseconds timeout) const {
  return timeout < std::chrono::milliseconds::zero() ? timeout_ : timeout;
}

absl::Status ProcessGroup::admit(absl::Status valid,
                                 const CollectiveFingerprint* fingerprint,
                                 std::chrono::milliseconds timeout,
                                 uint64_t payload_bytes) {
  if (!valid.ok()) return valid;
  if (debug_ != nullptr && fingerprint != nullptr) {
    absl::Status agreed = debug_->check(*fingerprint, timeout);
    if (!agreed.ok()) return agreed;
  }
  counters_.ops.fetch_add(1, std::memory_order_relaxed);
  counters_.payload_bytes.fetch_add(payload_bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

std::shared_ptr<Work> ProcessGroup::allreduce(const TensorList& tensors,
                                              const AllreduceOptions& options) {
  AllreduceOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp =
      CollectiveFingerprint(OpType::kAllreduce).tensors(tensors).reduce_op(opts.op);
  absl::Status s = admit(validate::allreduce(tensors, opts.op), &fp,
                         opts.timeout, bytes_of(tensors));
  if (!s.ok()) return FutureWork::failed(OpType::kAllreduce, s);
  return backend_->allreduce(tensors, opts);
}

std::shared_ptr<Work> ProcessGroup::allreduce_coalesced(
    const TensorList& tensors, const AllreduceOptions& options) {
  AllreduceOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp = CollectiveFingerprint(OpType::kAllreduceCoalesced)
                                 .tensors(tensors)
                                 .reduce_op(opts.op);
  absl::Status s = admit(validate::allreduce_coalesced(tensors, opts.op), &fp,
                         opts.timeout, bytes_of(tensors));
  if (!s.ok()) return FutureWork::failed(OpType::kAllreduceCoalesced, s);
  return backend_->allreduce_coalesced(tensors, opts);
}

std::shared_ptr<Work> ProcessGroup::broadcast(const TensorList& tensors,
                                              const BroadcastOptions& options) {
  BroadcastOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp =
      CollectiveFingerprint(OpType::kBroadcast).tensors(tensors).root(opts.root_rank);
  absl::Status s = admit(validate::broadcast(tensors, opts, size()), &fp,
                         opts.timeout, bytes_of(tensors));
  if (!s.ok()) return FutureWork::failed(OpType::kBroadcast, s);
  return backend_->broadcast(tensors, opts);
}

std::shared_ptr<Work> ProcessGroup::reduce(const TensorList& tensors,
                                           const ReduceOptions& options) {
  ReduceOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp = CollectiveFingerprint(OpType::kReduce)
                                 .tensors(tensors)
                                 .root(opts.root_rank)
                                 .reduce_op(opts.op);
  absl::Status s = admit(validate::reduce(tensors, opts, size()), &fp,
                         opts.timeout, bytes_of(tensors));
  if (!s.ok()) return FutureWork::failed(OpType::kReduce, s);
  return backend_->reduce(tensors, opts);
}

std::shared_ptr<Work> ProcessGroup::allgather(
    const std::vector<TensorList>& outputs, const TensorList& inputs,
    const AllgatherOptions& options) {
  AllgatherOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp = CollectiveFingerprint(OpType::kAllgather).tensors(inputs);
  absl::Status s = admit(validate::allgather(outputs, inputs, size()), &fp,
                         opts.timeout, bytes_of(inputs));
  if (!s.ok()) return FutureWork::failed(OpType::kAllgather, s);
  return backend_->allgather(outputs, inputs, opts);
}

std::shared_ptr<Work> ProcessGroup::allgather_into_tensor(
    const Tensor& output, const Tensor& input, const AllgatherOptions& options) {
  AllgatherOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp =
      CollectiveFingerprint(OpType::kAllgatherIntoTensor).tensors({input});
  absl::Status s = admit(validate::allgather_into_tensor(output, input, size()),
                         &fp, opts.timeout, input.nbytes());
  if (!s.ok()) return FutureWork::failed(OpType::kAllgatherIntoTensor, s);
  return backend_->allgather_into_tensor(output, input, opts);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ReduceScatterOptions& options) {
  ReduceScatterOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp = CollectiveFingerprint(OpType::kReduceScatter)
                                 .tensors(outputs)
                                 .reduce_op(opts.op);
  absl::Status s =
      admit(validate::reduce_scatter(outputs, inputs, opts.op, size()), &fp,
            opts.timeout, bytes_of(inputs));
  if (!s.ok()) return FutureWork::failed(OpType::kReduceScatter, s);
  return backend_->reduce_scatter(outputs, inputs, opts);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(
    const Tensor& output, const Tensor& input,
    const ReduceScatterOptions& options) {
  ReduceScatterOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp = CollectiveFingerprint(OpType::kReduceScatterTensor)
                                 .tensors({output})
                                 .reduce_op(opts.op);
  absl::Status s =
      admit(validate::reduce_scatter_tensor(output, input, opts.op, size()), &fp,
            opts.timeout, input.nbytes());
  if (!s.ok()) return FutureWork::failed(OpType::kReduceScatterTensor, s);
  return backend_->reduce_scatter_tensor(output, input, opts);
}

std::shared_ptr<Work> ProcessGroup::gather(const std::vector<TensorList>& outputs,
                                           const TensorList& inputs,
                                           const GatherOptions& options) {
  GatherOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp =
      CollectiveFingerprint(OpType::kGather).tensors(inputs).root(opts.root_rank);
  absl::Status s =
      admit(validate::gather(outputs, inputs, opts.root_rank, rank(), size()),
            &fp, opts.timeout, bytes_of(inputs));
  if (!s.ok()) return FutureWork::failed(OpType::kGather, s);
  return backend_->gather(outputs, inputs, opts);
}

std::shared_ptr<Work> ProcessGroup::scatter(const TensorList& outputs,
                                            const std::vector<TensorList>& inputs,
                                            const ScatterOptions& options) {
  ScatterOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp =
      CollectiveFingerprint(OpType::kScatter).tensors(outputs).root(opts.root_rank);
  absl::Status s =
      admit(validate::scatter(outputs, inputs, opts.root_rank, rank(), size()),
            &fp, opts.timeout, bytes_of(inputs));
  if (!s.ok()) return FutureWork::failed(OpType::kScatter, s);
  return backend_->scatter(outputs, inputs, opts);
}

std::shared_ptr<Work> ProcessGroup::alltoall(const TensorList& outputs,
                                             const TensorList& inputs,
                                             const AllToAllOptions& options) {
  AllToAllOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  // Per-peer sizes may legally differ between ranks: compare dtypes only.
  CollectiveFingerprint fp = CollectiveFingerprint(OpType::kAlltoall).dtypes(inputs);
  absl::Status s = admit(validate::alltoall(outputs, inputs, size()), &fp,
                         opts.timeout, bytes_of(inputs));
  if (!s.ok()) return FutureWork::failed(OpType::kAlltoall, s);
  return backend_->alltoall(outputs, inputs, opts);
}

std::shared_ptr<Work> ProcessGroup::alltoall_base(
    const Tensor& output, const Tensor& input,
    const std::vector<int64_t>& output_split_sizes,
    const std::vector<int64_t>& input_split_sizes,
    const AllToAllOptions& options) {
  AllToAllOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp(OpType::kAlltoallBase);
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    fp.tensors({input});  // equal splits: every rank sends the same shape
  } else {
    fp.dtypes({input});
  }
  absl::Status s =
      admit(validate::alltoall_base(output, input, output_split_sizes,
                                    input_split_sizes, size()),
            &fp, opts.timeout, input.nbytes());
  if (!s.ok()) return FutureWork::failed(OpType::kAlltoallBase, s);
  return backend_->alltoall_base(output, input, output_split_sizes,
                                 input_split_sizes, opts);
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& options) {
  BarrierOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  CollectiveFingerprint fp(OpType::kBarrier);
  absl::Status s = admit(absl::OkStatus(), &fp, opts.timeout, 0);
  if (!s.ok()) return FutureWork::failed(OpType::kBarrier, s);
  return backend_->barrier(opts);
}

std::shared_ptr<Work> ProcessGroup::monitored_barrier(
    const BarrierOptions& options, bool wait_all_ranks) {
  BarrierOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  // Not cross-checked: naming the ranks that do not arrive is its whole job,
  // and the debug check would report them first, less precisely.
  absl::Status s = admit(absl::OkStatus(), nullptr, opts.timeout, 0);
  if (!s.ok()) return FutureWork::failed(OpType::kMonitoredBarrier, s);
  return backend_->monitored_barrier(opts, wait_all_ranks);
}

std::shared_ptr<Work> ProcessGroup::send(const TensorList& tensors, int dst_rank,
                                         const SendRecvOptions& options) {
  SendRecvOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  absl::Status s = admit(validate::send_recv(OpType::kSend, tensors, dst_rank,
                                             opts.tag, rank(), size()),
                         nullptr, opts.timeout, bytes_of(tensors));
  if (!s.ok()) return FutureWork::failed(OpType::kSend, s);
  return backend_->send(tensors, dst_rank, opts);
}

std::shared_ptr<Work> ProcessGroup::recv(const TensorList& tensors, int src_rank,
                                         const SendRecvOptions& options) {
  SendRecvOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  absl::Status s = admit(validate::send_recv(OpType::kRecv, tensors, src_rank,
                                             opts.tag, rank(), size()),
                         nullptr, opts.timeout, 0);
  if (!s.ok()) return FutureWork::failed(OpType::kRecv, s);
  return backend_->recv(tensors, src_rank, opts);
}

std::shared_ptr<Work> ProcessGroup::recv_anysource(const TensorList& tensors,
                                                   const SendRecvOptions& options) {
  SendRecvOptions opts = options;
  opts.timeout = resolve(opts.timeout);
  absl::Status s = admit(validate::send_recv(OpType::kRecvAnysource, tensors,
                                             -1, opts.tag, rank(), size()),
                         nullptr, opts.timeout, 0);
  if (!s.ok()) return FutureWork::failed(OpType::kRecvAnysource, s);
  return backend_->recv_anysource(tensors, opts);
}

}  // namespace ddpx

#include "process_group/front_end/process_group.h"

#include <utility>

#include "process_group/front_end/debug_check.h"
#include "process_group/front_end/validate.h"

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
  trace_ = FlightRecorder::get().attach_group(store_, backend_.get(), rank(), size(),
                                              backend_->name());
}

ProcessGroup::~ProcessGroup() = default;

absl::StatusOr<std::shared_ptr<const void>> ProcessGroup::memoize(
    const std::string& key,
    const std::function<absl::StatusOr<std::shared_ptr<const void>>()>& build) {
  std::lock_guard<std::mutex> lock(memo_mu_);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  absl::StatusOr<std::shared_ptr<const void>> built = build();
  if (built.ok()) memo_.emplace(key, *built);
  return built;
}

std::chrono::milliseconds ProcessGroup::resolve(const OpTimeout& timeout) const {
  return timeout.value_or(timeout_);
}

absl::Status ProcessGroup::admit(absl::Status valid,
                                 const CollectiveFingerprint* fingerprint,
                                 std::chrono::milliseconds timeout,
                                 uint64_t payload_bytes) {
  if (!valid.ok()) return valid;
  if (debug_ != nullptr && fingerprint != nullptr &&
      !is_point_to_point(fingerprint->op())) {
    absl::Status agreed = debug_->check(*fingerprint, timeout);
    if (!agreed.ok()) return agreed;
  }
  counters_.ops.fetch_add(1, std::memory_order_relaxed);
  counters_.payload_bytes.fetch_add(payload_bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

template <typename Options, typename Launch>
std::shared_ptr<Work> ProcessGroup::dispatch(OpType op, Options opts,
                                             absl::Status valid,
                                             const CollectiveFingerprint* fingerprint,
                                             uint64_t payload_bytes, Launch launch) {
  const std::chrono::milliseconds timeout = resolve(opts.timeout);
  if (valid.ok()) valid = validate::timeout(op, timeout);
  opts.timeout = timeout;
  absl::Status s = admit(std::move(valid), fingerprint, timeout, payload_bytes);
  if (!s.ok()) return FutureWork::failed(op, std::move(s));
  return launch_traced(*trace_, op, fingerprint != nullptr ? fingerprint->trace() : TraceOp{},
                       timeout, backend_->claims_traces(), [&] { return launch(opts); });
}

std::shared_ptr<Work> ProcessGroup::allreduce(const TensorList& tensors,
                                              const AllreduceOptions& opts) {
  const OpType op = OpType::kAllreduce;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(tensors).reduce_op(opts.op);
  return dispatch(op, opts, validate::allreduce(tensors, opts.op), &fp,
                  bytes_of(tensors), [&](const AllreduceOptions& o) {
                    return backend_->allreduce(tensors, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::allreduce_coalesced(
    const TensorList& tensors, const AllreduceOptions& opts) {
  const OpType op = OpType::kAllreduceCoalesced;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(tensors).reduce_op(opts.op);
  return dispatch(op, opts, validate::allreduce_coalesced(tensors, opts.op), &fp,
                  bytes_of(tensors), [&](const AllreduceOptions& o) {
                    return backend_->allreduce_coalesced(tensors, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::broadcast(const TensorList& tensors,
                                              const BroadcastOptions& opts) {
  const OpType op = OpType::kBroadcast;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(tensors).root(opts.root_rank);
  return dispatch(op, opts, validate::broadcast(tensors, opts, size()), &fp,
                  bytes_of(tensors), [&](const BroadcastOptions& o) {
                    return backend_->broadcast(tensors, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::reduce(const TensorList& tensors,
                                           const ReduceOptions& opts) {
  const OpType op = OpType::kReduce;
  CollectiveFingerprint fp =
      CollectiveFingerprint(op).tensors(tensors).root(opts.root_rank).reduce_op(opts.op);
  return dispatch(op, opts, validate::reduce(tensors, opts, size()), &fp,
                  bytes_of(tensors), [&](const ReduceOptions& o) {
                    return backend_->reduce(tensors, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::allgather(const std::vector<TensorList>& outputs,
                                              const TensorList& inputs,
                                              const AllgatherOptions& opts) {
  const OpType op = OpType::kAllgather;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(inputs);
  return dispatch(op, opts, validate::allgather(outputs, inputs, size()), &fp,
                  bytes_of(inputs), [&](const AllgatherOptions& o) {
                    return backend_->allgather(outputs, inputs, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::allgather_into_tensor(
    const Tensor& output, const Tensor& input, const AllgatherOptions& opts) {
  const OpType op = OpType::kAllgatherIntoTensor;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors({input});
  return dispatch(op, opts, validate::allgather_into_tensor(output, input, size()),
                  &fp, input.nbytes(), [&](const AllgatherOptions& o) {
                    return backend_->allgather_into_tensor(output, input, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ReduceScatterOptions& opts) {
  const OpType op = OpType::kReduceScatter;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(outputs).reduce_op(opts.op);
  return dispatch(op, opts, validate::reduce_scatter(outputs, inputs, opts.op, size()),
                  &fp, bytes_of(inputs), [&](const ReduceScatterOptions& o) {
                    return backend_->reduce_scatter(outputs, inputs, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(
    const Tensor& output, const Tensor& input, const ReduceScatterOptions& opts) {
  const OpType op = OpType::kReduceScatterTensor;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors({output}).reduce_op(opts.op);
  return dispatch(op, opts,
                  validate::reduce_scatter_tensor(output, input, opts.op, size()), &fp,
                  input.nbytes(), [&](const ReduceScatterOptions& o) {
                    return backend_->reduce_scatter_tensor(output, input, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::gather(const std::vector<TensorList>& outputs,
                                           const TensorList& inputs,
                                           const GatherOptions& opts) {
  const OpType op = OpType::kGather;
  // Only the root passes outputs: fingerprint the inputs every rank has.
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(inputs).root(opts.root_rank);
  return dispatch(op, opts,
                  validate::gather(outputs, inputs, opts.root_rank, rank(), size()),
                  &fp, bytes_of(inputs), [&](const GatherOptions& o) {
                    return backend_->gather(outputs, inputs, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::scatter(const TensorList& outputs,
                                            const std::vector<TensorList>& inputs,
                                            const ScatterOptions& opts) {
  const OpType op = OpType::kScatter;
  // Only the root passes inputs: fingerprint the outputs every rank has.
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(outputs).root(opts.root_rank);
  return dispatch(op, opts,
                  validate::scatter(outputs, inputs, opts.root_rank, rank(), size()),
                  &fp, bytes_of(inputs), [&](const ScatterOptions& o) {
                    return backend_->scatter(outputs, inputs, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::alltoall(const TensorList& outputs,
                                             const TensorList& inputs,
                                             const AllToAllOptions& opts) {
  const OpType op = OpType::kAlltoall;
  // Per-peer sizes may legally differ between ranks: compare dtypes only.
  CollectiveFingerprint fp = CollectiveFingerprint(op).dtypes(inputs);
  return dispatch(op, opts, validate::alltoall(outputs, inputs, size()), &fp,
                  bytes_of(inputs), [&](const AllToAllOptions& o) {
                    return backend_->alltoall(outputs, inputs, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::alltoall_base(
    const Tensor& output, const Tensor& input,
    const std::vector<int64_t>& output_split_sizes,
    const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  const OpType op = OpType::kAlltoallBase;
  CollectiveFingerprint fp(op);
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    fp.tensors({input});  // equal splits: every rank sends the same shape
  } else {
    fp.dtypes({input});
  }
  return dispatch(op, opts,
                  validate::alltoall_base(output, input, output_split_sizes,
                                          input_split_sizes, size()),
                  &fp, input.nbytes(), [&](const AllToAllOptions& o) {
                    return backend_->alltoall_base(output, input, output_split_sizes,
                                                   input_split_sizes, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& opts) {
  const OpType op = OpType::kBarrier;
  CollectiveFingerprint fp(op);
  return dispatch(op, opts, absl::OkStatus(), &fp, 0,
                  [&](const BarrierOptions& o) { return backend_->barrier(o); });
}

std::shared_ptr<Work> ProcessGroup::monitored_barrier(const BarrierOptions& opts,
                                                      bool wait_all_ranks) {
  // Not cross-checked: naming the ranks that do not arrive is its whole job,
  // and the debug check would report them first, less precisely.
  return dispatch(OpType::kMonitoredBarrier, opts, absl::OkStatus(), nullptr, 0,
                  [&](const BarrierOptions& o) {
                    return backend_->monitored_barrier(o, wait_all_ranks);
                  });
}

std::shared_ptr<Work> ProcessGroup::send(const TensorList& tensors, int dst_rank,
                                         const SendRecvOptions& opts) {
  const OpType op = OpType::kSend;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(tensors).peer(dst_rank, opts.tag);
  return dispatch(op, opts,
                  validate::send_recv(op, tensors, dst_rank, opts.tag, rank(), size()),
                  &fp, bytes_of(tensors), [&](const SendRecvOptions& o) {
                    return backend_->send(tensors, dst_rank, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::recv(const TensorList& tensors, int src_rank,
                                         const SendRecvOptions& opts) {
  const OpType op = OpType::kRecv;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(tensors).peer(src_rank, opts.tag);
  return dispatch(op, opts,
                  validate::send_recv(op, tensors, src_rank, opts.tag, rank(), size()),
                  &fp, 0, [&](const SendRecvOptions& o) {
                    return backend_->recv(tensors, src_rank, o);
                  });
}

std::shared_ptr<Work> ProcessGroup::recv_anysource(const TensorList& tensors,
                                                   const SendRecvOptions& opts) {
  const OpType op = OpType::kRecvAnysource;
  CollectiveFingerprint fp = CollectiveFingerprint(op).tensors(tensors).peer(-1, opts.tag);
  return dispatch(op, opts,
                  validate::send_recv(op, tensors, -1, opts.tag, rank(), size()),
                  &fp, 0, [&](const SendRecvOptions& o) {
                    return backend_->recv_anysource(tensors, o);
                  });
}

}  // namespace ddpx

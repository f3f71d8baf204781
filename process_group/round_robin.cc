#include "process_group/round_robin.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {

absl::StatusOr<std::shared_ptr<RoundRobinBackend>> RoundRobinBackend::create(
    std::vector<std::shared_ptr<Backend>> backends) {
  if (backends.empty()) {
    return absl::InvalidArgumentError("round_robin: needs at least one backend, got none");
  }
  for (size_t i = 0; i < backends.size(); ++i) {
    if (backends[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("round_robin: backend ", i, " is null"));
    }
    if (backends[i]->rank() != backends[0]->rank() ||
        backends[i]->size() != backends[0]->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "round_robin: backend ", i, " (", backends[i]->name(), ") is rank ",
          backends[i]->rank(), " of ", backends[i]->size(), ", expected rank ",
          backends[0]->rank(), " of ", backends[0]->size(),
          " like backend 0 (", backends[0]->name(), ")"));
    }
  }
  return std::shared_ptr<RoundRobinBackend>(new RoundRobinBackend(std::move(backends)));
}

RoundRobinBackend::RoundRobinBackend(std::vector<std::shared_ptr<Backend>> backends)
    : Backend(backends[0]->rank(), backends[0]->size()),
      backends_(std::move(backends)) {
  for (size_t i = 0; i < backends_.size(); ++i) {
    dispatched_.push_back(std::make_unique<std::atomic<uint64_t>>(0));
  }
}

std::string RoundRobinBackend::name() const {
  bool alike = true;
  for (const auto& b : backends_) alike = alike && b->name() == backends_[0]->name();
  if (alike) return absl::StrCat("round_robin:", backends_[0]->name(), "*", backends_.size());
  return absl::StrCat(
      "round_robin:",
      absl::StrJoin(backends_, ",", [](std::string* out, const auto& b) {
        out->append(b->name());
      }));
}

Backend& RoundRobinBackend::next() {
  size_t i = next_.fetch_add(1) % backends_.size();
  dispatched_[i]->fetch_add(1);
  return *backends_[i];
}

std::shared_ptr<Work> RoundRobinBackend::refuse(OpType op) const {
  return FutureWork::failed(
      op, absl::UnimplementedError(absl::StrCat(
              op_type_name(op), ": the ", name(),
              " backend does not support point-to-point ops (a send and its "
              "recv could land on different backends); use a plain backend "
              "such as \"gloo\" for send/recv")));
}

std::shared_ptr<Work> RoundRobinBackend::allreduce(const TensorList& tensors,
                                                   const AllreduceOptions& opts) {
  return next().allreduce(tensors, opts);
}
std::shared_ptr<Work> RoundRobinBackend::allreduce_coalesced(
    const TensorList& tensors, const AllreduceOptions& opts) {
  return next().allreduce_coalesced(tensors, opts);
}
std::shared_ptr<Work> RoundRobinBackend::broadcast(const TensorList& tensors,
                                                   const BroadcastOptions& opts) {
  return next().broadcast(tensors, opts);
}
std::shared_ptr<Work> RoundRobinBackend::reduce(const TensorList& tensors,
                                                const ReduceOptions& opts) {
  return next().reduce(tensors, opts);
}
std::shared_ptr<Work> RoundRobinBackend::allgather(
    const std::vector<TensorList>& outputs, const TensorList& inputs,
    const AllgatherOptions& opts) {
  return next().allgather(outputs, inputs, opts);
}
std::shared_ptr<Work> RoundRobinBackend::allgather_into_tensor(
    const Tensor& output, const Tensor& input, const AllgatherOptions& opts) {
  return next().allgather_into_tensor(output, input, opts);
}
std::shared_ptr<Work> RoundRobinBackend::reduce_scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ReduceScatterOptions& opts) {
  return next().reduce_scatter(outputs, inputs, opts);
}
std::shared_ptr<Work> RoundRobinBackend::reduce_scatter_tensor(
    const Tensor& output, const Tensor& input, const ReduceScatterOptions& opts) {
  return next().reduce_scatter_tensor(output, input, opts);
}
std::shared_ptr<Work> RoundRobinBackend::gather(
    const std::vector<TensorList>& outputs, const TensorList& inputs,
    const GatherOptions& opts) {
  return next().gather(outputs, inputs, opts);
}
std::shared_ptr<Work> RoundRobinBackend::scatter(
    const TensorList& outputs, const std::vector<TensorList>& inputs,
    const ScatterOptions& opts) {
  return next().scatter(outputs, inputs, opts);
}
std::shared_ptr<Work> RoundRobinBackend::alltoall(const TensorList& outputs,
                                                  const TensorList& inputs,
                                                  const AllToAllOptions& opts) {
  return next().alltoall(outputs, inputs, opts);
}
std::shared_ptr<Work> RoundRobinBackend::alltoall_base(
    const Tensor& output, const Tensor& input,
    const std::vector<int64_t>& output_split_sizes,
    const std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  return next().alltoall_base(output, input, output_split_sizes,
                              input_split_sizes, opts);
}
std::shared_ptr<Work> RoundRobinBackend::barrier(const BarrierOptions& opts) {
  return next().barrier(opts);
}
std::shared_ptr<Work> RoundRobinBackend::monitored_barrier(
    const BarrierOptions& opts, bool wait_all_ranks) {
  return next().monitored_barrier(opts, wait_all_ranks);
}
std::shared_ptr<Work> RoundRobinBackend::send(const TensorList&, int,
                                              const SendRecvOptions&) {
  return refuse(OpType::kSend);
}
std::shared_ptr<Work> RoundRobinBackend::recv(const TensorList&, int,
                                              const SendRecvOptions&) {
  return refuse(OpType::kRecv);
}
std::shared_ptr<Work> RoundRobinBackend::recv_anysource(const TensorList&,
                                                        const SendRecvOptions&) {
  return refuse(OpType::kRecvAnysource);
}

}  // namespace ddpx

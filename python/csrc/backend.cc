#include "python/csrc/backend.h"

#include <utility>

#include <Python.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "process_group/rendezvous/init.h"
#include "process_group/tracing/flight_recorder.h"
#include "process_group/tracing/trace_service.h"
#include "python/csrc/torch_store.h"
#include "store/prefix_store.h"
#include "python/csrc/torch_work.h"

namespace ddpx_torch {
namespace {

using WorkList = std::vector<std::shared_ptr<ddpx::Work>>;

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& list : lists) out.insert(out.end(), list.begin(), list.end());
  return out;
}

void check_not_empty(size_t n, const char* op, const char* what) {
  TORCH_CHECK(n > 0, "ddpx: ", op, ": ", what, " is an empty list");
}

}  // namespace

c10::intrusive_ptr<DdpxBackend> DdpxBackend::create(c10::intrusive_ptr<c10d::Store> store,
                                                    const BackendConfig& config) {
  // Named like init_process_group's groups in C++ (the flight recorder
  // names a group after its store's prefixes).
  auto ddpx_store = std::make_shared<ddpx::PrefixStore>(
      config.is_world ? std::string("default_pg") : "group_" + config.group_name,
      std::make_shared<TorchStore>(std::move(store)));
  absl::StatusOr<std::shared_ptr<ddpx::Backend>> backend = ddpx::create_backend(
      config.spec, ddpx_store, config.rank, config.size, config.timeout);
  if (!backend.ok()) {
    throw backend_error(absl::StrCat("ddpx: creating the backend of a group of ", config.size,
                                     " ranks (rank ", config.rank,
                                     "): ", backend.status().ToString()));
  }
  auto group =
      std::make_shared<ddpx::ProcessGroup>(*std::move(backend), ddpx_store, config.timeout);
  std::vector<int> ranks = config.global_ranks;
  if (ranks.empty()) {
    for (int r = 0; r < config.size; ++r) ranks.push_back(r);
  }
  ddpx::FlightRecorder::get().set_group_ranks(group->trace_group().index(), std::move(ranks));
  if (config.is_world) {
    // Dumps on failure, SIGUSR1 and peers' requests; peer states in errors.
    ddpx::TraceService::get().attach_world(ddpx_store, config.rank, config.size);
  }
  return c10::make_intrusive<DdpxBackend>(config, std::move(group));
}

DdpxBackend::DdpxBackend(const BackendConfig& config, std::shared_ptr<ddpx::ProcessGroup> group)
    : c10d::Backend(config.rank, config.size),
      config_(config),
      group_(std::move(group)),
      timeout_ms_(config.timeout.count()) {}

DdpxBackend::~DdpxBackend() {
  // Closing waits for the ops still running and for the peers' goodbye
  // (bounded by the timeout); Python's other threads go on meanwhile.
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  if (config_.is_world) ddpx::TraceService::get().detach_world();
  group_.reset();
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

c10::intrusive_ptr<c10d::Backend::Options> DdpxBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("ddpx", group_timeout());
  for (int r : config_.global_ranks) options->global_ranks_in_group.push_back(r);
  return options;
}

void DdpxBackend::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout.count() > 0, "ddpx: setTimeout: the timeout must be positive, got ",
              timeout.count(), " ms");
  timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::launch(c10d::OpType type, const char* title,
                                                   std::vector<at::Tensor> outputs,
                                                   std::shared_ptr<Staging> staging,
                                                   WorkList parts) {
  const uint64_t seq = ++sequence_;
  auto work = c10::make_intrusive<TorchWork>(config_.rank, type, title, std::move(outputs),
                                             std::move(staging), seq, group_timeout());
  return TorchWork::track(std::move(work), std::move(parts));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  check_not_empty(tensors.size(), "broadcast", "tensors");
  auto staging = std::make_shared<Staging>("broadcast");
  ddpx::BroadcastOptions o;
  o.root_rank = static_cast<int>(opts.rootRank);
  o.root_tensor = static_cast<int>(opts.rootTensor);
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->broadcast(staging->outputs(tensors, "tensor"), o);
  return launch(c10d::OpType::BROADCAST, "ddpx:broadcast", tensors, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  check_not_empty(tensors.size(), "all_reduce", "tensors");
  auto staging = std::make_shared<Staging>("all_reduce");
  ddpx::AllreduceOptions o;
  o.op = to_ddpx_reduce_op(opts.reduceOp, tensors[0].scalar_type(), "all_reduce");
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->allreduce(staging->outputs(tensors, "tensor"), o);
  return launch(c10d::OpType::ALLREDUCE, "ddpx:all_reduce", tensors, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  check_not_empty(tensors.size(), "all_reduce_coalesced", "tensors");
  auto staging = std::make_shared<Staging>("all_reduce_coalesced");
  ddpx::AllreduceOptions o;
  o.op = to_ddpx_reduce_op(opts.reduceOp, tensors[0].scalar_type(), "all_reduce_coalesced");
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->allreduce_coalesced(staging->outputs(tensors, "tensor"), o);
  return launch(c10d::OpType::ALLREDUCE_COALESCED, "ddpx:all_reduce_coalesced", tensors,
                staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  check_not_empty(tensors.size(), "reduce", "tensors");
  auto staging = std::make_shared<Staging>("reduce");
  ddpx::ReduceOptions o;
  o.op = to_ddpx_reduce_op(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  o.root_rank = static_cast<int>(opts.rootRank);
  o.root_tensor = static_cast<int>(opts.rootTensor);
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->reduce(staging->outputs(tensors, "tensor"), o);
  return launch(c10d::OpType::REDUCE, "ddpx:reduce", tensors, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  check_not_empty(inputs.size(), "all_gather", "input tensors");
  auto staging = std::make_shared<Staging>("all_gather");
  std::vector<ddpx::TensorList> out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    out.push_back(staging->outputs(outputs[i], "output list " + std::to_string(i) + ", tensor"));
  }
  ddpx::AllgatherOptions o;
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->allgather(out, staging->inputs(inputs, "input tensor"), o);
  return launch(c10d::OpType::ALLGATHER, "ddpx:all_gather", flatten(outputs), staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::all_gather_single(at::Tensor& output,
                                                              at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  auto staging = std::make_shared<Staging>("all_gather_into_tensor");
  ddpx::AllgatherOptions o;
  o.timeout = op_timeout(opts.timeout);
  ddpx::Tensor in = staging->input(input, "input");
  auto part = group_->allgather_into_tensor(staging->output(output, "output"), in, o);
  return launch(c10d::OpType::_ALLGATHER_BASE, "ddpx:all_gather_into_tensor", {output}, staging,
                {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // torch's layout (ProcessGroupGloo::allgather_coalesced checks the same):
  // outputs[r][i] receives rank r's input i.
  check_not_empty(inputs.size(), "all_gather_coalesced", "input tensors");
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_), "ddpx: all_gather_coalesced: ",
              outputs.size(), " output lists for a group of ", size_,
              " ranks (one list per rank, each with one tensor per input)");
  for (size_t r = 0; r < outputs.size(); ++r) {
    TORCH_CHECK(outputs[r].size() == inputs.size(), "ddpx: all_gather_coalesced: output list ",
                r, " holds ", outputs[r].size(), " tensors for ", inputs.size(), " inputs");
  }
  auto staging = std::make_shared<Staging>("all_gather_coalesced");
  ddpx::AllgatherOptions o;
  o.timeout = op_timeout(opts.timeout);
  WorkList parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string n = std::to_string(i);
    std::vector<at::Tensor> gathered;  // input i from every rank, in rank order
    for (auto& list : outputs) gathered.push_back(list[i]);
    std::vector<ddpx::TensorList> out = {
        staging->outputs(gathered, "output for input " + n + ", rank")};
    parts.push_back(group_->allgather(out, {staging->input(inputs[i], "input " + n)}, o));
  }
  return launch(c10d::OpType::ALLGATHER_COALESCED, "ddpx:all_gather_coalesced", flatten(outputs),
                staging, std::move(parts));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::all_gather_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ddpx: all_gather_into_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  auto staging = std::make_shared<Staging>("all_gather_into_tensor_coalesced");
  ddpx::AllgatherOptions o;
  o.timeout = op_timeout(opts.timeout);
  WorkList parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string n = std::to_string(i);
    ddpx::Tensor in = staging->input(inputs[i], "input " + n);
    parts.push_back(group_->allgather_into_tensor(staging->output(outputs[i], "output " + n), in, o));
  }
  return launch(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED,
                "ddpx:all_gather_into_tensor_coalesced", outputs, staging, std::move(parts));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  auto staging = std::make_shared<Staging>("gather");
  std::vector<ddpx::TensorList> out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    out.push_back(staging->outputs(outputs[i], "output list " + std::to_string(i) + ", tensor"));
  }
  ddpx::GatherOptions o;
  o.root_rank = static_cast<int>(opts.rootRank);
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->gather(out, staging->inputs(inputs, "input tensor"), o);
  return launch(c10d::OpType::GATHER, "ddpx:gather", flatten(outputs), staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::gather_single(at::Tensor& output, at::Tensor& input,
                                                          const c10d::GatherOptions& opts) {
  // The root's output holds size() inputs back to back: ddpx's gather into
  // views of it.
  std::vector<std::vector<at::Tensor>> outputs;
  if (opts.rootRank == config_.rank) {
    TORCH_CHECK(output.is_contiguous(), "ddpx: gather_into_tensor: the output must be contiguous");
    TORCH_CHECK(output.numel() == input.numel() * config_.size, "ddpx: gather_into_tensor: ",
                "the output holds ", output.numel(), " elements; ", config_.size,
                " ranks of ", input.numel(), " need ", input.numel() * config_.size);
    outputs.push_back(output.reshape({config_.size, input.numel()}).unbind(0));
  }
  std::vector<at::Tensor> inputs = {input.reshape({input.numel()})};
  auto work = gather(outputs, inputs, opts);
  return work;
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  auto staging = std::make_shared<Staging>("scatter");
  std::vector<ddpx::TensorList> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(staging->inputs(inputs[i], "input list " + std::to_string(i) + ", tensor"));
  }
  ddpx::ScatterOptions o;
  o.root_rank = static_cast<int>(opts.rootRank);
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->scatter(staging->outputs(outputs, "output tensor"), in, o);
  return launch(c10d::OpType::SCATTER, "ddpx:scatter", outputs, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_not_empty(outputs.size(), "reduce_scatter", "output tensors");
  auto staging = std::make_shared<Staging>("reduce_scatter");
  std::vector<ddpx::TensorList> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(staging->inputs(inputs[i], "input list " + std::to_string(i) + ", tensor"));
  }
  ddpx::ReduceScatterOptions o;
  o.op = to_ddpx_reduce_op(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->reduce_scatter(staging->outputs(outputs, "output tensor"), in, o);
  return launch(c10d::OpType::REDUCE_SCATTER, "ddpx:reduce_scatter", outputs, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce_scatter_single(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  auto staging = std::make_shared<Staging>("reduce_scatter_tensor");
  ddpx::ReduceScatterOptions o;
  o.op = to_ddpx_reduce_op(opts.reduceOp, output.scalar_type(), "reduce_scatter_tensor");
  o.timeout = op_timeout(opts.timeout);
  ddpx::Tensor in = staging->input(input, "input");
  auto part = group_->reduce_scatter_tensor(staging->output(output, "output"), in, o);
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, "ddpx:reduce_scatter_tensor", {output},
                staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce_scatter_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ddpx: reduce_scatter_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  auto staging = std::make_shared<Staging>("reduce_scatter_tensor_coalesced");
  WorkList parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string n = std::to_string(i);
    ddpx::ReduceScatterOptions o;
    o.op = to_ddpx_reduce_op(opts.reduceOp, outputs[i].scalar_type(),
                             "reduce_scatter_tensor_coalesced");
    o.timeout = op_timeout(opts.timeout);
    ddpx::Tensor in = staging->input(inputs[i], "input " + n);
    parts.push_back(group_->reduce_scatter_tensor(staging->output(outputs[i], "output " + n), in, o));
  }
  return launch(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED,
                "ddpx:reduce_scatter_tensor_coalesced", outputs, staging, std::move(parts));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::all_to_all_single(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  auto staging = std::make_shared<Staging>("all_to_all_single");
  ddpx::AllToAllOptions o;
  o.timeout = op_timeout(opts.timeout);
  ddpx::Tensor in = staging->input(input, "input");
  auto part = group_->alltoall_base(staging->output(output, "output"), in, output_split_sizes,
                                    input_split_sizes, o);
  return launch(c10d::OpType::ALLTOALL_BASE, "ddpx:all_to_all_single", {output}, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  auto staging = std::make_shared<Staging>("all_to_all");
  ddpx::AllToAllOptions o;
  o.timeout = op_timeout(opts.timeout);
  ddpx::TensorList in = staging->inputs(inputs, "input tensor");
  auto part = group_->alltoall(staging->outputs(outputs, "output tensor"), in, o);
  return launch(c10d::OpType::ALLTOALL, "ddpx:all_to_all", outputs, staging, {part});
}

void DdpxBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  ddpx::BarrierOptions o;
  o.timeout = op_timeout(opts.timeout);
  ++sequence_;
  absl::Status s = group_->monitored_barrier(o, wait_all_ranks)->wait();
  if (!s.ok()) std::rethrow_exception(to_exception(s));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  auto staging = std::make_shared<Staging>("send");
  ddpx::SendRecvOptions o;
  o.tag = tag;
  o.timeout = group_timeout();
  auto part = group_->send(staging->inputs(tensors, "tensor"), dst_rank, o);
  return launch(c10d::OpType::SEND, "ddpx:send", tensors, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  auto staging = std::make_shared<Staging>("recv");
  ddpx::SendRecvOptions o;
  o.tag = tag;
  o.timeout = group_timeout();
  auto part = group_->recv(staging->outputs(tensors, "tensor"), src_rank, o);
  return launch(c10d::OpType::RECV, "ddpx:recv", tensors, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  auto staging = std::make_shared<Staging>("recv");
  ddpx::SendRecvOptions o;
  o.tag = tag;
  o.timeout = group_timeout();
  auto part = group_->recv_anysource(staging->outputs(tensors, "tensor"), o);
  return launch(c10d::OpType::RECVANYSOURCE, "ddpx:recv_anysource", tensors, staging, {part});
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::barrier(const c10d::BarrierOptions& opts) {
  ddpx::BarrierOptions o;
  o.timeout = op_timeout(opts.timeout);
  auto part = group_->barrier(o);
  return launch(c10d::OpType::BARRIER, "ddpx:barrier", {}, nullptr, {part});
}

}  // namespace ddpx_torch

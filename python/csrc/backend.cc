#include "python/csrc/backend.h"

#include <mutex>
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

// DdpxBackend::world(): weak, so the default group's end is its backend's.
std::mutex world_mu;
c10::weak_intrusive_ptr<DdpxBackend>& world_backend() {
  static auto* world = new c10::weak_intrusive_ptr<DdpxBackend>(
      c10::intrusive_ptr<DdpxBackend>());
  return *world;
}

std::atomic<uint64_t> groups_generation_{0};

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
  auto backend_ptr = c10::make_intrusive<DdpxBackend>(config, std::move(group));
  if (config.is_world) {
    std::lock_guard<std::mutex> lock(world_mu);
    world_backend() = c10::weak_intrusive_ptr<DdpxBackend>(backend_ptr);
  }
  // After the world is set: a lookup that sees the new generation sees it.
  groups_generation_.fetch_add(1, std::memory_order_release);
  return backend_ptr;
}

c10::intrusive_ptr<DdpxBackend> DdpxBackend::world() {
  std::lock_guard<std::mutex> lock(world_mu);
  return world_backend().lock();
}

uint64_t DdpxBackend::groups_generation() {
  return groups_generation_.load(std::memory_order_acquire);
}

void DdpxBackend::shutdown() { groups_generation_.fetch_add(1, std::memory_order_release); }

void DdpxBackend::allreduce_now(const ddpx::TensorList& tensor, ddpx::ReduceOp op) {
  ddpx::AllreduceOptions o;
  o.op = op;
  o.timeout = op_timeout(c10d::kUnsetTimeout);
  ++sequence_;
  absl::Status s = group_->allreduce(tensor, o)->wait();
  if (!s.ok()) std::rethrow_exception(to_exception(s));
}

DdpxBackend::DdpxBackend(const BackendConfig& config, std::shared_ptr<ddpx::ProcessGroup> group)
    : c10d::Backend(config.rank, config.size),
      config_(config),
      group_(std::move(group)),
      timeout_ms_(config.timeout.count()) {}

DdpxBackend::~DdpxBackend() { close(); }

void DdpxBackend::release_resources() { close(); }

void DdpxBackend::close() {
  if (group_ == nullptr) return;
  groups_generation_.fetch_add(1, std::memory_order_release);
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

// The name torch's profiler and ddpx's errors give an op.
struct OpName {
  c10d::OpType type;
  const char* name;   // in errors: "ddpx: all_reduce: ..."
  const char* title;  // torch's profiling title
};
#define DDPX_OP(type, name) \
  OpName { c10d::OpType::type, name, "ddpx:" name }

class DdpxBackend::Call {
 public:
  Call(DdpxBackend& backend, const OpName& name)
      : backend_(backend), name_(name), staging_(std::make_shared<Staging>(name.name)) {}

  Staging& stage() { return *staging_; }
  // ddpx options of type O with torch's `timeout` resolved (unset: the
  // group's current timeout).
  template <typename O>
  O options(std::chrono::milliseconds timeout) const {
    O o;
    o.timeout = backend_.op_timeout(timeout);
    return o;
  }
  // ... with a reduce op, for tensors like `like`.
  template <typename O>
  O reduce_options(std::chrono::milliseconds timeout, const c10d::ReduceOp& op,
                   const at::Tensor& like) const {
    O o = options<O>(timeout);
    o.op = to_ddpx_reduce_op(op, like.scalar_type(), name_.name);
    return o;
  }
  // The TorchWork over the op's ddpx parts; `outputs` are its result().
  c10::intrusive_ptr<c10d::Work> launch(std::vector<at::Tensor> outputs, WorkList parts) {
    const uint64_t seq = ++backend_.sequence_;
    auto work = c10::make_intrusive<TorchWork>(backend_.config_.rank, name_.type, name_.title,
                                               std::move(outputs), std::move(staging_), seq,
                                               backend_.group_timeout());
    return TorchWork::track(std::move(work), std::move(parts));
  }
  c10::intrusive_ptr<c10d::Work> launch(std::vector<at::Tensor> outputs,
                                        std::shared_ptr<ddpx::Work> part) {
    WorkList parts;
    parts.push_back(std::move(part));
    return launch(std::move(outputs), std::move(parts));
  }

 private:
  DdpxBackend& backend_;
  const OpName name_;
  std::shared_ptr<Staging> staging_;
};

c10::intrusive_ptr<c10d::Work> DdpxBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  check_not_empty(tensors.size(), "broadcast", "tensors");
  Call call(*this, DDPX_OP(BROADCAST, "broadcast"));
  auto o = call.options<ddpx::BroadcastOptions>(opts.timeout);
  o.root_rank = static_cast<int>(opts.rootRank);
  o.root_tensor = static_cast<int>(opts.rootTensor);
  return call.launch(tensors, group_->broadcast(call.stage().outputs(tensors, {"tensor"}), o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  check_not_empty(tensors.size(), "all_reduce", "tensors");
  Call call(*this, DDPX_OP(ALLREDUCE, "all_reduce"));
  auto o = call.reduce_options<ddpx::AllreduceOptions>(opts.timeout, opts.reduceOp, tensors[0]);
  return call.launch(tensors, group_->allreduce(call.stage().outputs(tensors, {"tensor"}), o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  check_not_empty(tensors.size(), "all_reduce_coalesced", "tensors");
  Call call(*this, DDPX_OP(ALLREDUCE_COALESCED, "all_reduce_coalesced"));
  auto o = call.reduce_options<ddpx::AllreduceOptions>(opts.timeout, opts.reduceOp, tensors[0]);
  return call.launch(tensors,
                     group_->allreduce_coalesced(call.stage().outputs(tensors, {"tensor"}), o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  check_not_empty(tensors.size(), "reduce", "tensors");
  Call call(*this, DDPX_OP(REDUCE, "reduce"));
  auto o = call.reduce_options<ddpx::ReduceOptions>(opts.timeout, opts.reduceOp, tensors[0]);
  o.root_rank = static_cast<int>(opts.rootRank);
  o.root_tensor = static_cast<int>(opts.rootTensor);
  return call.launch(tensors, group_->reduce(call.stage().outputs(tensors, {"tensor"}), o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  check_not_empty(inputs.size(), "all_gather", "input tensors");
  Call call(*this, DDPX_OP(ALLGATHER, "all_gather"));
  auto out = call.stage().output_lists(outputs, "output list", "tensor");
  return call.launch(flatten(outputs),
                     group_->allgather(out, call.stage().inputs(inputs, {"input tensor"}),
                                       call.options<ddpx::AllgatherOptions>(opts.timeout)));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::all_gather_single(at::Tensor& output,
                                                              at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  Call call(*this, DDPX_OP(_ALLGATHER_BASE, "all_gather_into_tensor"));
  ddpx::Tensor in = call.stage().input(input, {"input"});
  return call.launch({output}, group_->allgather_into_tensor(
                                   call.stage().output(output, {"output"}), in,
                                   call.options<ddpx::AllgatherOptions>(opts.timeout)));
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
  Call call(*this, DDPX_OP(ALLGATHER_COALESCED, "all_gather_coalesced"));
  const auto o = call.options<ddpx::AllgatherOptions>(opts.timeout);
  WorkList parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto n = static_cast<int64_t>(i);
    std::vector<at::Tensor> gathered;  // input i from every rank, in rank order
    for (auto& list : outputs) gathered.push_back(list[i]);
    std::vector<ddpx::TensorList> out = {
        call.stage().outputs(gathered, {"rank", -1, "output for input", n})};
    parts.push_back(group_->allgather(out, {call.stage().input(inputs[i], {"input", n})}, o));
  }
  return call.launch(flatten(outputs), std::move(parts));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::all_gather_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ddpx: all_gather_into_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  Call call(*this, DDPX_OP(ALLGATHER_INTO_TENSOR_COALESCED, "all_gather_into_tensor_coalesced"));
  const auto o = call.options<ddpx::AllgatherOptions>(opts.timeout);
  WorkList parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto n = static_cast<int64_t>(i);
    ddpx::Tensor in = call.stage().input(inputs[i], {"input", n});
    parts.push_back(
        group_->allgather_into_tensor(call.stage().output(outputs[i], {"output", n}), in, o));
  }
  return call.launch(outputs, std::move(parts));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  Call call(*this, DDPX_OP(GATHER, "gather"));
  auto o = call.options<ddpx::GatherOptions>(opts.timeout);
  o.root_rank = static_cast<int>(opts.rootRank);
  auto out = call.stage().output_lists(outputs, "output list", "tensor");
  return call.launch(flatten(outputs),
                     group_->gather(out, call.stage().inputs(inputs, {"input tensor"}), o));
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
  return gather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  Call call(*this, DDPX_OP(SCATTER, "scatter"));
  auto o = call.options<ddpx::ScatterOptions>(opts.timeout);
  o.root_rank = static_cast<int>(opts.rootRank);
  auto in = call.stage().input_lists(inputs, "input list", "tensor");
  return call.launch(outputs,
                     group_->scatter(call.stage().outputs(outputs, {"output tensor"}), in, o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_not_empty(outputs.size(), "reduce_scatter", "output tensors");
  Call call(*this, DDPX_OP(REDUCE_SCATTER, "reduce_scatter"));
  auto o =
      call.reduce_options<ddpx::ReduceScatterOptions>(opts.timeout, opts.reduceOp, outputs[0]);
  auto in = call.stage().input_lists(inputs, "input list", "tensor");
  return call.launch(
      outputs, group_->reduce_scatter(call.stage().outputs(outputs, {"output tensor"}), in, o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce_scatter_single(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  Call call(*this, DDPX_OP(_REDUCE_SCATTER_BASE, "reduce_scatter_tensor"));
  auto o = call.reduce_options<ddpx::ReduceScatterOptions>(opts.timeout, opts.reduceOp, output);
  ddpx::Tensor in = call.stage().input(input, {"input"});
  return call.launch({output}, group_->reduce_scatter_tensor(
                                   call.stage().output(output, {"output"}), in, o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::reduce_scatter_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ddpx: reduce_scatter_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  Call call(*this, DDPX_OP(REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced"));
  WorkList parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto n = static_cast<int64_t>(i);
    auto o = call.reduce_options<ddpx::ReduceScatterOptions>(opts.timeout, opts.reduceOp,
                                                             outputs[i]);
    ddpx::Tensor in = call.stage().input(inputs[i], {"input", n});
    parts.push_back(
        group_->reduce_scatter_tensor(call.stage().output(outputs[i], {"output", n}), in, o));
  }
  return call.launch(outputs, std::move(parts));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::all_to_all_single(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  Call call(*this, DDPX_OP(ALLTOALL_BASE, "all_to_all_single"));
  ddpx::Tensor in = call.stage().input(input, {"input"});
  return call.launch({output}, group_->alltoall_base(
                                   call.stage().output(output, {"output"}), in,
                                   output_split_sizes, input_split_sizes,
                                   call.options<ddpx::AllToAllOptions>(opts.timeout)));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  Call call(*this, DDPX_OP(ALLTOALL, "all_to_all"));
  ddpx::TensorList in = call.stage().inputs(inputs, {"input tensor"});
  return call.launch(outputs, group_->alltoall(call.stage().outputs(outputs, {"output tensor"}),
                                               in, call.options<ddpx::AllToAllOptions>(
                                                       opts.timeout)));
}

void DdpxBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  ddpx::BarrierOptions o;
  o.timeout = op_timeout(opts.timeout);
  ++sequence_;
  absl::Status s = group_->monitored_barrier(o, wait_all_ranks)->wait();
  if (!s.ok()) std::rethrow_exception(to_exception(s));
}

// Point-to-point ops take no timeout of their own: the group's holds.
c10::intrusive_ptr<c10d::Work> DdpxBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  Call call(*this, DDPX_OP(SEND, "send"));
  auto o = call.options<ddpx::SendRecvOptions>(c10d::kUnsetTimeout);
  o.tag = tag;
  return call.launch(tensors, group_->send(call.stage().inputs(tensors, {"tensor"}), dst_rank, o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  Call call(*this, DDPX_OP(RECV, "recv"));
  auto o = call.options<ddpx::SendRecvOptions>(c10d::kUnsetTimeout);
  o.tag = tag;
  return call.launch(tensors,
                     group_->recv(call.stage().outputs(tensors, {"tensor"}), src_rank, o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  Call call(*this, DDPX_OP(RECVANYSOURCE, "recv_anysource"));
  auto o = call.options<ddpx::SendRecvOptions>(c10d::kUnsetTimeout);
  o.tag = tag;
  return call.launch(tensors,
                     group_->recv_anysource(call.stage().outputs(tensors, {"tensor"}), o));
}

c10::intrusive_ptr<c10d::Work> DdpxBackend::barrier(const c10d::BarrierOptions& opts) {
  Call call(*this, DDPX_OP(BARRIER, "barrier"));
  return call.launch({}, group_->barrier(call.options<ddpx::BarrierOptions>(opts.timeout)));
}

}  // namespace ddpx_torch

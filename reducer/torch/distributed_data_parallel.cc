// How autograd feeds ddpx's Reducer (docs/reducer.md, "libtorch modules"):
//
// The module's tensors are mirrored into a ddpx::ModelParameters whose
// Tensors borrow the same memory (no copies): parameter values, buffers,
// and gradients. Each trainable parameter gets a PostAccumulateGradHook,
// which autograd's AccumulateGrad node calls right after adding the
// parameter's gradient into .grad(). The first hook of a backward pass
// starts the step and queues a final callback on the autograd engine; each
// hook then calls Reducer::mark_ready(i), which launches a bucket's
// communication as soon as its last gradient is in; the final callback runs
// Reducer::finalize_backward() once backward is done.
#include "reducer/torch/distributed_data_parallel.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/serialize/archive.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/little_endian.h"
#include "hooks/registry.h"
#include "reducer/model_parameters.h"
#include "reducer/torch/tensor_bridge.h"

#ifdef DDPX_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>

#include <optional>

#include "cuda/stream.h"
#endif

namespace ddpx {
namespace torch {
namespace {

// The module's parameters, each tensor once, under the first name it has
// (what Python's named_parameters() lists): a tensor registered under two
// names, C++'s way of tying weights, is one parameter with one gradient.
std::vector<std::pair<std::string, at::Tensor>> distinct_parameters(::torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) {
      out.emplace_back(item.key(), item.value());
    }
  }
  return out;
}

// The name of a parameter of `module` that gets sparse gradients (an
// Embedding or EmbeddingBag built with sparse(true)), or empty. ddpx's
// buckets hold dense gradients only.
std::string sparse_gradient_parameter(::torch::nn::Module& module) {
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    bool sparse = false;
    if (auto* e = dynamic_cast<::torch::nn::EmbeddingImpl*>(item.value().get())) {
      sparse = e->options.sparse() && e->weight.requires_grad();
    } else if (auto* b = dynamic_cast<::torch::nn::EmbeddingBagImpl*>(item.value().get())) {
      sparse = b->options.sparse() && b->weight.requires_grad();
    }
    if (sparse) return item.key().empty() ? "weight" : item.key() + ".weight";
  }
  return "";
}

std::string sparse_gradient_message(const std::string& name) {
  return absl::StrCat(
      "parameter '", name, "' gets sparse gradients (an Embedding or EmbeddingBag with "
      "sparse(true), or a sparse embedding in forward); ddpx's DDP reduces dense gradients "
      "only: build it with sparse(false)");
}

// For a CUDA module: makes torch's current stream of its device ddpx's
// current stream while DDP runs ddpx code. ddpx's NCCL backend starts each
// collective after the caller's current stream has reached it and makes that
// stream wait for the result (cuda/stream.h), so the collectives come after
// the kernels autograd queued for the gradients and before whatever torch
// queues next, as for torch's own DDP. Nothing for a CPU module.
class TorchStreamScope {
 public:
  explicit TorchStreamScope(const c10::Device& device) {
#ifdef DDPX_TORCH_CUDA
    if (device.is_cuda()) {
      const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
      guard_.emplace(index, c10::cuda::getCurrentCUDAStream(index).stream());
    }
#else
    (void)device;
#endif
  }

 private:
#ifdef DDPX_TORCH_CUDA
  std::optional<StreamGuard> guard_;
#endif
};

}  // namespace

// Every field is touched from the thread running backward (and the
// constructor's); hooks' futures complete on communication threads inside
// the Reducer only.
struct DistributedDataParallel::Impl {
  struct Param {
    std::string name;
    at::Tensor tensor;  // the module's parameter
    // What the module held at wrapping time, to notice changes.
    c10::TensorImpl* impl = nullptr;
    void* data = nullptr;
    std::vector<int64_t> sizes;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    bool trainable = false;
    // Copy mode: the torch gradient ddpx's Parameter::grad borrows.
    at::Tensor grad_ref;
    // Unused on this rank in a synchronized step while .grad() is
    // undefined: the zero gradient it contributes (copy mode), or its
    // zeroed bucket view. It becomes .grad() only if another rank used the
    // parameter; if none did, .grad() stays undefined (torch's rule).
    at::Tensor unused_grad;
  };
  struct Buf {
    std::string name;
    at::Tensor tensor;
    c10::TensorImpl* impl = nullptr;
    void* data = nullptr;
    // The buffer's bytes, and where they sit in buffer_bytes.
    at::Tensor bytes;
    int64_t offset = 0;
  };

  std::shared_ptr<::torch::nn::Module> module;
  std::shared_ptr<ProcessGroup> pg;
  DDPOptions options;
  ModelParameters mirror;
  std::unique_ptr<::ddpx::DistributedDataParallel> core;
  std::vector<Param> params;
  std::vector<Buf> buffers;
  // Every buffer's bytes back to back, whatever its dtype: the per-step
  // broadcast from rank 0 is one collective into memory allocated once.
  at::Tensor buffer_bytes;
  std::vector<std::string> names;
  // Where every parameter and buffer is (one device per module).
  c10::Device device = c10::Device(c10::DeviceType::CPU);

  // The step in progress (from the first hook of a backward pass to its
  // final callback).
  bool step_active = false;
  bool step_syncs = true;
  uint64_t generation = 0;
  std::vector<bool> marked;
  // Held only by the queued final callback: expired while step_active means
  // the backward pass ended without it (an exception cut it short).
  std::weak_ptr<char> step_token;
  bool join_active = false;

  [[noreturn]] void fail(const std::string& message) { throw DDPError("ddpx DDP: " + message); }

  void install_hooks();
  void remove_hooks();
  void check_module_unchanged();
  void on_grad_ready(size_t i);
  void begin_step();
  void finalize_step(uint64_t gen);
  void abandon_step();
  // Makes ddpx's view of gradient i match torch's .grad() (now final for
  // this backward pass); `unused`: the parameter got no gradient.
  void sync_grad(size_t i, bool unused);
  // After a synchronized step: the unused_grads of parameters some rank
  // used become their .grad()s.
  void adopt_unused_grads(bool step_ok);
  // Bucket views: each defined .grad() is its view (after construction, a
  // rebuild, or .grad() set to none); an undefined one stays undefined.
  void point_grads_at_views();
  void lay_out_buffer_bytes();
  absl::Status broadcast_buffers();
};

namespace {

class ReadyHook final : public ::torch::autograd::PostAccumulateGradHook {
 public:
  ReadyHook(DistributedDataParallel::Impl* ddp, size_t index) : ddp_(ddp), index_(index) {}
  void operator()(const ::torch::autograd::Variable&) override { ddp_->on_grad_ready(index_); }

 private:
  DistributedDataParallel::Impl* ddp_;
  size_t index_;
};

}  // namespace

void DistributedDataParallel::Impl::install_hooks() {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].trainable) continue;
    ::torch::autograd::impl::set_post_acc_grad_hooks(params[i].tensor,
                                                     std::make_unique<ReadyHook>(this, i));
  }
}

void DistributedDataParallel::Impl::remove_hooks() {
  for (Param& p : params) {
    if (!p.trainable) continue;
    ::torch::autograd::impl::post_acc_grad_hooks(p.tensor).reset();
  }
}

void DistributedDataParallel::Impl::check_module_unchanged() {
  std::vector<at::Tensor> now;
  for (auto& item : distinct_parameters(*module)) now.push_back(std::move(item.second));
  std::string problem;
  if (now.size() != params.size()) {
    problem = absl::StrCat("it has ", now.size(), " parameters, it had ", params.size());
  } else {
    for (size_t i = 0; i < now.size() && problem.empty(); ++i) {
      const Param& p = params[i];
      if (now[i].unsafeGetTensorImpl() != p.impl) {
        problem = absl::StrCat("parameter '", p.name, "' was replaced by another tensor");
      } else if (now[i].data_ptr() != p.data || now[i].sizes().vec() != p.sizes ||
                 now[i].scalar_type() != p.dtype) {
        problem = absl::StrCat("parameter '", p.name, "' is now ", describe(now[i]),
                               " in new memory (moved, converted or resized)");
      } else if (now[i].requires_grad() != p.trainable) {
        problem = absl::StrCat("parameter '", p.name, "' now has requires_grad=",
                               now[i].requires_grad() ? "true" : "false");
      }
    }
  }
  if (problem.empty()) {
    std::vector<at::Tensor> bufs = module->buffers(/*recurse=*/true);
    if (bufs.size() != buffers.size()) {
      problem = absl::StrCat("it has ", bufs.size(), " buffers, it had ", buffers.size());
    } else {
      for (size_t i = 0; i < bufs.size() && problem.empty(); ++i) {
        if (bufs[i].unsafeGetTensorImpl() != buffers[i].impl || bufs[i].data_ptr() != buffers[i].data) {
          problem = absl::StrCat("buffer '", buffers[i].name, "' was replaced or moved");
        }
      }
    }
  }
  if (!problem.empty()) {
    fail(absl::StrCat("the module changed after it was wrapped: ", problem,
                      ". Wrap it after its last change (layers added, .to(), parameters "
                      "replaced or frozen), or wrap it again"));
  }
}

void DistributedDataParallel::Impl::abandon_step() {
  core->reducer().abandon_step();
  step_active = false;
  ++generation;
}

void DistributedDataParallel::Impl::begin_step() {
  check_module_unchanged();
  step_syncs = core->reducer().require_grad_sync();
  marked.assign(params.size(), false);
  absl::Status s = core->prepare_for_backward();
  if (!s.ok()) fail(std::string(s.message()));
  step_active = true;
  const uint64_t gen = ++generation;
  auto token = std::make_shared<char>(0);
  step_token = token;
  ::torch::autograd::Engine::get_default_engine().queue_callback(
      [this, token, gen] { finalize_step(gen); });
}

void DistributedDataParallel::Impl::sync_grad(size_t i, bool unused) {
  Param& p = params[i];
  Parameter& mirrored = mirror.parameter(i);
  at::Tensor& grad = p.tensor.mutable_grad();
  if (grad.defined() && grad.layout() != c10::kStrided) fail(sparse_gradient_message(p.name));
  if (!grad.defined() && !unused) {
    fail(absl::StrCat("parameter '", p.name, "' has no gradient after its hook"));
  }
  if (options.gradient_as_bucket_view) {
    const Tensor& view = mirrored.grad;  // the reducer's view into a bucket
    if (grad.defined() && grad.data_ptr() == view.data()) return;
    at::Tensor as_view = as_torch(view);
    if (grad.defined()) {
      as_view.copy_(grad);
      grad = as_view;
    } else {
      as_view.zero_();  // held the last step's average
      p.unused_grad = as_view;
    }
    return;
  }
  if (!grad.defined()) {
    p.unused_grad = at::zeros_like(p.tensor, at::MemoryFormat::Contiguous);
  } else if (!grad.is_contiguous()) {
    grad = grad.contiguous();
  }
  const at::Tensor& contributed = grad.defined() ? grad : p.unused_grad;
  if (mirrored.grad.data() != contributed.data_ptr()) {
    absl::StatusOr<Tensor> b = borrow(contributed, "gradient of '" + p.name + "'");
    if (!b.ok()) fail(std::string(b.status().message()));
    mirrored.grad = *b;
    p.grad_ref = contributed;
  }
}

void DistributedDataParallel::Impl::adopt_unused_grads(bool step_ok) {
  std::vector<bool> no_rank_used(params.size(), false);
  for (size_t i : core->reducer().globally_unused()) no_rank_used[i] = true;
  for (size_t i = 0; i < params.size(); ++i) {
    Param& p = params[i];
    if (!p.unused_grad.defined()) continue;
    if (step_ok && !no_rank_used[i]) p.tensor.mutable_grad() = p.unused_grad;  // the average
    p.unused_grad = at::Tensor();
  }
}

void DistributedDataParallel::Impl::point_grads_at_views() {
  if (!options.gradient_as_bucket_view) return;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].trainable) continue;
    at::Tensor& grad = params[i].tensor.mutable_grad();
    const Tensor& view = mirror.parameter(i).grad;
    if (grad.defined() && grad.data_ptr() != view.data()) grad = as_torch(view);
  }
}

void DistributedDataParallel::Impl::on_grad_ready(size_t i) {
  TorchStreamScope stream(device);
  if (step_active && step_token.expired()) abandon_step();  // the last backward threw
  if (!step_active) begin_step();
  if (marked[i]) {
    abandon_step();
    fail(absl::StrCat(
        "parameter '", params[i].name, "' (index ", i, ") received a gradient twice in one "
        "backward pass (a reentrant backward, e.g. activation checkpointing, or a nested "
        "backward() through the same parameter); every parameter may get its gradient once "
        "per step"));
  }
  marked[i] = true;
  sync_grad(i, /*unused=*/false);
  absl::Status s = core->mark_ready(i);
  if (!s.ok()) {
    abandon_step();
    fail(std::string(s.message()));
  }
}

void DistributedDataParallel::Impl::finalize_step(uint64_t gen) {
  if (!step_active || gen != generation) return;  // abandoned meanwhile
  step_active = false;
  TorchStreamScope stream(device);
  if (step_syncs) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].trainable && !marked[i]) sync_grad(i, /*unused=*/true);
    }
  }
  absl::Status s = core->finalize_backward();
  adopt_unused_grads(s.ok());
  point_grads_at_views();  // buckets may have been rebuilt
  if (!s.ok()) fail(std::string(s.message()));
  if (step_syncs && options.broadcast_buffers && !join_active) {
    s = broadcast_buffers();
    if (!s.ok()) fail(absl::StrCat("broadcasting buffers from rank 0: ", s.message()));
  }
}

void DistributedDataParallel::Impl::lay_out_buffer_bytes() {
  int64_t total = 0;
  for (Buf& b : buffers) {
    const int64_t n = static_cast<int64_t>(b.tensor.nbytes());
    // A byte view of the buffer's memory, which check_module_unchanged
    // keeps the module's at every step.
    b.bytes = at::from_blob(b.data, {n}, at::TensorOptions().dtype(at::kByte).device(device));
    b.offset = total;
    total += n;
  }
  buffer_bytes = at::empty({total}, at::TensorOptions().dtype(at::kByte).device(device));
}

absl::Status DistributedDataParallel::Impl::broadcast_buffers() {
  if (buffer_bytes.numel() == 0 || pg->size() == 1) return absl::OkStatus();
  const bool root = pg->rank() == 0;
  auto slot = [&](const Buf& b) { return buffer_bytes.narrow(0, b.offset, b.bytes.numel()); };
  if (root) {
    for (const Buf& b : buffers) slot(b).copy_(b.bytes);
  }
  absl::StatusOr<Tensor> shared = borrow(buffer_bytes, "buffers");
  if (!shared.ok()) return shared.status();
  BroadcastOptions o;
  o.root_rank = 0;
  if (absl::Status s = pg->broadcast({*shared}, o)->wait(); !s.ok()) return s;
  if (!root) {
    for (const Buf& b : buffers) b.bytes.copy_(slot(b));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DistributedDataParallel>> DistributedDataParallel::create(
    std::shared_ptr<::torch::nn::Module> module, std::shared_ptr<ProcessGroup> pg,
    const DDPOptions& options) {
  if (module == nullptr) return absl::InvalidArgumentError("DDP: module is null");
  if (pg == nullptr) return absl::InvalidArgumentError("DDP: process group is null");
  auto impl = std::make_unique<Impl>();
  impl->module = module;
  impl->pg = pg;
  impl->options = options;
  bool device_known = false;
  // One device per module: the buckets and the stream DDP follows are its.
  auto check_device = [&](const at::Tensor& t, const std::string& what) -> absl::Status {
    if (!device_known) {
      impl->device = t.device();
      device_known = true;
    } else if (t.device() != impl->device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DDP: ", what, " is on ", t.device().str(), ", the module's first tensor on ",
          impl->device.str(), "; wrap a module that lives on one device"));
    }
    return absl::OkStatus();
  };
  if (std::string name = sparse_gradient_parameter(*module); !name.empty()) {
    return absl::InvalidArgumentError("DDP: " + sparse_gradient_message(name));
  }
  for (auto& [name, tensor] : distinct_parameters(*module)) {
    Impl::Param p;
    p.name = name;
    p.tensor = tensor;
    if (absl::Status s = check_device(p.tensor, "parameter '" + p.name + "'"); !s.ok()) return s;
    p.impl = p.tensor.unsafeGetTensorImpl();
    p.data = p.tensor.data_ptr();
    p.sizes = p.tensor.sizes().vec();
    p.dtype = p.tensor.scalar_type();
    p.trainable = p.tensor.requires_grad();
    absl::StatusOr<Tensor> value = borrow(p.tensor, "DDP: parameter '" + p.name + "'");
    if (!value.ok()) return value.status();
    absl::StatusOr<size_t> index =
        impl->mirror.register_parameter(p.name, *value, p.trainable);
    if (!index.ok()) return index.status();
    if (p.trainable && options.gradient_as_bucket_view && p.tensor.grad().defined()) {
      // Keep the current gradient: the reducer copies it into the view.
      absl::StatusOr<Tensor> grad =
          borrow(p.tensor.grad(), "DDP: gradient of parameter '" + p.name + "'");
      if (!grad.ok()) return grad.status();
      impl->mirror.parameter(*index).grad = *grad;
      p.grad_ref = p.tensor.grad();
    }
    impl->names.push_back(p.name);
    impl->params.push_back(std::move(p));
  }
  for (const auto& item : module->named_buffers(/*recurse=*/true)) {
    Impl::Buf b;
    b.name = item.key();
    b.tensor = item.value();
    if (absl::Status s = check_device(b.tensor, "buffer '" + b.name + "'"); !s.ok()) return s;
    b.impl = b.tensor.unsafeGetTensorImpl();
    b.data = b.tensor.data_ptr();
    absl::StatusOr<Tensor> value = borrow(b.tensor, "DDP: buffer '" + b.name + "'");
    if (!value.ok()) return value.status();
    if (absl::Status s = impl->mirror.register_buffer(b.name, *value).status(); !s.ok()) return s;
    impl->buffers.push_back(std::move(b));
  }
  for (const Impl::Param& p : impl->params) {
    if (p.trainable && ::torch::autograd::impl::post_acc_grad_hooks(p.tensor) != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "DDP: parameter '", p.name, "' already has a post-accumulate-grad hook (is the "
          "module wrapped by another DDP?)"));
    }
  }

  ReducerOptions ro;
  ro.bucket_cap_mb = options.bucket_cap_mb;
  ro.first_bucket_cap_mb = options.first_bucket_cap_mb;
  ro.gradient_as_bucket_view = options.gradient_as_bucket_view;
  ro.find_unused_parameters = options.find_unused_parameters;
  ro.overlap_hook_launches = options.overlap_hook_launches;
  {
    // Broadcasting from rank 0 writes into the parameters: not an autograd op.
    ::torch::NoGradGuard no_grad;
    TorchStreamScope stream(impl->device);
    absl::StatusOr<std::unique_ptr<::ddpx::DistributedDataParallel>> core =
        ::ddpx::DistributedDataParallel::create(impl->mirror, pg, ro);
    if (!core.ok()) return core.status();
    impl->core = std::move(*core);
  }
  for (Impl::Param& p : impl->params) p.grad_ref = at::Tensor();
  if (!options.hook.empty()) {
    absl::StatusOr<std::unique_ptr<CommHook>> hook = make_comm_hook(options.hook, pg);
    if (!hook.ok()) return hook.status();
    if (absl::Status s = impl->core->register_comm_hook(std::move(*hook)); !s.ok()) return s;
  }
  impl->lay_out_buffer_bytes();
  impl->point_grads_at_views();
  impl->install_hooks();
  return std::unique_ptr<DistributedDataParallel>(new DistributedDataParallel(std::move(impl)));
}

DistributedDataParallel::DistributedDataParallel(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

DistributedDataParallel::~DistributedDataParallel() {
  impl_->remove_hooks();
  impl_->core->reducer().abandon_step();
}

absl::Status DistributedDataParallel::register_comm_hook(std::unique_ptr<CommHook> hook) {
  return impl_->core->register_comm_hook(std::move(hook));
}

absl::Status DistributedDataParallel::register_comm_hook(const std::string& spec) {
  absl::StatusOr<std::unique_ptr<CommHook>> hook = make_comm_hook(spec, impl_->pg);
  if (!hook.ok()) return hook.status();
  return register_comm_hook(std::move(*hook));
}

CommHook* DistributedDataParallel::comm_hook() {
  return const_cast<CommHook*>(impl_->core->reducer().comm_hook());
}

DistributedDataParallel::NoSyncGuard DistributedDataParallel::no_sync() {
  return impl_->core->no_sync();
}

const ReducerStats& DistributedDataParallel::stats() const { return impl_->core->stats(); }

namespace {
constexpr char kStateMagic[8] = {'D', 'D', 'P', 'X', 'T', 'D', 'D', 'P'};
constexpr uint32_t kStateVersion = 1;

using little_endian::get_u64;
using little_endian::put_u64;
}  // namespace

absl::Status DistributedDataParallel::save_state(std::ostream& out) const {
  if (impl_->step_active) {
    return absl::FailedPreconditionError("DDP save_state: not during backward");
  }
  out.write(kStateMagic, 8);
  put_u64(out, kStateVersion);
  std::vector<size_t> order = impl_->core->reducer().rebuilt_order();
  put_u64(out, order.size());
  for (size_t p : order) put_u64(out, p);
  if (absl::Status s = impl_->core->save_hook_state(out); !s.ok()) return s;
  if (!out) return absl::DataLossError("DDP save_state: writing the stream failed");
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::load_state(std::istream& in) {
  if (impl_->step_active) {
    return absl::FailedPreconditionError("DDP load_state: not during backward");
  }
  char magic[8];
  uint64_t version = 0, n = 0;
  if (!in.read(magic, 8) || memcmp(magic, kStateMagic, 8) != 0) {
    return absl::InvalidArgumentError("DDP load_state: not a ddpx::torch DDP state (magic)");
  }
  if (!get_u64(in, &version) || version != kStateVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DDP load_state: version ", version, ", this build reads ", kStateVersion));
  }
  if (!get_u64(in, &n) || n > impl_->params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DDP load_state: bucket order of ", n, " parameters; the model has ",
        impl_->params.size()));
  }
  std::vector<size_t> order(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t p = 0;
    if (!get_u64(in, &p)) return absl::DataLossError("DDP load_state: truncated bucket order");
    order[i] = static_cast<size_t>(p);
  }
  if (absl::Status s = impl_->core->reducer().restore_rebuilt_order(order); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("DDP load_state: ", s.message()));
  }
  impl_->point_grads_at_views();
  return impl_->core->load_hook_state(in);
}

int64_t DistributedDataParallel::hook_iteration() const {
  const CommHook* hook = impl_->core->reducer().comm_hook();
  return hook ? hook->state_iteration() : -1;
}

void DistributedDataParallel::save(::torch::serialize::OutputArchive& archive) const {
  std::ostringstream out;
  if (absl::Status s = save_state(out); !s.ok()) {
    throw DDPError(absl::StrCat("ddpx DDP: saving the DDP state: ", s.message()));
  }
  std::string bytes = out.str();
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) memcpy(t.data_ptr(), bytes.data(), bytes.size());
  archive.write("ddpx_state", t, /*is_buffer=*/true);
}

void DistributedDataParallel::load(::torch::serialize::InputArchive& archive) {
  at::Tensor t;
  if (!archive.try_read("ddpx_state", t, /*is_buffer=*/true)) {
    throw DDPError("ddpx DDP: the archive has no ddpx_state (saved without ddp->save?)");
  }
  t = t.contiguous();
  std::istringstream in(std::string(static_cast<const char*>(t.data_ptr()), t.numel()));
  if (absl::Status s = load_state(in); !s.ok()) {
    throw DDPError(absl::StrCat("ddpx DDP: loading the DDP state: ", s.message()));
  }
}

const std::vector<std::string>& DistributedDataParallel::parameter_names() const {
  return impl_->names;
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_assignment() const {
  std::vector<std::vector<std::string>> out;
  for (const std::vector<size_t>& bucket : impl_->core->reducer().bucket_assignment()) {
    std::vector<std::string> names;
    for (size_t i : bucket) names.push_back(impl_->names[i]);
    out.push_back(std::move(names));
  }
  return out;
}

::torch::nn::Module& DistributedDataParallel::module() { return *impl_->module; }

const std::shared_ptr<ProcessGroup>& DistributedDataParallel::process_group() const {
  return impl_->pg;
}

::ddpx::DistributedDataParallel& DistributedDataParallel::core() { return *impl_->core; }

Join::Join(DistributedDataParallel& ddp, JoinOptions options)
    : ddp_(ddp), join_(ddp.core(), options) {
  ddp_.impl_->join_active = true;
}

Join::~Join() {
  if (joined_) return;
  absl::Status s = join();
  if (!s.ok()) fprintf(stderr, "ddpx::torch::Join: %s\n", s.ToString().c_str());
}

absl::Status Join::join() {
  if (joined_) return absl::FailedPreconditionError("Join::join() called twice");
  joined_ = true;
  absl::Status s;
  {
    ::torch::NoGradGuard no_grad;
    TorchStreamScope stream(ddp_.impl_->device);
    s = join_.join();
  }
  ddp_.impl_->join_active = false;
  ddp_.impl_->point_grads_at_views();  // shadow steps may have rebuilt the buckets
  return s;
}

}  // namespace torch
}  // namespace ddpx

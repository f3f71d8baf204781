// torch.ops.ddpx.all_reduce_: ddpx's allreduce as a torch custom op, for
// programs that call one synchronous allreduce at a time and count its
// microseconds (tensor-parallel inference on CPU), as DeepSpeed's
// torch.ops.deepspeed.inference_all_reduce_ and vLLM's CPU shared-memory
// allreduce are called.
//
//   torch.ops.ddpx.all_reduce_(Tensor(a!) tensor, str op="sum",
//                              str? group_name=None) -> Tensor(a!)
//   torch.ops.ddpx.all_reduce_world_(Tensor(a!) tensor) -> Tensor(a!)
//
// all_reduce_world_ is all_reduce_(tensor) in its shortest form, a sum over
// the default group, called as DeepSpeed's op is (the tensor alone, the
// world): one overload per name, so torch's Python call finds it without
// trying others, and no strings to convert.
//
// dist.all_reduce goes through torch's Python function, the c10d dispatcher
// op, ProcessGroup, a Work and Work.wait() (10-30 us per op before any
// backend runs: BENCHMARKS.md, Python section). This op goes from the
// dispatcher straight to the group's ddpx::ProcessGroup (argument checks,
// flight recorder, the group's timeout) and waits for it on the calling
// thread, with the GIL released (torch.ops releases it), so a small
// allreduce on one host runs on the shared-memory path on this thread
// (GlooBackend::small_allreduce_here) with no TorchWork and no future.
//
// `group_name` is torch's name of the group (`group.group_name`, resolved
// through torch's group registry, c10d/GroupRegistry.hpp); None is the
// default group. The group's CPU backend must be ddpx. `op` is a reduce
// op's name in lower case ("sum", "avg", "product", "min", "max", "band",
// "bor", "bxor"), with torch's Gloo rules per dtype (tensor_bridge.h).
// Anything else (another backend, a non-CPU, non-dense or non-contiguous
// tensor, an unknown op) raises a RuntimeError saying which; a failure
// between ranks raises torch.distributed.DistBackendError as dist.all_reduce
// would. ddpx_torch.inference_all_reduce (python/ddpx_torch/inference.py)
// is the Python wrapper with dist.all_reduce's arguments.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/library.h>

#include "python/csrc/backend.h"
#include "python/csrc/tensor_bridge.h"

namespace ddpx_torch {
namespace {

constexpr const char* kOp = "torch.ops.ddpx.all_reduce_";
constexpr const char* kWorldOp = "torch.ops.ddpx.all_reduce_world_";

c10d::ReduceOp parse_reduce_op(std::string_view name) {
  using R = c10d::ReduceOp;
  if (name == "sum") return R(R::SUM);
  if (name == "avg") return R(R::AVG);
  if (name == "product") return R(R::PRODUCT);
  if (name == "min") return R(R::MIN);
  if (name == "max") return R(R::MAX);
  if (name == "band") return R(R::BAND);
  if (name == "bor") return R(R::BOR);
  if (name == "bxor") return R(R::BXOR);
  TORCH_CHECK(name != "premul_sum", "ddpx: ", kOp, ": ReduceOp.PREMUL_SUM is not supported "
              "(torch's gloo does not take it either; scale the tensor and use SUM)");
  TORCH_CHECK(false, "ddpx: ", kOp, ": unknown reduce op \"", name,
              "\" (sum, avg, product, min, max, band, bor or bxor)");
}

// The ddpx backend of the default group, looked up in DdpxBackend::world().
c10::intrusive_ptr<DdpxBackend> find_world(const char* op) {
  c10::intrusive_ptr<DdpxBackend> world = DdpxBackend::world();
  TORCH_CHECK(world, "ddpx: ", op, ": the default process group is not on ddpx "
              "(init_process_group(\"ddpx\")); pass the name of a ddpx group "
              "(group.group_name)");
  return world;
}

// The ddpx backend of the group torch names `name`, looked up in torch's
// group registry (c10d/GroupRegistry.hpp).
c10::intrusive_ptr<DdpxBackend> find_named(const std::string& name) {
  TORCH_CHECK(c10d::is_process_group_registered(name), "ddpx: ", kOp,
              ": no process group is named \"", name, "\" (torch's group.group_name)");
  c10::intrusive_ptr<c10d::ProcessGroup> pg = c10d::resolve_process_group(name);
  c10::intrusive_ptr<c10d::Backend> backend;
  if (pg->hasBackends()) {
    try {
      backend = pg->getBackend(c10::DeviceType::CPU);
    } catch (const c10::Error&) {  // no CPU backend: said below
    }
  }
  auto* ddpx_backend = dynamic_cast<DdpxBackend*>(backend.get());
  TORCH_CHECK(ddpx_backend != nullptr, "ddpx: ", kOp, ": process group \"", name,
              "\" is not on ddpx (its CPU backend is ",
              backend ? "\"" + backend->getBackendName() + "\"" : std::string("missing"),
              "; new_group(backend=\"ddpx\") makes one that is)");
  return c10::intrusive_ptr<DdpxBackend>::reclaim_copy(ddpx_backend);
}

// The last group this thread looked up, kept across calls: torch's registry
// takes locks, string hashes and a dynamic_cast per lookup, about a
// microsecond, as much as the allreduce of a few KiB itself. Weak, so a
// destroyed group closes (DdpxBackend::release_resources) and is not found
// here; valid while DdpxBackend::groups_generation() has not moved, which
// it does when any ddpx group is created (a new group may take a destroyed
// one's name) or shut down (destroy_process_group, while something still
// holds the group). A lookup that fails is not kept: it raises every time.
struct CachedLookup {
  bool valid = false;
  uint64_t generation = 0;
  std::string name;  // empty for the world
  c10::weak_intrusive_ptr<DdpxBackend> backend{c10::intrusive_ptr<DdpxBackend>()};

  template <typename Find>
  c10::intrusive_ptr<DdpxBackend> get(std::string_view key, Find find) {
    const uint64_t now = DdpxBackend::groups_generation();
    if (valid && generation == now && name == key) {
      c10::intrusive_ptr<DdpxBackend> found = backend.lock();
      if (found) return found;
    }
    valid = false;
    c10::intrusive_ptr<DdpxBackend> found = find();
    backend = c10::weak_intrusive_ptr<DdpxBackend>(found);
    name.assign(key.data(), key.size());
    generation = now;
    valid = true;
    return found;
  }
};

thread_local CachedLookup world_lookup;
thread_local CachedLookup named_lookup;

// The ddpx backend of the named group (None: the default group's).
c10::intrusive_ptr<DdpxBackend> backend_of(const std::optional<std::string_view>& group_name) {
  if (!group_name.has_value()) return world_lookup.get({}, [] { return find_world(kOp); });
  return named_lookup.get(*group_name, [&] { return find_named(std::string(*group_name)); });
}

// The tensor's memory as ddpx sees it, kept for the next call on the same
// memory: building it takes a shape, a borrowed storage and a list, five
// allocations per call otherwise. A kept one is only ever used for the same
// address, sizes and dtype, i.e. the memory of the tensor at hand.
const ddpx::TensorList& ddpx_view(const at::Tensor& tensor, ddpx::DType dtype) {
  thread_local void* data = nullptr;
  thread_local ddpx::DType kept_dtype;
  thread_local ddpx::TensorList kept;
  void* ptr = tensor.data_ptr();
  const c10::IntArrayRef sizes = tensor.sizes();
  if (kept.empty() || ptr != data || dtype != kept_dtype || !sizes.equals(kept[0].shape())) {
    kept = {ddpx::Tensor::from_blob(ptr, ddpx::Shape(sizes.begin(), sizes.end()), dtype)};
    data = ptr;
    kept_dtype = dtype;
  }
  return kept;
}

void check_tensor(const at::Tensor& tensor, const char* op) {
  TORCH_CHECK(tensor.defined(), "ddpx: ", op, ": the tensor is undefined");
  TORCH_CHECK(tensor.device().is_cpu(), "ddpx: ", op, ": the tensor is on ",
              tensor.device().str(), "; this op takes CPU tensors");
  TORCH_CHECK(tensor.layout() == at::kStrided, "ddpx: ", op, ": the tensor is a ",
              c10::str(tensor.layout()), " tensor; this op takes dense (strided) tensors");
  TORCH_CHECK(tensor.is_contiguous(), "ddpx: ", op,
              ": the tensor is not contiguous; this op reduces a tensor's memory in place "
              "(call .contiguous() and reduce that, or use dist.all_reduce)");
}

at::Tensor& all_reduce_(at::Tensor& tensor, std::string_view op,
                        std::optional<std::string_view> group_name) {
  check_tensor(tensor, kOp);
  const ddpx::DType dtype = to_ddpx_dtype(tensor.scalar_type(), kOp);
  const ddpx::ReduceOp reduce_op =
      to_ddpx_reduce_op(parse_reduce_op(op), tensor.scalar_type(), kOp);
  backend_of(group_name)->allreduce_now(ddpx_view(tensor, dtype), reduce_op);
  return tensor;
}

at::Tensor& all_reduce_world_(at::Tensor& tensor) {
  check_tensor(tensor, kWorldOp);
  const ddpx::DType dtype = to_ddpx_dtype(tensor.scalar_type(), kWorldOp);
  // SUM: bool's is MAX (tensor_bridge.h), every other dtype's is SUM.
  const ddpx::ReduceOp reduce_op =
      tensor.scalar_type() == at::kBool ? ddpx::ReduceOp::MAX : ddpx::ReduceOp::SUM;
  c10::intrusive_ptr<DdpxBackend> world =
      world_lookup.get({}, [] { return find_world(kWorldOp); });
  world->allreduce_now(ddpx_view(tensor, dtype), reduce_op);
  return tensor;
}

// At the autograd keys, which the dispatcher tries first for an ordinary
// tensor: what torch's autograd fallback and ADInplaceOrView would do for
// an in-place op with no autograd formula, done here, then the op itself.
// Otherwise each call goes through torch's boxed autograd fallback (a scan
// of the arguments before and after) and two redispatches before reaching
// the kernel. Tensors without autograd keys (inference mode) reach the
// CompositeExplicitAutograd kernels below directly.
void autograd_prologue(at::Tensor& tensor, const char* op) {
  TORCH_CHECK(tensor.defined(), "ddpx: ", op, ": the tensor is undefined");
  TORCH_CHECK(!(tensor.requires_grad() && at::GradMode::is_enabled()), "ddpx: ", op,
              ": the tensor requires grad, and this op has no autograd formula "
              "(call it under torch.no_grad(), or on tensor.detach())");
  // Autograd's check that saved tensors were not modified in place.
  tensor.unsafeGetTensorImpl()->bump_version();
}

at::Tensor& all_reduce_autograd(at::Tensor& tensor, std::string_view op,
                                std::optional<std::string_view> group_name) {
  autograd_prologue(tensor, kOp);
  return all_reduce_(tensor, op, group_name);
}

at::Tensor& all_reduce_world_autograd(at::Tensor& tensor) {
  autograd_prologue(tensor, kWorldOp);
  return all_reduce_world_(tensor);
}

}  // namespace
}  // namespace ddpx_torch

TORCH_LIBRARY(ddpx, m) {
  m.def("all_reduce_(Tensor(a!) tensor, str op=\"sum\", str? group_name=None) -> Tensor(a!)");
  m.def("all_reduce_world_(Tensor(a!) tensor) -> Tensor(a!)");
}

// Every device's tensors reach the kernels, which name a non-CPU one (a
// CPU-only registration would answer with torch's generic "could not run").
TORCH_LIBRARY_IMPL(ddpx, CompositeExplicitAutograd, m) {
  m.impl("all_reduce_", TORCH_FN(ddpx_torch::all_reduce_));
  m.impl("all_reduce_world_", TORCH_FN(ddpx_torch::all_reduce_world_));
}

TORCH_LIBRARY_IMPL(ddpx, Autograd, m) {
  m.impl("all_reduce_", TORCH_FN(ddpx_torch::all_reduce_autograd));
  m.impl("all_reduce_world_", TORCH_FN(ddpx_torch::all_reduce_world_autograd));
}

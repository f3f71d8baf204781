// torch.ops.ddpx.all_reduce_: ddpx's allreduce as a torch custom op, for
// programs that call one synchronous allreduce at a time and count its
// microseconds (tensor-parallel inference on CPU), as DeepSpeed's
// torch.ops.deepspeed.inference_all_reduce_ and vLLM's CPU shared-memory
// allreduce are called.
//
//   torch.ops.ddpx.all_reduce_(Tensor(a!) tensor, str op="sum",
//                              str? group_name=None) -> Tensor(a!)
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
#include <optional>
#include <string>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/library.h>

#include "python/csrc/backend.h"
#include "python/csrc/tensor_bridge.h"

namespace ddpx_torch {
namespace {

constexpr const char* kOp = "torch.ops.ddpx.all_reduce_";

c10d::ReduceOp parse_reduce_op(const std::string& name) {
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

// The ddpx backend of the named group (None: the default group's).
c10::intrusive_ptr<DdpxBackend> backend_of(const std::optional<std::string>& group_name) {
  if (!group_name.has_value()) {
    c10::intrusive_ptr<DdpxBackend> world = DdpxBackend::world();
    TORCH_CHECK(world, "ddpx: ", kOp, ": the default process group is not on ddpx "
                "(init_process_group(\"ddpx\")); pass the name of a ddpx group "
                "(group.group_name)");
    return world;
  }
  const std::string& name = *group_name;
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

at::Tensor& all_reduce_(at::Tensor& tensor, const std::string& op,
                        const std::optional<std::string>& group_name) {
  TORCH_CHECK(tensor.defined(), "ddpx: ", kOp, ": the tensor is undefined");
  TORCH_CHECK(tensor.device().is_cpu(), "ddpx: ", kOp, ": the tensor is on ",
              tensor.device().str(), "; this op takes CPU tensors");
  TORCH_CHECK(tensor.layout() == at::kStrided, "ddpx: ", kOp, ": the tensor is a ",
              c10::str(tensor.layout()), " tensor; this op takes dense (strided) tensors");
  TORCH_CHECK(tensor.is_contiguous(), "ddpx: ", kOp,
              ": the tensor is not contiguous; this op reduces a tensor's memory in place "
              "(call .contiguous() and reduce that, or use dist.all_reduce)");
  const ddpx::DType dtype = to_ddpx_dtype(tensor.scalar_type(), kOp);
  const ddpx::ReduceOp reduce_op =
      to_ddpx_reduce_op(parse_reduce_op(op), tensor.scalar_type(), kOp);
  c10::intrusive_ptr<DdpxBackend> backend = backend_of(group_name);
  backend->allreduce_now(
      ddpx::Tensor::from_blob(tensor.data_ptr(),
                              ddpx::Shape(tensor.sizes().begin(), tensor.sizes().end()), dtype),
      reduce_op);
  return tensor;
}

}  // namespace
}  // namespace ddpx_torch

TORCH_LIBRARY(ddpx, m) {
  m.def("all_reduce_(Tensor(a!) tensor, str op=\"sum\", str? group_name=None) -> Tensor(a!)");
}

// Every device's tensors reach the kernel, which names a non-CPU one (a
// CPU-only registration would answer with torch's generic "could not run").
TORCH_LIBRARY_IMPL(ddpx, CompositeExplicitAutograd, m) {
  m.impl("all_reduce_", TORCH_FN(ddpx_torch::all_reduce_));
}

// How a ddpx hook runs under torch's Reducer (torch/csrc/distributed/c10d/
// reducer.cpp calls CommHookInterface::runHook once per bucket, in bucket
// order, and waits for the futures in finalize_backward):
//
//   torch GradBucket --borrow--> ddpx GradBucket (same memory: buffer,
//   per-gradient offsets and shapes, parameters) --> CommHook::run -->
//   ddpx Future<Tensor> --callback--> c10::ivalue::Future (the bucket itself
//   when the hook reduced in place, else a torch tensor over the result's
//   storage) --> torch copies it into the gradients.
//
// torch's Reducer launches bucket k+1 as soon as its gradients are in. A
// ddpx hook that issues collectives from its futures' callbacks (PowerSGD,
// int8: issues_collectives_after_run) would then interleave bucket k's late
// collectives with bucket k+1's differently on different ranks, so such a
// hook's next bucket starts from the callback that completes the previous
// one, as ddpx's own Reducer orders them (reducer/reducer.cc,
// launch_ready_buckets). Backward does not wait for it.
#include "python/comm_hook_bridge.h"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hooks/comm_hook.h"
#include "hooks/registry.h"
#include "python/csrc/group_lookup.h"
#include "reducer/torch/tensor_bridge.h"

namespace ddpx_torch {
namespace {

namespace py = pybind11;

// A ddpx tensor over `t`'s memory (reducer/torch/tensor_bridge.h); whoever
// calls keeps `t` alive. ddpx's hooks take floating-point CPU buckets only.
ddpx::Tensor borrow(const at::Tensor& t, const std::string& what) {
  switch (t.scalar_type()) {
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
      break;
    default:
      throw std::invalid_argument(absl::StrCat(
          "ddpx comm hook: ", what, " is ", c10::toString(t.scalar_type()),
          "; ddpx's hooks take float32, float64, float16 and bfloat16 buckets"));
  }
  if (!t.device().is_cpu()) {
    throw std::invalid_argument(absl::StrCat("ddpx comm hook: ", what, " is on ", t.device().str(),
                                             "; the ddpx backend takes CPU tensors"));
  }
  absl::StatusOr<ddpx::Tensor> borrowed = ddpx::torch::borrow(t, what);
  if (!borrowed.ok()) {
    throw std::invalid_argument(absl::StrCat("ddpx comm hook: ", borrowed.status().message()));
  }
  return *std::move(borrowed);
}

// Everything one bucket's hook run needs after runHook has returned (torch's
// GradBucket is a temporary of Reducer::run_comm_hook): the torch tensors
// whose memory the ddpx bucket borrows, the ddpx bucket (a hook may read it
// from its callbacks) and the torch future torch waits on.
struct Launch {
  at::Tensor buffer;
  std::vector<at::Tensor> parameters;
  std::unique_ptr<ddpx::GradBucket> bucket;
  c10::intrusive_ptr<c10::ivalue::Future> torch_future;
  // Completes with the hook's result (or error); the next bucket of a hook
  // that issues collectives late starts from it.
  std::shared_ptr<ddpx::Future<ddpx::Tensor>> done = ddpx::Future<ddpx::Tensor>::create();
};

std::unique_ptr<Launch> prepare(c10d::GradBucket& bucket) {
  auto launch = std::make_unique<Launch>();
  launch->buffer = bucket.getBufferRef();
  const std::string name = absl::StrCat("bucket ", bucket.getIndex());
  ddpx::Tensor buffer = borrow(launch->buffer, name);
  std::vector<int64_t> offsets;
  std::vector<ddpx::Shape> shapes;
  for (const at::Tensor& g : bucket.getGradients()) {
    offsets.push_back(g.storage_offset() - launch->buffer.storage_offset());
    shapes.emplace_back(g.sizes().begin(), g.sizes().end());
  }
  launch->parameters = bucket.getParameters();
  std::vector<ddpx::Tensor> parameters;
  for (size_t i = 0; i < launch->parameters.size(); ++i) {
    parameters.push_back(borrow(launch->parameters[i], absl::StrCat(name, "'s parameter ", i)));
  }
  launch->bucket = std::make_unique<ddpx::GradBucket>(
      bucket.getIndex(), bucket.isLast(), std::move(buffer), std::move(offsets), std::move(shapes),
      std::move(parameters));
  launch->torch_future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  return launch;
}

// The hook's result as a torch tensor: the bucket itself when the hook
// reduced in place, else a tensor over the result's memory that keeps it.
at::Tensor to_torch(const ddpx::Tensor& result, const at::Tensor& buffer) {
  if (result.data() == buffer.data_ptr() && result.numel() == buffer.numel() &&
      ddpx::torch::to_torch(result.dtype()) == buffer.scalar_type()) {
    return buffer;
  }
  return ddpx::torch::as_torch(result);
}

class RegistryCommHook : public c10d::CommHookInterface {
 public:
  RegistryCommHook(std::shared_ptr<ddpx::CommHook> hook, std::string spec)
      : hook_(std::move(hook)), spec_(std::move(spec)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    std::shared_ptr<Launch> launch = prepare(bucket);
    std::shared_ptr<ddpx::Future<ddpx::Tensor>> previous = std::move(previous_);
    previous_ = launch->done;
    if (previous == nullptr || !hook_->issues_collectives_after_run()) {
      start(hook_, spec_, launch);
    } else {
      const size_t index = launch->bucket->index();
      previous->add_callback([hook = hook_, spec = spec_, launch,
                              index](ddpx::Future<ddpx::Tensor>& prev) {
        if (!prev.status().ok()) {
          finish(*launch, absl::Status(prev.status().code(), absl::StrCat(
              "not started: the bucket before bucket ", index, " failed: ",
              prev.status().message())), spec);
          return;
        }
        start(hook, spec, launch);
      });
    }
    return launch->torch_future;
  }

  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  static void start(const std::shared_ptr<ddpx::CommHook>& hook, const std::string& spec,
                    const std::shared_ptr<Launch>& launch) {
    std::shared_ptr<ddpx::Future<ddpx::Tensor>> f = hook->run(*launch->bucket);
    if (f == nullptr) {
      finish(*launch, absl::InternalError("the hook returned no future"), spec);
      return;
    }
    f->add_callback([launch, spec](ddpx::Future<ddpx::Tensor>& result) {
      finish(*launch, result.result(), spec);
    });
  }

  // Completes the torch future (torch waits on it) and then `done` (the next
  // bucket's start), so every rank sees them in the same order.
  static void finish(Launch& launch, absl::StatusOr<ddpx::Tensor> result, const std::string& spec) {
    if (result.ok() && result->numel() != launch.buffer.numel()) {
      result = absl::InternalError(absl::StrCat("the hook's result has ", result->numel(),
                                                " elements, the bucket ", launch.buffer.numel()));
    }
    if (result.ok()) {
      launch.torch_future->markCompleted(c10::IValue(to_torch(*result, launch.buffer)));
    } else {
      launch.torch_future->setError(std::make_exception_ptr(std::runtime_error(absl::StrCat(
          "ddpx comm hook '", spec, "', bucket ", launch.bucket->index(), ": ",
          result.status().message()))));
    }
    launch.done->set_result(std::move(result));
  }

  std::shared_ptr<ddpx::CommHook> hook_;
  std::string spec_;
  // The last bucket's `done`; runHook calls come one at a time (under
  // torch's Reducer mutex).
  std::shared_ptr<ddpx::Future<ddpx::Tensor>> previous_;
};

// What Python keeps of a registered hook: its name and state (PowerSGD's
// error feedback and iteration live in the hook, across steps).
class HookHandle {
 public:
  HookHandle(std::shared_ptr<ddpx::CommHook> hook, std::string spec)
      : hook_(std::move(hook)), spec_(std::move(spec)) {}
  const std::string& spec() const { return spec_; }
  std::string name() const { return hook_->name(); }
  int64_t state_iteration() const { return hook_->state_iteration(); }
  py::bytes save_state() const {
    std::ostringstream out;
    throw_if_error(hook_->save_state(out), "save_state");
    return py::bytes(out.str());
  }
  void load_state(const std::string& bytes) {
    std::istringstream in(bytes);
    throw_if_error(hook_->load_state(in), "load_state");
  }

 private:
  void throw_if_error(const absl::Status& s, const char* what) const {
    if (!s.ok()) {
      throw std::runtime_error(absl::StrCat("ddpx comm hook '", spec_, "' ", what, ": ",
                                            s.message()));
    }
  }
  std::shared_ptr<ddpx::CommHook> hook_;
  std::string spec_;
};

// With the GIL: the Python objects are read; without it: the hook is made
// (int8:hierarchical builds its host subgroups, collectively) and handed to
// torch's Reducer.
HookHandle register_comm_hook(py::handle reducer_obj, py::handle process_group,
                              const std::string& spec) {
  std::shared_ptr<ddpx::ProcessGroup> group = ddpx_group_of(process_group);
  auto& reducer = reducer_obj.cast<c10d::Reducer&>();
  py::gil_scoped_release no_gil;
  absl::StatusOr<std::unique_ptr<ddpx::CommHook>> made = ddpx::make_comm_hook(spec, group);
  if (!made.ok()) {
    throw std::invalid_argument(absl::StrCat("ddpx_torch.register_comm_hook: ",
                                             made.status().message()));
  }
  std::shared_ptr<ddpx::CommHook> hook = std::move(*made);
  reducer.register_comm_hook(std::make_unique<RegistryCommHook>(hook, spec));
  return HookHandle(hook, spec);
}

}  // namespace

void bind_comm_hooks(py::module_& m) {
  py::class_<HookHandle>(m, "CommHookHandle",
                         "A ddpx hook registered on a torch DDP model (its state lives across "
                         "steps)")
      .def_property_readonly("spec", &HookHandle::spec)
      .def_property_readonly("name", &HookHandle::name)
      .def("state_iteration", &HookHandle::state_iteration,
           "The steps the hook's state has seen (PowerSGD's state.iter); -1 if it keeps none")
      .def("save_state", &HookHandle::save_state, "The hook's state as bytes")
      .def("load_state", &HookHandle::load_state, py::arg("state"));
  m.def("_register_comm_hook", &register_comm_hook, py::arg("reducer"), py::arg("process_group"),
        py::arg("spec"),
        "Registers ddpx's hook `spec` (hooks/registry.h) on torch's DDP reducer over the ddpx "
        "group behind `process_group`");
  m.def("_comm_hook_names", [] {
    std::vector<std::string> names = ddpx::comm_hook_names();
    for (const std::string& w : ddpx::comm_hook_wrapper_names()) names.push_back(w + "+");
    return names;
  });
}

}  // namespace ddpx_torch

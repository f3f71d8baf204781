// The CPython extension ddpx_torch._C: the ddpx backend's class and its
// creator for torch.distributed.Backend.register_backend (python/ddpx_torch/
// __init__.py registers it), and what tests and tools read about a group.
#include <chrono>
#include <string>
#include <vector>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/headeronly/version.h>

#include "core/host_topology.h"
#include "process_group/gloo/gloo_backend.h"
#include "python/csrc/backend.h"
#include "python/csrc/group_lookup.h"
#include "python/csrc/tensor_bridge.h"
#include "python/csrc/torch_work.h"
#if __has_include("python/comm_hook_bridge.h")
#include "python/comm_hook_bridge.h"
#define DDPX_TORCH_HAS_COMM_HOOKS 1
#endif

namespace py = pybind11;

namespace ddpx_torch {
namespace {

// Which ranks share a host and which transport the group's ddpx backend
// chose: for tests, tools and users who want to know.
py::dict group_info(const DdpxBackend& backend) {
  const ddpx::ProcessGroup& group = *backend.group();
  py::dict info;
  info["rank"] = group.rank();
  info["size"] = group.size();
  info["backend"] = group.backend_name();
  info["timeout_ms"] = backend.group_timeout().count();
  if (const ddpx::HostTopology* hosts = group.host_topology()) {
    info["host_count"] = hosts->host_count;
    info["local_rank"] = hosts->local_rank;
    info["local_size"] = hosts->local_size;
    info["ranks_by_host"] = hosts->ranks_by_host;
  }
  if (auto* gloo = dynamic_cast<const ddpx::GlooBackend*>(group.backend().get())) {
    info["shared_memory"] = gloo->uses_shared_memory();
    info["shared_memory_status"] = gloo->shared_memory_status();
    info["two_level_allreduce"] = gloo->uses_two_level_allreduce();
    info["device"] = gloo->device_description();
  }
  return info;
}

// Seconds for `iters` float SUM allreduces of `tensor`, each waited for
// before the next, on the ddpx group behind `group`: through ddpx's
// ProcessGroup itself (the C++ op: no torch at all), or through this
// backend's c10d::Backend::allreduce and its TorchWork (no Python, no
// dispatcher). torch_backend_bench prints both beside the Python figures:
// the floors the Python path stands on.
double time_allreduce(py::handle group, const at::Tensor& tensor, int iters,
                      bool through_backend) {
  DdpxBackend* backend = find_ddpx_backend(group);
  TORCH_CHECK(backend != nullptr, "ddpx: _time_allreduce: the group's CPU backend is not ddpx");
  TORCH_CHECK(tensor.is_contiguous() && tensor.device().is_cpu(),
              "ddpx: _time_allreduce: takes a contiguous CPU tensor");
  py::gil_scoped_release no_gil;
  std::vector<at::Tensor> tensors = {tensor};
  Staging staging("_time_allreduce");
  const ddpx::TensorList ddpx_tensors = {staging.output(tensor, {"tensor"})};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (through_backend) {
      backend->allreduce(tensors, c10d::AllreduceOptions())->wait();
    } else {
      absl::Status s = backend->group()->allreduce(ddpx_tensors, {})->wait();
      if (!s.ok()) std::rethrow_exception(to_exception(s));
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace
}  // namespace ddpx_torch

PYBIND11_MODULE(_C, m) {
  using ddpx_torch::BackendConfig;
  using ddpx_torch::DdpxBackend;
  m.doc() = "ddpx as a torch.distributed backend (see ddpx_torch)";
  m.attr("torch_version_compiled") = TORCH_VERSION;

  py::class_<DdpxBackend, c10d::Backend, c10::intrusive_ptr<DdpxBackend>>(m, "DdpxBackend")
      .def("info", [](const DdpxBackend& b) { return ddpx_torch::group_info(b); });

  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, std::vector<int> global_ranks, bool is_world,
         std::string group_name) {
        BackendConfig config;
        config.rank = rank;
        config.size = size;
        config.timeout = timeout;
        config.global_ranks = std::move(global_ranks);
        config.is_world = is_world;
        config.group_name = std::move(group_name);
        return DdpxBackend::create(store, config);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("global_ranks"), py::arg("is_world"), py::arg("group_name"),
      // Rendezvous waits for the other ranks; a store written in Python
      // needs the GIL meanwhile.
      py::call_guard<py::gil_scoped_release>(),
      "Builds the ddpx backend of one group (the creator register_backend calls).");

  m.def("_mark_python_exiting", &ddpx_torch::mark_python_exiting,
        "atexit: ddpx's threads stop freeing torch objects (torch_work.h).");

  m.def(
      "group_info",
      [](py::handle group) -> py::object {
        DdpxBackend* backend = ddpx_torch::find_ddpx_backend(group);
        if (backend == nullptr) return py::none();
        return ddpx_torch::group_info(*backend);
      },
      py::arg("group"),
      "What the ddpx backend of `group` found and chose (hosts, shared memory, "
      "two-level allreduce); None for a group not on ddpx.");

  m.def("_time_allreduce", &ddpx_torch::time_allreduce, py::arg("group"), py::arg("tensor"),
        py::arg("iters"), py::arg("through_backend"),
        "Seconds for `iters` allreduces from C++ (the benchmark's floors; module.cc).");

#ifdef DDPX_TORCH_HAS_COMM_HOOKS
  ddpx_torch::bind_comm_hooks(m);
#else
  // A2's python/comm_hook_bridge.{h,cc} (register_comm_hook) plugs in here:
  // `void bind_comm_hooks(pybind11::module_& m)`, using
  // ddpx_torch::ddpx_group_of() from group_lookup.h.
#endif
}

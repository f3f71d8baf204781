#include "python/csrc/group_lookup.h"

#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "python/csrc/backend.h"

namespace ddpx_torch {

namespace py = pybind11;

DdpxBackend* find_ddpx_backend(py::handle group) {
  if (group.is_none()) return nullptr;
  try {
    auto backend = py::cast<c10::intrusive_ptr<c10d::Backend>>(group);
    return dynamic_cast<DdpxBackend*>(backend.get());
  } catch (const py::cast_error&) {
  }
  try {
    auto pg = py::cast<c10::intrusive_ptr<c10d::ProcessGroup>>(group);
    if (!pg->hasBackends()) return nullptr;
    c10::intrusive_ptr<c10d::Backend> backend;
    try {
      backend = pg->getBackend(c10::DeviceType::CPU);
    } catch (const c10::Error&) {
      return nullptr;  // no CPU backend
    }
    return dynamic_cast<DdpxBackend*>(backend.get());
  } catch (const py::cast_error&) {
  }
  return nullptr;
}

std::shared_ptr<ddpx::ProcessGroup> ddpx_group_of(py::handle group) {
  DdpxBackend* backend = find_ddpx_backend(group);
  if (backend == nullptr) {
    throw py::value_error(
        "ddpx: " + std::string(py::str(py::repr(group))) +
        " is not a process group on the ddpx backend (init_process_group(\"ddpx\") or "
        "new_group(backend=\"ddpx\"); its CPU backend must be ddpx)");
  }
  return backend->group();
}

}  // namespace ddpx_torch

// From a torch process group (Python object) to the ddpx::ProcessGroup
// behind it, for C++ bindings built on ddpx's groups (the comm-hook bridge,
// python/comm_hook_bridge.cc).
#ifndef DDPX_PYTHON_CSRC_GROUP_LOOKUP_H_
#define DDPX_PYTHON_CSRC_GROUP_LOOKUP_H_

#include <memory>

#include <torch/csrc/utils/pybind.h>

#include "process_group/front_end/process_group.h"

namespace ddpx_torch {

class DdpxBackend;

// `group`: a torch.distributed ProcessGroup whose CPU backend is ddpx, or
// that backend itself (ProcessGroup._get_backend(torch.device("cpu"))).
// Null when it is neither (another backend, or no CPU backend).
DdpxBackend* find_ddpx_backend(pybind11::handle group);

// As find_ddpx_backend, but throws a ValueError naming what `group` is
// when it is not a ddpx group.
std::shared_ptr<ddpx::ProcessGroup> ddpx_group_of(pybind11::handle group);

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_CSRC_GROUP_LOOKUP_H_

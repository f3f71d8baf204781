// ddpx's communication hooks (hooks/registry.h) on torch's
// DistributedDataParallel: `ddpx_torch.register_comm_hook(ddp_model, spec)`
// (python/ddpx_torch/comm_hooks.py) hands torch's Reducer a
// c10d::CommHookInterface that runs the registry's C++ hook on each of
// torch's GradBuckets, over the ddpx process group behind the DDP's torch
// process group. No Python runs per bucket and no bucket is copied: the
// hook sees torch's flat bucket as a ddpx Tensor over the same memory.
#ifndef DDPX_PYTHON_COMM_HOOK_BRIDGE_H_
#define DDPX_PYTHON_COMM_HOOK_BRIDGE_H_

#include <pybind11/pybind11.h>

namespace ddpx_torch {

// Adds `_register_comm_hook(reducer, process_group, spec)` and
// `_comm_hook_names()` to the extension module `m`.
void bind_comm_hooks(pybind11::module_& m);

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_COMM_HOOK_BRIDGE_H_

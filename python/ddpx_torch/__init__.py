"""ddpx as a torch.distributed backend.

    import torch.distributed as dist
    dist.init_process_group("ddpx")          # or "cpu:ddpx,cuda:nccl"
    dist.all_reduce(t)

Importing this package registers the backend "ddpx" for CPU tensors
(torch.distributed.Backend.register_backend); `import torch` imports it
through the package's `torch.backends` entry point (ddpx_torch_autoload), so
a program need not import it itself. docs/python.md tells how it works.
"""

from ddpx_torch._build_info import TORCH_VERSION as _BUILT_WITH

import torch

if torch.__version__ != _BUILT_WITH:
    raise ImportError(
        f"ddpx_torch was built with torch {_BUILT_WITH} but this is torch "
        f"{torch.__version__}; rebuild and reinstall it with this torch "
        "(bazel run //python:install)"
    )

import atexit as _atexit

import torch.distributed as _dist  # registers c10d's Backend class, the base of ours

from ddpx_torch import _C

# Before the interpreter shuts down: ops still completing on ddpx's threads
# then leave their tensors be (python/csrc/torch_work.h).
_atexit.register(_C._mark_python_exiting)

# Loading _C registered torch.ops.ddpx.all_reduce_ (ddpx_torch/inference.py).
from ddpx_torch.inference import inference_all_reduce  # noqa: E402,F401

__all__ = ["group_info", "inference_all_reduce", "BACKEND_NAME"]

BACKEND_NAME = "ddpx"


def _create_backend(opts, backend_options):
    """register_backend's creator (extended API): one group's backend."""
    del backend_options  # ddpx takes no backend-specific options
    ranks = list(opts.global_ranks_in_group) or list(range(opts.group_size))
    return _C.create_backend(
        opts.store,
        opts.group_rank,
        opts.group_size,
        opts.timeout,
        [int(r) for r in ranks],
        # The default group is created before the world exists: its store
        # carries ddpx's trace service (dumps, peer reports).
        not _dist.is_initialized(),
        str(opts.group_id),
    )


def group_info(group=None):
    """What ddpx found and chose for `group` (default: the default group):
    rank, size, hosts (host_count, local_size, ranks_by_host), whether the
    group runs on shared memory and the two-level allreduce. None when the
    group's CPU backend is not ddpx."""
    if group is None:
        group = _dist.distributed_c10d._get_default_group()
    return _C.group_info(group)


_dist.Backend.register_backend(
    BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu"]
)

# ddpx's C++ comm hooks on torch's DDP (ddpx_torch/comm_hooks.py over
# python/comm_hook_bridge.cc), where this build has them.
try:
    from ddpx_torch.comm_hooks import register_comm_hook  # noqa: F401
except ModuleNotFoundError as err:
    if err.name != "ddpx_torch.comm_hooks":
        raise
else:
    __all__.append("register_comm_hook")

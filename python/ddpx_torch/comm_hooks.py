"""ddpx's communication hooks on torch's DistributedDataParallel.

    model = DistributedDataParallel(net)            # process group on "ddpx"
    ddpx_torch.register_comm_hook(model, "powersgd:rank=2,start_iter=10")

Any spec of ddpx's hook registry (hooks/registry.h): "fp16", "bf16",
"int8", "int8:hierarchical=1", "powersgd:rank=2,start_iter=10",
"batched_powersgd", "fp16+powersgd:rank=2", "noop", "allreduce". The hook
is ddpx's C++ one (python/comm_hook_bridge.cc): torch's Reducer calls it on
each bucket without going through Python, it reads and reduces torch's
flat bucket in place, and its state (PowerSGD's error feedback, warm-start
Qs, iteration) lives across steps. As with DistributedDataParallel's own
register_comm_hook, once per model and before the first backward.
"""
import torch


def _ddpx_c():
    from ddpx_torch import _C  # the extension; imported late so this file loads first
    return _C


def comm_hook_names():
    """The hook names a spec may end with, and the wrappers ("fp16+", ...)."""
    return list(_ddpx_c()._comm_hook_names())


def register_comm_hook(ddp_model, spec):
    """Registers ddpx's hook `spec` on `ddp_model` (torch's
    DistributedDataParallel) and returns a handle with its `name`, `spec`,
    `state_iteration()`, `save_state()` and `load_state(bytes)`.

    The hook runs over the ddpx process group behind the model's process
    group, whose backend for CPU tensors must be "ddpx".
    """
    if not isinstance(ddp_model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError("ddpx_torch.register_comm_hook: expected a "
                        "torch.nn.parallel.DistributedDataParallel model, got "
                        f"{type(ddp_model).__name__}")
    if not isinstance(spec, str) or not spec:
        raise ValueError("ddpx_torch.register_comm_hook: spec must be a hook spec such as "
                         f"'int8' or 'powersgd:rank=2' (hooks: {', '.join(comm_hook_names())})")
    group = ddp_model.process_group
    backend = torch.distributed.get_backend(group)
    if "ddpx" not in str(backend):
        raise ValueError(f"ddpx_torch.register_comm_hook('{spec}'): the model's process group "
                         f"runs on {backend!r}; ddpx's hooks need a group on \"ddpx\" "
                         "(init_process_group(\"ddpx\") or new_group(backend=\"ddpx\"))")
    handle = _ddpx_c()._register_comm_hook(ddp_model.reducer, group, spec)
    # What torch's own register_comm_hook records, for DDP's logging data.
    ddp_model.logger._set_comm_hook_name(f"ddpx:{spec}")
    return handle

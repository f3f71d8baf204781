"""ddpx_torch.inference_all_reduce: one synchronous allreduce through the
custom op torch.ops.ddpx.all_reduce_ (or all_reduce_world_ for the default
group's SUM; python/csrc/inference_all_reduce.cc),
without dist.all_reduce's Python function, dispatcher op, Work and wait:
the call DeepSpeed's inference_all_reduce and vLLM's CPU allreduce make,
for programs that count the microseconds of each small allreduce."""

import torch
import torch.distributed as dist

__all__ = ["inference_all_reduce"]

_OP_NAMES = {getattr(dist.ReduceOp, name): name.lower()
             for name in dist.ReduceOp.RedOpType.__members__}

_SUM = dist.ReduceOp.SUM
# The default group's SUM, the commonest call, in the op's shortest form.
_all_reduce_world = torch.ops.ddpx.all_reduce_world_


def _op_name(op):
    if isinstance(op, str):
        return op.lower()
    # A ReduceOp object (ReduceOp(ReduceOp.MAX), a PREMUL_SUM) carries its
    # type in .op; the ReduceOp.SUM ... values are the types themselves.
    name = _OP_NAMES.get(getattr(op, "op", op))
    if name is None:
        raise RuntimeError(f"ddpx: inference_all_reduce: {op!r} is not a reduce op "
                           "(torch.distributed.ReduceOp.SUM, AVG, PRODUCT, MIN, MAX, BAND, "
                           "BOR or BXOR)")
    return name


def inference_all_reduce(tensor, op=dist.ReduceOp.SUM, group=None):
    """Reduces `tensor` (a contiguous CPU tensor) in place across `group`
    (default: the default group), whose CPU backend must be ddpx; returns
    `tensor` once done. Same result and errors as dist.all_reduce on the
    group (the group's timeout, DistBackendError naming the op and the
    culprit rank when a peer fails); no async_op."""
    if group is None and op is _SUM:
        return _all_reduce_world(tensor)
    name = None if group is None else group.group_name
    return torch.ops.ddpx.all_reduce_(tensor, _op_name(op), name)

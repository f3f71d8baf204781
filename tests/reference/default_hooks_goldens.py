#!/usr/bin/env python3
"""Golden outputs of torch's default DDP hooks, for tests/hooks/torch_golden_test.

Runs torch.distributed.algorithms.ddp_comm_hooks.default_hooks'
allreduce_hook, fp16_compress_hook and bf16_compress_hook on two gloo ranks
(CPU processes) over fixed inputs and writes raw little-endian float32 files
into tests/reference/golden/:

  default_hooks_input_rank{0,1}.f32   each rank's bucket
  default_hooks_{allreduce,fp16,bf16}.f32   the hook's result (every rank's
                                            result is checked identical here)

Usage: python3 tests/reference/default_hooks_goldens.py  (torch >= 2.0)
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

NUMEL = 3000
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
HOOKS = {
    "allreduce": default_hooks.allreduce_hook,
    "fp16": default_hooks.fp16_compress_hook,
    "bf16": default_hooks.bf16_compress_hook,
}


def bucket_input(rank):
    """Normal values over magnitudes 1e-9 .. 1e4, exact zeros, and a few
    values beyond float16's range (1e5) and in its subnormal range."""
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(NUMEL, generator=g, dtype=torch.float32)
    exponents = (torch.arange(NUMEL) % 14 - 9).to(torch.float32)
    x = x * torch.pow(10.0, exponents)
    x[::37] = 0.0
    x[5::101] = 1e5 * (1 - 2 * rank)
    x[7::211] = 3e-6
    return x


class Bucket:
    """The part of dist.GradBucket the default hooks use."""

    def __init__(self, tensor):
        self._buffer = tensor

    def buffer(self):
        return self._buffer


def worker(rank, world, init_file, queue):
    dist.init_process_group("gloo", init_method="file://" + init_file,
                            rank=rank, world_size=world)
    results = {}
    for name, hook in HOOKS.items():
        bucket = Bucket(bucket_input(rank).clone())
        results[name] = hook(dist.group.WORLD, bucket).wait().clone()
    queue.put((rank, results))
    dist.barrier()
    dist.destroy_process_group()


def main():
    world = 2
    os.makedirs(OUT_DIR, exist_ok=True)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        procs = [ctx.Process(target=worker, args=(r, world, init_file, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        by_rank = dict(queue.get(timeout=120) for _ in range(world))
        for p in procs:
            p.join(timeout=60)
            if p.exitcode != 0:
                sys.exit(f"rank process exited with {p.exitcode}")
    for rank in range(world):
        write(f"default_hooks_input_rank{rank}.f32", bucket_input(rank))
    for name in HOOKS:
        if not torch.equal(by_rank[0][name].view(torch.int32),
                           by_rank[1][name].view(torch.int32)):
            sys.exit(f"torch's {name} hook gave different results on the two ranks")
        write(f"default_hooks_{name}.f32", by_rank[0][name])
    print(f"wrote goldens for {', '.join(HOOKS)} ({NUMEL} values, torch {torch.__version__})")


def write(name, tensor):
    tensor = tensor.to(torch.float32).contiguous()
    with open(os.path.join(OUT_DIR, name), "wb") as f:
        f.write(tensor.numpy().astype("<f4").tobytes())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Trains examples/torch/cnn.h's residual CNN with torch's own
DistributedDataParallel (gloo, 2 CPU processes) for a few steps per
communication hook and writes each step's averaged gradients as goldens for
tests/torch/torch_ddp_golden_test.cc, which runs this script when it starts
(torch's float results depend on the CPU's kernels, so the reference comes
from the machine that runs the test) and repeats the run with
ddpx::torch::DistributedDataParallel over libtorch.

    python3 tests/reference/torch_ddp_goldens.py --out DIR

Weights, images and labels come from formulas the C++ test repeats (so only
gradients are stored). One thread per process: the same libtorch kernels then
give the same local gradients on both sides. The model is below 1 MiB, so DDP
has one bucket (index 0) on both sides. Cases: no hook (allreduce),
fp16_compress_hook, bf16_compress_hook (3 steps each) and powerSGD_hook
(rank 2, start_powerSGD_iter 2, error feedback, warm start; 4 steps) whose
initial Q is fixed before step 2 through torch's warm-start memory
(state.q_memory_dict[0], values q_init_value(j)), as
tests/reference/powersgd_goldens.py does; torch orthogonalizes and uses it
instead of drawing random values. Between steps: SGD(lr 0.01, momentum 0.9).

Files: torch_ddp_goldens.txt (settings, parameters, cases, rank 0's losses)
and torch_ddp_<case>.f32 (per step, every parameter's gradient flattened in
named_parameters() order; float32 little endian).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP

from deterministic_init import free_port, init_parameters

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "reference"))
from residual_cnn import ResidualCnn  # noqa: E402  (examples/torch/cnn.h's twin)

WORLD_SIZE = 2
WIDTH = 8
SIDE = 16
BATCH = 4
LR = 0.01
MOMENTUM = 0.9
PSGD_RANK = 2
PSGD_START = 2
CASES = [("allreduce", 3), ("fp16", 3), ("bf16", 3), ("powersgd", 4)]




def image_value(j, step, rank):
    return ((j * 13 + step * 7 + rank * 5) % 23 - 11) / 11.0


def label_value(b, step, rank):
    return (b * 3 + step + 2 * rank) % 10


def q_init_value(j):
    return ((j * 13 + 7) % 17 - 8) / 4.0


def make_model():
    return init_parameters(ResidualCnn(WIDTH, SIDE))


def batch(step, rank):
    n = BATCH * SIDE * SIDE
    x = torch.tensor([image_value(j, step, rank) for j in range(n)], dtype=torch.float64)
    y = torch.tensor([label_value(b, step, rank) for b in range(BATCH)], dtype=torch.int64)
    return x.float().view(BATCH, 1, SIDE, SIDE), y


def low_rank_sizes(tensors):
    """torch's P and Q lengths for one bucket (powerSGD_hook's rule)."""
    p = q = 0
    for t in tensors:
        if t.dim() < 2:
            continue
        n = t.shape[0]
        m = t.numel() // n
        r = min(n, m, PSGD_RANK)
        if (n + m) * r * 2.0 < n * m:  # min_compression_rate 2
            p += n * r
            q += m * r
    return p, q


def run_case(case, steps, rank):
    torch.manual_seed(0)
    model = make_model()
    ddp = DDP(model)  # broadcast_buffers (forward_sync_buffers) on: the default
    state = None
    if case == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif case == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    elif case == "powersgd":
        state = psgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=PSGD_RANK,
            start_powerSGD_iter=PSGD_START, min_compression_rate=2,
            use_error_feedback=True, warm_start=True, random_seed=0)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, foreach=False)
    grads, losses = [], []
    for step in range(steps):
        if state is not None and step == PSGD_START:
            p_size, q_size = low_rank_sizes([p for p in model.parameters()])
            state.p_memory_dict[0] = torch.empty(p_size)
            state.q_memory_dict[0] = torch.tensor(
                [q_init_value(j) for j in range(q_size)], dtype=torch.float32)
        opt.zero_grad(set_to_none=False)
        x, y = batch(step, rank)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        grads.append(torch.cat([p.grad.detach().reshape(-1).clone()
                                for p in model.parameters()]))
        losses.append(loss.item())
        opt.step()
    return grads, losses


def worker(rank, port, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=WORLD_SIZE)
    results = {}
    for case, steps in CASES:
        results[case] = run_case(case, steps, rank)
    dist.barrier()
    if rank == 0:
        model = make_model()
        lines = ["# torch %s, gloo, %d ranks, one thread each; written by "
                 "tests/reference/torch_ddp_goldens.py" % (torch.__version__, WORLD_SIZE),
                 "width %d" % WIDTH, "side %d" % SIDE, "batch %d" % BATCH,
                 "lr %r" % LR, "momentum %r" % MOMENTUM,
                 "powersgd_rank %d" % PSGD_RANK, "powersgd_start_iter %d" % PSGD_START]
        for name, p in model.named_parameters():
            lines.append("param %s %s" % (name, "x".join(map(str, p.shape))))
        for case, steps in CASES:
            grads, losses = results[case]
            lines.append("case %s %d %s" % (case, steps, " ".join("%.9g" % l for l in losses)))
            with open(os.path.join(out_dir, "torch_ddp_%s.f32" % case), "wb") as f:
                for g in grads:
                    f.write(g.numpy().astype("<f4").tobytes())
        with open(os.path.join(out_dir, "torch_ddp_goldens.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder for the goldens")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    mp.spawn(worker, args=(free_port(), args.out), nprocs=WORLD_SIZE, join=True)
    print("wrote goldens to", args.out)


if __name__ == "__main__":
    main()

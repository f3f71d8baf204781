#!/usr/bin/env python3
"""The trainer's exact run (`examples:train`, MLP 784-2048-2048-10, one bucket)
with torch's own powerSGD_hook doing the gradient exchange, to compare step by
step with our hook in the trainer.

  python3 examples/benchmarks/powersgd_torch_same_run.py allreduce|powersgd \
      --seed=S [--start=24] [--min_compression_rate=2] [--steps=N] [--port=P] \
      [--out=FILE]

Everything the two runs could differ in besides the hook is taken from the
trainer: the initial weights (nn::Rng, SplitMix64, U(-1/sqrt(fan_in),
1/sqrt(fan_in)) per weight then bias, layer by layer), the data order
(DistributedSampler: Fisher-Yates with the trainer's generator, rank r takes
positions r, r+4, ...), the normalization, batch 64 per rank on 4 gloo ranks,
SGD lr 0.05 momentum 0.9 (torch's SGD is the same update), one bucket in the
reducer's order (last layer first, bias before weight), and the first Q at
start_powerSGD_iter (our state's SplitMix64(0) seed, Box-Muller normals,
shapes grouped in order of first appearance: torch's layout). torch's hook
runs on that bucket as the reducer hands it over (a GradBucket stand-in), with
PowerSGDState(rank 2, error feedback, warm start, min_compression_rate as
given), so the only difference left
is the hook's code and the float rounding of the forward and backward passes.

Prints one line per step, `STEP s loss` (rank 0's local loss, as the trainer's
metrics JSON has it), and at the end `RESULT <hook> seed=S start=START
min_compression_rate=R steps=N test_acc=<percent>`; --out writes the per-step losses as JSON lines
{"step": s, "loss": l} like the trainer's --metrics_out.
"""
import argparse
import gzip
import json
import math
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook as ps
import torch.multiprocessing as mp

# The dist.GradBucket stand-in the PowerSGD golden cases hand torch's hooks.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from powersgd_goldens import FakeBucket  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
WORLD = 4
BATCH = 64
MEAN, STD = np.float32(0.2860), np.float32(0.3530)  # examples/data/fashion_mnist.h
HIDDEN = (2048, 2048)
MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def splitmix_outputs(state, n):
    """The next n outputs of SplitMix64 from `state` (vectorized), and the new state."""
    with np.errstate(over="ignore"):
        z = np.uint64(state) + np.uint64(GAMMA) * np.arange(1, n + 1, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z, (state + GAMMA * n) & MASK


def splitmix_next(state):
    state = (state + GAMMA) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31), state


def init_parameters(seed):
    """examples/nn/mlp.cc + linear.cc + init.cc: [(weight, bias)] per layer."""
    widths = (784,) + HIDDEN + (10,)
    state, layers = seed, []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        bound = np.float32(1.0) / np.sqrt(np.float32(fan_in))
        tensors = []
        for shape in ((fan_out, fan_in), (fan_out,)):
            z, state = splitmix_outputs(state, math.prod(shape))
            u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
            tensors.append(torch.from_numpy((-bound + (bound + bound) * u).reshape(shape)))
        layers.append(tuple(tensors))
    return layers


def sampler_indices(n, rank, seed, epoch=0):
    """examples/data/sampler.cc (shuffle on)."""
    order = list(range(n))
    state = (seed * 0x100000001B3 + epoch) & MASK
    for i in range(n - 1, 0, -1):
        bound = i + 1
        limit = MASK - MASK % bound
        while True:
            x, state = splitmix_next(state)
            if x < limit:
                break
        j = x % bound
        order[i], order[j] = order[j], order[i]
    shard = (n + WORLD - 1) // WORLD
    return [order[pos % n] for pos in range(rank, shard * WORLD, WORLD)]


def standard_normal(n, seed):
    """hooks/powersgd_random.cc: fill_standard_normal (Box-Muller in double)."""
    z, _ = splitmix_outputs(seed, 2 * ((n + 1) // 2))
    u = ((z >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0 ** -53
    radius = np.sqrt(-2.0 * np.log(u[0::2]))
    angle = 2 * math.pi * u[1::2]
    out = np.empty(2 * len(radius), np.float32)
    out[0::2] = (radius * np.cos(angle)).astype(np.float32)
    out[1::2] = (radius * np.sin(angle)).astype(np.float32)
    return torch.from_numpy(out[:n])


def images(name):
    raw = np.frombuffer(gzip.open(os.path.join(DATA, name)).read(), np.uint8, offset=16)
    return torch.from_numpy((raw.reshape(-1, 784) / np.float32(255.0) - MEAN) / STD)


def labels(name):
    raw = np.frombuffer(gzip.open(os.path.join(DATA, name)).read(), np.uint8, offset=8)
    return torch.tensor(raw.astype(np.int64))


def run(rank, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    x, y = images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz")
    xt, yt = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
    linears = [torch.nn.Linear(w.shape[1], w.shape[0]) for w, _ in init_parameters(args.seed)]
    with torch.no_grad():
        for layer, (w, b) in zip(linears, init_parameters(args.seed)):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    model = torch.nn.Sequential(linears[0], torch.nn.ReLU(), linears[1], torch.nn.ReLU(),
                                linears[2])
    # The reducer's bucket: gradients in the order backward makes them ready.
    bucket_params = []
    for layer in reversed(linears):
        bucket_params += [layer.bias, layer.weight]
    shapes = [tuple(p.shape) for p in bucket_params]
    state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                             start_powerSGD_iter=args.start,
                             min_compression_rate=args.min_compression_rate,
                             use_error_feedback=True,
                             warm_start=True, random_seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    order = torch.tensor(sampler_indices(len(x), rank, args.seed))
    steps = (len(order) + BATCH - 1) // BATCH
    if args.steps > 0:
        steps = min(steps, args.steps)
    losses = []
    for s in range(steps):
        i = order[s * BATCH:(s + 1) * BATCH]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[i]), y[i])
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in bucket_params])
        if args.hook == "allreduce":
            flat.div_(WORLD)
            dist.all_reduce(flat)
        else:
            if s == args.start:
                # Our first Q (hooks/powersgd_step.cc): one seed from the
                # state's SplitMix64(random_seed 0), normals over the whole Q
                # memory. torch orthogonalizes it like a fresh one.
                p_size = q_size = 0
                for shape in shapes:
                    if len(shape) == 2 and ps._should_compress(
                            shape[0], shape[1], 2, args.min_compression_rate)[0]:
                        p_size += shape[0] * 2
                        q_size += shape[1] * 2
                seed, _ = splitmix_next(0)
                state.p_memory_dict[0] = torch.empty(p_size)
                state.q_memory_dict[0] = standard_normal(q_size, seed)
            flat = ps.powerSGD_hook(state, FakeBucket(flat, shapes)).wait()
        at = 0
        for p in bucket_params:
            p.grad.copy_(flat[at:at + p.numel()].view_as(p))
            at += p.numel()
        opt.step()
        losses.append(loss.item())
        if rank == 0:
            print(f"STEP {s + 1} {loss.item():.7f}", flush=True)
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    if rank == 0:
        print(f"RESULT {args.hook} seed={args.seed} start={args.start} "
              f"min_compression_rate={args.min_compression_rate:g} steps={steps} "
              f"test_acc={acc * 100:.2f}", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                for s, l in enumerate(losses):
                    f.write(json.dumps({"step": s + 1, "loss": l}) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("hook", choices=("allreduce", "powersgd"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=24)
    parser.add_argument("--min_compression_rate", type=float, default=2.0)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--port", type=int, default=29641)
    parser.add_argument("--out", default="")
    mp.spawn(run, args=(parser.parse_args(),), nprocs=WORLD)

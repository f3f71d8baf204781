#!/usr/bin/env python3
"""Runs torch's own powerSGD_hook and batched_powerSGD_hook on fixed inputs
with a gloo group of 2 CPU processes and writes the results as goldens for
tests/hooks/powersgd/powersgd_golden_test.cc.

    python3 tests/reference/powersgd_goldens.py \
        [--out tests/hooks/powersgd/powersgd_goldens.txt]

Inputs are small integers over 8 (exact in float32) from a formula the C++
test repeats, so only outputs are stored. The initial Q is fixed on both sides
through torch's warm-start memory (state.q_memory_dict), which torch then
orthogonalizes and uses instead of drawing random values; the C++ test puts
the same values into its bucket memory.

File format (text): "case NAME" starts a case; then lines of a key and
values: hook, world_size, rank, start_iter, error_feedback, epsilon,
min_compression_rate, shapes (layer-wise: one entry per gradient, dims joined
by 'x'), length (batched), iterations, then "output T v..." (identical on all
ranks; checked here) and "error R v..." (rank R's error after the last
iteration), or "torch_error MESSAGE" when torch's hook raised; "end".
"""
import argparse
import math
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

WORLD_SIZE = 2


def input_value(i, t, r):
    """Element i of rank r's bucket at iteration t (exact in float32)."""
    return ((i * 37 + t * 11 + r * 5 + (i * i) % 7) % 29 - 14) / 8.0


def q_init_value(j):
    """Element j of the initial Q memory (exact in float32)."""
    return ((j * 13 + 7) % 17 - 8) / 4.0


CASES = [
    # name, hook, rank, start_iter, error_feedback, epsilon, min_rate, shapes/length, iterations
    dict(name="layerwise_rank2", hook="powersgd", rank=2, start_iter=2,
         error_feedback=1, epsilon=0.0, min_rate=2.0,
         shapes=[(12, 8), (7,), (10, 8), (4, 3, 2), (12, 8)], iterations=5),
    dict(name="layerwise_rank1_no_error_feedback", hook="powersgd", rank=1,
         start_iter=2, error_feedback=0, epsilon=0.0, min_rate=2.0,
         shapes=[(6, 5, 2), (9,), (8, 8)], iterations=4),
    dict(name="layerwise_rank3_epsilon", hook="powersgd", rank=3, start_iter=2,
         error_feedback=1, epsilon=1e-8, min_rate=1.0,
         shapes=[(16, 9), (5,), (9, 16)], iterations=4),
    # torch 2.15's batched_powerSGD_hook passes its 2-D Q to _orthogonalize,
    # which asserts on anything but a 3-D batch: it fails on every input.
    dict(name="batched_rank1_unpatched", hook="batched_powersgd", rank=1,
         start_iter=2, error_feedback=1, epsilon=0.0, min_rate=2.0, length=30,
         iterations=3),
    # The same hook with _orthogonalize accepting a 2-D matrix as a batch of
    # one (the minimal repair; the algorithm is untouched).
    dict(name="batched_rank1", hook="batched_powersgd", rank=1, start_iter=2,
         error_feedback=1, epsilon=0.0, min_rate=2.0, length=30, iterations=5,
         patch_orthogonalize=True),
    dict(name="batched_rank2", hook="batched_powersgd", rank=2, start_iter=2,
         error_feedback=1, epsilon=0.0, min_rate=2.0, length=50, iterations=4,
         patch_orthogonalize=True),
    # side = ceil(sqrt(3)) = 2 < rank 3: even repaired, torch asserts
    # rank <= side; we compress at rank min(rank, side).
    dict(name="batched_rank_above_side", hook="batched_powersgd", rank=3,
         start_iter=2, error_feedback=1, epsilon=0.0, min_rate=2.0, length=3,
         iterations=3, patch_orthogonalize=True),
]


class FakeBucket:
    """What torch's PowerSGD hooks call on a dist.GradBucket."""

    def __init__(self, buffer, shapes):
        self._buffer = buffer
        self._shapes = shapes

    def index(self):
        return 0

    def is_last(self):
        return True

    def buffer(self):
        return self._buffer

    def gradients(self):
        out, at = [], 0
        for shape in self._shapes:
            n = math.prod(shape)
            out.append(self._buffer[at:at + n].view(shape))
            at += n
        return out


def low_rank_sizes(case):
    """Total P and Q lengths of a bucket (torch's rule, grouped by shape)."""
    if case["hook"] == "batched_powersgd":
        side = math.ceil(math.sqrt(case["length"]))
        return side * case["rank"], side * case["rank"]
    p = q = 0
    for shape in case["shapes"]:
        if len(shape) < 2:
            continue
        n = shape[0]
        m = math.prod(shape) // n
        r = min(n, m, case["rank"])
        if (n + m) * r * case["min_rate"] < n * m:
            p += n * r
            q += m * r
    return p, q


def orthogonalize_2d_as_batch(matrices, epsilon=0):
    if matrices.dim() == 2:
        return ORIGINAL_ORTHOGONALIZE(matrices.unsqueeze(0), epsilon)
    return ORIGINAL_ORTHOGONALIZE(matrices, epsilon)


ORIGINAL_ORTHOGONALIZE = psgd._orthogonalize


def run_case(case, rank):
    psgd._orthogonalize = (orthogonalize_2d_as_batch
                           if case.get("patch_orthogonalize") else ORIGINAL_ORTHOGONALIZE)
    state = psgd.PowerSGDState(
        process_group=None, matrix_approximation_rank=case["rank"],
        start_powerSGD_iter=case["start_iter"],
        min_compression_rate=case["min_rate"],
        use_error_feedback=bool(case["error_feedback"]), warm_start=True,
        orthogonalization_epsilon=case["epsilon"], random_seed=0)
    hook = psgd.powerSGD_hook if case["hook"] == "powersgd" else psgd.batched_powerSGD_hook
    shapes = case.get("shapes") or [(case["length"],)]
    numel = sum(math.prod(s) for s in shapes)
    outputs = []
    for t in range(case["iterations"]):
        if t == case["start_iter"]:
            p_size, q_size = low_rank_sizes(case)
            q = torch.tensor([q_init_value(j) for j in range(q_size)],
                             dtype=torch.float32)
            p = torch.empty(p_size)
            if case["hook"] == "batched_powersgd":
                # The batched hook keeps P and Q as side x rank matrices.
                q = q.view(-1, case["rank"])
                p = p.view(-1, case["rank"])
            state.p_memory_dict[0] = p
            state.q_memory_dict[0] = q
        buf = torch.tensor([input_value(i, t, rank) for i in range(numel)],
                           dtype=torch.float32)
        out = hook(state, FakeBucket(buf, shapes)).wait()
        outputs.append(out.clone())
    error = state.error_dict.get(0, torch.empty(0))
    return outputs, error.clone()


def fmt(values):
    return " ".join("%.9g" % v for v in values.tolist())


def worker(rank, port, out_path):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=WORLD_SIZE)
    lines = ["# torch %s, gloo, world size %d; written by tests/reference/powersgd_goldens.py"
             % (torch.__version__, WORLD_SIZE)]
    for case in CASES:
        try:
            outputs, error = run_case(case, rank)
            failure = None
        except Exception as e:  # torch's hook itself failed on this input
            outputs, error = [], None
            where = traceback.extract_tb(e.__traceback__)[-1]
            failure = "%s%s in %s (powerSGD_hook.py line %d)" % (
                type(e).__name__, (": " + str(e)) if str(e) else "", where.name, where.lineno)
        gathered = [None] * WORLD_SIZE
        dist.all_gather_object(gathered, (outputs, error, failure))
        if rank != 0:
            continue
        lines.append("case " + case["name"])
        lines.append("hook " + case["hook"])
        lines.append("world_size %d" % WORLD_SIZE)
        if case.get("patch_orthogonalize"):
            lines.append("note torch's _orthogonalize patched to take a 2-D matrix as a batch of one")
        for key in ("rank", "start_iter", "error_feedback", "epsilon", "min_rate", "iterations"):
            lines.append("%s %s" % (key, case[key]))
        if "shapes" in case:
            lines.append("shapes " + " ".join("x".join(map(str, s)) for s in case["shapes"]))
        else:
            lines.append("length %d" % case["length"])
        if failure is not None:
            lines.append("torch_error " + failure.replace("\n", " "))
        else:
            for t in range(case["iterations"]):
                for r in range(1, WORLD_SIZE):
                    if not torch.equal(gathered[r][0][t], outputs[t]):
                        raise SystemExit("%s: ranks disagree at iteration %d" % (case["name"], t))
                lines.append("output %d %s" % (t, fmt(outputs[t])))
            for r in range(WORLD_SIZE):
                lines.append("error %d %s" % (r, fmt(gathered[r][1])))
        lines.append("end")
    if rank == 0:
        with open(out_path, "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "hooks", "powersgd", "powersgd_goldens.txt")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.normpath(default_out))
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(port, args.out), nprocs=WORLD_SIZE, join=True)
    print("wrote", args.out)


if __name__ == "__main__":
    main()

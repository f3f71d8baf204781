#!/usr/bin/env python3
"""The compression work of hook_bench's hooks, done by PyTorch on the CPU.

argv: threads, repetitions, then the bucket element counts. Prints one line
per hook: "<hook> <gradient bytes per second>", best of the repetitions.
torch's own hooks do exactly this work around their allreduce
(default_hooks._compress_hook: buffer.to(dtype).div_(world); buffer.copy_()).
"""
import sys
import time

import torch

WORLD = 2  # the divisor, as in a two-rank job; int8 cuts buckets in WORLD chunks
EPS = 1e-7


def fp_cast(buckets, dtype):
    for b in buckets:
        h = b.to(dtype).div_(WORLD)
        b.copy_(h)


def divide(buckets):
    for b in buckets:
        b.div_(WORLD)


def int8(buckets):
    # Bagua's min-max quantization per chunk, written with torch ops.
    for b in buckets:
        for chunk in b.chunk(WORLD):
            lo, hi = torch.aminmax(chunk)
            scale = 255.0 / (hi - lo + EPS)
            q = ((chunk - lo) * scale).clamp_(0, 255).round_().to(torch.uint8)
            chunk.copy_(q.to(torch.float32).mul_(1.0 / scale).add_(lo))


def best_rates(works, buckets, reps):
    """Best rate of each work, measured round-robin like hook_bench.cc."""
    nbytes = sum(b.numel() * 4 for b in buckets)
    best = {}
    for name, fn in works:
        fn(buckets)  # warm up
        best[name] = float("inf")
    for _ in range(reps):
        for name, fn in works:
            t0 = time.perf_counter()
            fn(buckets)
            best[name] = min(best[name], time.perf_counter() - t0)
    return {name: nbytes / seconds for name, seconds in best.items()}


def main():
    threads, reps = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    buckets = [torch.randn(int(n)) for n in sys.argv[3:]]
    dst = [torch.empty_like(b) for b in buckets]
    works = [
        ("memcpy", lambda bs: [d.copy_(b) for d, b in zip(dst, bs)]),
        ("allreduce", divide),
        ("fp16", lambda bs: fp_cast(bs, torch.float16)),
        ("bf16", lambda bs: fp_cast(bs, torch.bfloat16)),
        ("int8", int8),
    ]
    for name, rate in best_rates(works, buckets, reps).items():
        print(name, rate)


if __name__ == "__main__":
    main()

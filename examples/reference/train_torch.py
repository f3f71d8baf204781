#!/usr/bin/env python3
"""The same training as //examples:train, in PyTorch DDP with gloo (CPU).

With --model=cnn: the same training as //examples/torch:train (the residual
CNN of examples/torch/cnn.h, examples/reference/residual_cnn.py here, with
BatchNorm buffers broadcast by DDP, evaluation in eval mode).

Same model (MLP 784-<hidden>-10 with ReLU, torch's default nn.Linear init),
same data (Debian's Fashion-MNIST IDX files, the same normalization), same
sharding rule (DistributedSampler, shuffle, seed + epoch), same optimizer
(SGD with momentum and weight decay), same flags and the same progress lines
and --metrics_out JSON fields, so the two can be compared side by side
(docs/examples.md). Random streams differ (torch's generator, not ours), so
runs agree statistically, not bit for bit.

  python3 examples/reference/train_torch.py --nproc=2 --epochs=1
  torchrun --nproc-per-node=2 examples/reference/train_torch.py --nproc=0
"""
import argparse
import gzip
import json
import math
import os
import socket
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from residual_cnn import ResidualCnn  # noqa: E402

MEAN, STD = 0.2860, 0.3530  # examples/data/fashion_mnist.h


def read_idx(path):
    if not os.path.exists(path):
        sys.exit(f"Fashion-MNIST file {path} is missing; install Debian's "
                 "dataset-fashion-mnist package (apt-get install dataset-fashion-mnist)")
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 8:
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    ndims = data[3]
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def load(data_dir, split):
    images = read_idx(f"{data_dir}/{split}-images-idx3-ubyte.gz")
    labels = read_idx(f"{data_dir}/{split}-labels-idx1-ubyte.gz")
    x = (images.reshape(len(images), -1).astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(x), torch.from_numpy(labels.astype(np.int64))


def mlp(hidden):
    widths = [784] + hidden + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def register_hook(model, spec, group):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as dh
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    name, _, opts = spec.partition(":")
    options = dict(kv.split("=") for kv in opts.split(",") if kv)
    if name == "allreduce":
        model.register_comm_hook(group, dh.allreduce_hook)
    elif name == "fp16":
        model.register_comm_hook(group, dh.fp16_compress_hook)
    elif name == "bf16":
        model.register_comm_hook(group, dh.bf16_compress_hook)
    elif name in ("powersgd", "batched_powersgd"):
        state = ps.PowerSGDState(
            process_group=group,
            matrix_approximation_rank=int(options.get("rank", 1)),
            start_powerSGD_iter=int(options.get("start_iter", 1000)),
            use_error_feedback=options.get("use_error_feedback", "1") == "1",
            warm_start=options.get("warm_start", "1") == "1")
        hook = ps.powerSGD_hook if name == "powersgd" else ps.batched_powerSGD_hook
        model.register_comm_hook(state, hook)
    else:
        sys.exit(f"--hook={spec}: torch has no such built-in hook "
                 "(allreduce, fp16, bf16, powersgd, batched_powersgd)")


def learning_rate_at(schedule, base_lr, step, total_steps):
    """examples/trainer/lr_schedule.cc."""
    if schedule == "constant" or total_steps <= 0:
        return base_lr
    progress = min(1.0, step / total_steps)
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def evaluate(model, x, y, rank, world):
    begin, end = len(x) * rank // world, len(x) * (rank + 1) // world
    correct = loss_sum = 0.0
    model.eval()
    with torch.no_grad():
        for s in range(begin, end, 256):
            logits = model(x[s:min(s + 256, end)])
            labels = y[s:min(s + 256, end)]
            correct += (logits.argmax(1) == labels).sum().item()
            loss_sum += nn.functional.cross_entropy(logits, labels, reduction="sum").item()
    model.train()
    sums = torch.tensor([correct, loss_sum], dtype=torch.float64)
    dist.all_reduce(sums)
    return sums[0].item() / len(x), sums[1].item() / len(x)


def run(rank, world, args):
    cores = os.cpu_count() or 1
    threads = args.threads or max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", world)))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    hidden = [int(h) for h in args.hidden.split(",") if h]
    net = ResidualCnn(args.width) if args.model == "cnn" else mlp(hidden)
    model = DDP(net, bucket_cap_mb=args.bucket_cap_mb,
                gradient_as_bucket_view=args.gradient_as_bucket_view == 1)
    register_hook(model, args.hook, None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    x, y = load(args.data_dir, "train")
    tx, ty = load(args.data_dir, "t10k")
    if args.model == "cnn":
        x, tx = x.view(-1, 1, 28, 28), tx.view(-1, 1, 28, 28)
    sampler = torch.utils.data.DistributedSampler(range(len(x)), world, rank, shuffle=True,
                                                  seed=args.seed)
    steps_per_epoch = (len(sampler) + args.batch_size - 1) // args.batch_size
    nparams = sum(p.numel() for p in model.parameters())
    grad_bytes = 4 * nparams
    sent = {"allreduce": grad_bytes, "fp16": grad_bytes // 2, "bf16": grad_bytes // 2}.get(
        args.hook.partition(":")[0])
    lead = rank == 0
    metrics = open(args.metrics_out, "a") if (lead and args.metrics_out) else None
    total_steps = args.epochs * steps_per_epoch
    if args.max_steps >= 0:
        total_steps = min(total_steps, args.max_steps)
    if lead:
        name = (f"ResidualCNN(width {args.width})" if args.model == "cnn"
                else f"MLP 784-{'-'.join(map(str, hidden))}-10")
        print(f"[torch] training {name} ({nparams} parameters) "
              f"on {len(x)} Fashion-MNIST images, {world} ranks x batch {args.batch_size}, "
              f"{steps_per_epoch} steps/epoch, gloo, DDP hook {args.hook}, "
              f"{threads} threads/rank", flush=True)
    start = time.time()
    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)))
        t_epoch, losses, window, wsteps = time.time(), [], 0.0, 0
        for i in range(steps_per_epoch):
            if 0 <= args.max_steps <= step:
                break
            t0 = time.time()
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            for group in opt.param_groups:
                group["lr"] = learning_rate_at(args.lr_schedule, args.lr, step, total_steps)
            opt.step()
            step += 1
            dt = time.time() - t0
            losses.append(loss.item())
            window += dt
            wsteps += 1
            if metrics:
                rec = {"type": "step", "epoch": epoch + 1, "step": step, "loss": loss.item(),
                       "step_time_s": dt, "samples_per_s": world * len(idx) / dt,
                       "gradient_bytes": grad_bytes, "wall_s": time.time() - start}
                if sent:
                    rec.update(bytes_sent=sent, compression_ratio=grad_bytes / sent)
                metrics.write(json.dumps(rec) + "\n")
            if lead and (wsteps >= args.log_every or i + 1 == steps_per_epoch):
                print(f"[torch] epoch {epoch + 1}/{args.epochs} step {i + 1}/{steps_per_epoch} | "
                      f"{world * args.batch_size * wsteps / window:.0f} samples/s | "
                      f"loss {loss.item():.4f}", flush=True)
                window, wsteps = 0.0, 0
        acc, test_loss = evaluate(model, tx, ty, rank, world)
        if lead:
            print(f"[torch] epoch {epoch + 1}: train loss {np.mean(losses):.4f} | test loss "
                  f"{test_loss:.4f} | test accuracy {100 * acc:.2f}% | "
                  f"{time.time() - t_epoch:.1f} s | wall {time.time() - start:.1f} s", flush=True)
            if metrics:
                metrics.write(json.dumps({
                    "type": "epoch", "epoch": epoch + 1, "step": step,
                    "train_loss": float(np.mean(losses)), "test_loss": test_loss,
                    "test_acc": acc, "epoch_time_s": time.time() - t_epoch,
                    "wall_s": time.time() - start, "hook": args.hook, "backend": "gloo",
                    "world_size": world, "impl": "torch"}) + "\n")
                metrics.flush()
        if 0 <= args.max_steps <= step:
            break
    if lead:
        print(f"[torch] done: {step} steps, test accuracy {100 * acc:.2f}%, "
              f"{time.time() - start:.1f} s", flush=True)
    dist.destroy_process_group()


def spawned(local_rank, world, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      LOCAL_WORLD_SIZE=str(world))
    run(local_rank, world, args)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=1,
                   help="local ranks to spawn; 0: use torchrun's RANK/WORLD_SIZE")
    p.add_argument("--hook", default="allreduce")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--hidden", default="2048,2048")
    p.add_argument("--model", default="mlp", choices=("mlp", "cnn"))
    p.add_argument("--width", type=int, default=16, help="--model=cnn: first stage's channels")
    p.add_argument("--lr_schedule", default="constant", choices=("constant", "cosine"))
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per rank (0: cores / local ranks)")
    p.add_argument("--bucket_cap_mb", type=float, default=25.0)
    p.add_argument("--gradient_as_bucket_view", type=int, default=0, choices=(0, 1),
                   help="torch's DDP option (default off there; examples/train's default is on)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max_steps", type=int, default=-1)
    p.add_argument("--log_every", type=int, default=10)
    p.add_argument("--metrics_out", default="")
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()
    if args.nproc == 0 or "RANK" in os.environ:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(spawned, args=(args.nproc, port, args), nprocs=args.nproc)


if __name__ == "__main__":
    main()

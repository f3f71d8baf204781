#!/usr/bin/env python3
"""PyTorch's own DDP and powerSGD_hook for one epoch on the MLP that
multi_host.sh trains, as the yardstick for our PowerSGD's one-epoch accuracy.

  python3 examples/benchmarks/powersgd_torch_epoch.py allreduce|powersgd START [PORT [SEED]]

Fashion-MNIST (/usr/share/datasets/fashion-mnist, normalized with the mean and
std the trainer uses), 784-2048-2048-10, 4 gloo ranks on this machine x batch
64 (235 steps), SGD lr 0.05 momentum 0.9, one 100 MiB bucket;
PowerSGDState(matrix_approximation_rank=2, start_powerSGD_iter=START,
use_error_feedback=True, warm_start=True). Prints
`RESULT <hook> start=START seed=SEED steps=N test_acc=<percent>`. SEED (0)
seeds torch's generator (initialization) and, plus one, the data order.
Initialization and data order are torch's, not the trainer's, so compare
the gap to allreduce, not the accuracies themselves;
powersgd_torch_same_run.py runs the trainer's own initialization and data
order through torch's hook, step for step comparable.
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook as ps
import torch.multiprocessing as mp

DATA = "/usr/share/datasets/fashion-mnist"
WORLD = 4
BATCH = 64
MEAN, STD = 0.2860, 0.3530  # examples/data/fashion_mnist.h


def images(name):
    raw = np.frombuffer(gzip.open(os.path.join(DATA, name)).read(), np.uint8, offset=16)
    return (torch.tensor(raw.reshape(-1, 784), dtype=torch.float32) / 255 - MEAN) / STD


def labels(name):
    raw = np.frombuffer(gzip.open(os.path.join(DATA, name)).read(), np.uint8, offset=8)
    return torch.tensor(raw.astype(np.int64))


def run(rank, hook, start, port, seed):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    x, y = images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz")
    xt, yt = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
    model = torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=100)
    if hook == "powersgd":
        state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                 start_powerSGD_iter=start, use_error_feedback=True,
                                 warm_start=True, random_seed=0)
        ddp.register_comm_hook(state, ps.powerSGD_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed + 1))[rank::WORLD]
    steps = (len(order) + BATCH - 1) // BATCH
    for s in range(steps):
        i = order[s * BATCH:(s + 1) * BATCH]
        loss = torch.nn.functional.cross_entropy(ddp(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    if rank == 0:
        print(f"RESULT {hook} start={start} seed={seed} steps={steps} "
              f"test_acc={acc * 100:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("allreduce", "powersgd"):
        sys.exit(__doc__)
    mp.spawn(run, args=(sys.argv[1], int(sys.argv[2]),
                        int(sys.argv[3]) if len(sys.argv) > 3 else 29631,
                        int(sys.argv[4]) if len(sys.argv) > 4 else 0), nprocs=WORLD)

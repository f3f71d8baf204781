"""What the torch DDP tests on the ddpx backend share: ranks as real
processes (torch.multiprocessing, the store on a free port), the MLP and
data of examples/reference/train_torch.py (Fashion-MNIST from Debian's
dataset-fashion-mnist), and one training run that returns the final
parameters.

The training run is deterministic given the backend's sums: one torch thread
per rank, weights from torch.manual_seed(0), rank r's batch of step s is
rows [(s * world + r) * batch, ... + batch) of the training set.
"""
import glob
import os
import socket
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "reference"))
import train_torch  # noqa: E402  (mlp, load, register_hook: torch's hooks by spec)

# Under Bazel the built package sits in the runfiles (//python:ddpx_torch);
# elsewhere the installed wheel is used. Spawned ranks inherit sys.path.
if glob.glob(os.path.join(ROOT, "python", "ddpx_torch", "_C*.so")):
    sys.path.insert(0, os.path.join(ROOT, "python"))

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def import_backend(backend):
    """Makes `backend` known to torch.distributed ("ddpx" by importing
    ddpx_torch, which registers it)."""
    if "ddpx" in backend:
        import ddpx_torch  # noqa: F401


def _rank_main(rank, world, port, backend, fn, args, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    try:
        import_backend(backend)
        dist.init_process_group(backend, rank=rank, world_size=world)
        result = fn(rank, world, *args)
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        traceback.print_exc()
        raise


def run_ranks(world, backend, fn, *args):
    """fn(rank, world, *args) on `world` processes in a group on `backend`;
    returns the list of what each rank's fn returned (torch.save-able)."""
    with tempfile.TemporaryDirectory(prefix="ddpx_ddp_") as out_dir:
        mp.start_processes(_rank_main, args=(world, free_port(), backend, fn, args, out_dir),
                           nprocs=world, join=True, start_method="spawn")
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(world)]


_DATA = None


def batches(steps, world, batch):
    """x [steps, world, batch, 784] float32 and y [steps, world, batch] int64."""
    global _DATA
    if _DATA is None:
        _DATA = train_torch.load(DATA_DIR, "train")
    x, y = _DATA
    n = steps * world * batch
    if n > len(x):
        raise ValueError(f"{steps} steps of {world}x{batch} need {n} images; the set has {len(x)}")
    return (x[:n].reshape(steps, world, batch, 784).contiguous(),
            y[:n].reshape(steps, world, batch).contiguous())


def make_model(hidden):
    torch.manual_seed(0)
    return train_torch.mlp(list(hidden))


def flat_parameters(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train(model, rank, steps, world, batch, lr=0.05, momentum=0.9):
    """SGD steps on rank's shard; returns rank 0's losses per step and the
    final parameters flattened (named_parameters order)."""
    x, y = batches(steps, world, batch)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[s, rank]), y[s, rank])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, flat_parameters(model.module if hasattr(model, "module") else model)


def assert_close_parameters(test, got, want, what, rtol=1e-4, atol=1e-5):
    """got/want: flat parameter tensors. The message names the worst element."""
    test.assertEqual(got.shape, want.shape, what)
    diff = (got - want).abs()
    bound = atol + rtol * want.abs()
    worst = int(torch.argmax(diff - bound))
    test.assertTrue(bool(torch.all(diff <= bound)),
                    f"{what}: element {worst} is {got[worst].item()!r}, expected "
                    f"{want[worst].item()!r} (max |diff| {diff.max().item():.3g})")

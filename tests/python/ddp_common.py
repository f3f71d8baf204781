"""What the torch DDP tests on the ddpx backend share: ranks as real
processes (harness.run_ranks: from a forkserver, a FileStore each run), the MLP and
data of examples/reference/train_torch.py (Fashion-MNIST from Debian's
dataset-fashion-mnist), and one training run that returns the final
parameters.

The training run is deterministic given the backend's sums: one torch thread
per rank, weights from torch.manual_seed(0), rank r's batch of step s is
rows [(s * world + r) * batch, ... + batch) of the training set.
"""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import harness  # tests/python/harness.py: real ranks, deadlines, every rank's story

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "reference"))
import train_torch  # noqa: E402  (mlp, load, register_hook: torch's hooks by spec)

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def _to_wire(value):
    """Tensors as numpy arrays, which pickle by value (a tensor would travel
    as shared memory that its rank's exit may take away)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.detach().numpy().copy())
    if isinstance(value, (list, tuple)):
        return type(value)(_to_wire(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_wire(v) for k, v in value.items()}
    return value


def _from_wire(value):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "tensor":
        return torch.from_numpy(value[1])
    if isinstance(value, (list, tuple)):
        return type(value)(_from_wire(v) for v in value)
    if isinstance(value, dict):
        return {k: _from_wire(v) for k, v in value.items()}
    return value


def _rank_body(rank, world, init_method, backend, fn, args):
    torch.set_num_threads(1)
    if "ddpx" in backend:
        import ddpx_torch  # noqa: F401  (registers the backend)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    try:
        return _to_wire(fn(rank, world, *args))
    finally:
        dist.destroy_process_group()


def run_ranks(world, backend, fn, *args, timeout=600):
    """fn(rank, world, *args) on `world` processes (harness.run_ranks) in a
    default group on `backend`; returns what each rank's fn returned."""
    return [_from_wire(v) for v in harness.run_ranks(
        _rank_body, world, args=(backend, fn, args), timeout=timeout)]


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
    """Every parameter flattened, in order; FSDP's sharded ones gathered
    (full_tensor, a collective: every rank calls it)."""
    return torch.cat([(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().reshape(-1)
                      for p in model.parameters()])


def train(model, rank, steps, world, batch, lr=0.05, momentum=0.9, zero_first_step=False):
    """SGD steps on rank's shard; returns the losses per step and the final
    parameters flattened (named_parameters order).

    zero_first_step: one step before them with the loss times 0 (zero
    gradients: the parameters and momentum stay as they are). torch's DDP
    lays its first bucket out in registration order and ddpx's C++ DDP in
    reverse order; both rebuild it in gradient-ready order after the first
    step, so from the second step on a layout-sensitive hook (int8's chunks)
    sees the same bucket in both.
    """
    x, y = batches(steps, world, batch)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    if zero_first_step:
        opt.zero_grad()
        (torch.nn.functional.cross_entropy(model(x[0, rank]), y[0, rank]) * 0).backward()
        opt.step()
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

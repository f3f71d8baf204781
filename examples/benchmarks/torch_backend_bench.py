#!/usr/bin/env python3
"""ddpx's allreduce from Python against Gloo's and DeepSpeed's, each like
for like, in one run:

    ddpx's dist.all_reduce                  against  Gloo's dist.all_reduce
        (torch's Python function, c10d dispatcher op, ProcessGroup, Work and
        wait on both: the gloo keys of RESULT)
    ddpx's torch.ops.ddpx.all_reduce_world_  against  DeepSpeed's
        torch.ops.deepspeed.inference_all_reduce_
        (a torch custom op called straight from Python with the tensor
        alone, summing over the whole world, synchronous, no Work: the
        deepspeed keys of RESULT; python/csrc/inference_all_reduce.cc)

    bazel run -c opt //examples/benchmarks:torch_backend_bench
    python3 examples/benchmarks/torch_backend_bench.py [--ranks 2,4] [--rounds 5] [--batches 5]

For 2 and 4 ranks (real processes on this host, one torch thread each):
  - all_reduce (SUM, float32) from 8 B to 64 MiB: dist.all_reduce on ddpx
    (column ddpx) and on Gloo (gloo); torch.ops.ddpx.all_reduce_world_ on
    the same ddpx group, the default one (ddpx_op), and DeepSpeed's
    inference_all_reduce_ (deepspeed: the shared-memory op DeepSpeed builds
    itself over the whole world; its op finds its peers only when
    LOCAL_SIZE is set, which this script does);
  - reduce_scatter_tensor and all_gather_into_tensor of 64 MiB (the full
    tensor) on ddpx and Gloo;
  - 2 ranks only: one torch DDP training step (MLP 784-2048-2048-10, batch
    64 per rank, SGD) with the model's process group on ddpx or on Gloo;
  - the floors under ddpx's figures, in the same rounds: the same allreduce
    from C++ on the same ddpx group, through ddpx's ProcessGroup (ddpx_cpp)
    and through torch's c10d::Backend API with its Work (ddpx_backend); and
    each Python path alone on a group of one rank (no peer to wait for):
    dist.all_reduce of 8 B (python_path) and torch.ops.ddpx.all_reduce_ of
    8 B named by the group's name (op_path); and torch's own floor for any
    custom op called from Python, torch.ops.aten.neg_ of 8 B (dispatch_path).
Every rank holds a ddpx group (the default group, as DeepSpeed's op takes
the world), a Gloo group (new_group, also used to agree on iteration counts
and to collect times) and DeepSpeed's op. ddpx's columns share one warm tensor per size (zeros: a
sum keeps them zero); Gloo and DeepSpeed have their own. Rounds alternate
the backends (the order rotates each round); each point of a round is the
slowest rank's mean time per op over enough calls to fill --budget seconds
and at least --min_calls calls, taken in up to --batches batches of at
least 2 calls whose median is kept (a batch that a stretch of load or a
preemption hit does not move the point); at each size the columns' batches
take turns (this VM's CPUs run at times several times slower for seconds,
as the host moves them: taking turns meets every column alike); the figure
is the median over rounds. The
parent process hosts the store (it binds a free port and hands it to the
ranks). The load average is printed at the start, between world sizes and
at the end.

Last line (2 ranks; see issue 30):
  RESULT py_allreduce_vs_gloo_min=  Gloo's time / ddpx's (dist.all_reduce on
             both), worst size
         py_allreduce_vs_gloo_small_min=  the same from 8 B to 1 MiB
         py_allreduce_vs_deepspeed_min=  DeepSpeed's inference_all_reduce_ /
             torch.ops.ddpx.all_reduce_, worst size
         py_allreduce_vs_deepspeed_geomean=  geometric mean over the sizes
         py_reduce_scatter_64MiB_vs_gloo=  Gloo's time / ddpx's
         torch_ddp_step_vs_gloo=  ddpx's step time / Gloo's
         floor_vs_gloo_small_min=  the small_min ratio against ddpx_cpp +
             python_path: what dist.all_reduce on ddpx could reach in this
             run if it cost only its C++ op and torch's own Python path
         floor_vs_deepspeed_min=  the deepspeed_min ratio against ddpx_cpp +
             dispatch_path: the same for the custom op had it cost no more
             than torch's dispatch of an in-place op
"""
import argparse
import datetime
import math
import os
import statistics
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
         32 << 20, 64 << 20]
SMALL_MAX = 1 << 20
BIG = 64 << 20
# all_reduce columns: (name, what is called). ddpx and gloo through
# dist.all_reduce, ddpx_op and deepspeed through their torch custom ops.
BACKENDS = ["ddpx", "gloo", "ddpx_op", "deepspeed"]
# The pairs RESULT compares: (ddpx's column, the other's).
LIKE_FOR_LIKE = {"gloo": "ddpx", "deepspeed": "ddpx_op"}
# ddpx's allreduce from C++ on the same group, timed like the Python points:
# the floors under the Python figures (python/csrc/module.cc).
FLOORS = {
    "ddpx_cpp": "the ddpx C++ op (ProcessGroup::allreduce + wait, no torch)",
    "ddpx_backend": "torch's c10d::Backend::allreduce on ddpx + Work.wait, from C++ "
                    "(no Python, no dispatcher)",
}
# 8 B on a group of this rank alone (ddpx), no peer to wait for: what
# dist.all_reduce's Python function, dispatcher and Work.wait() cost an op
# (python_path), and what the custom op's call from Python costs (op_path).
# And torch.ops.aten.neg_ of 8 B: torch's Python call and dispatch of an
# in-place op with a kernel that takes nanoseconds (dispatch_path).
PYTHON_PATH = "python_path"
OP_PATH = "op_path"
DISPATCH_PATH = "dispatch_path"


def human(nbytes):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def fmt_time(seconds):
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def load_average():
    return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


class Rank:
    """One rank's groups and the timing rule every measurement follows."""

    def __init__(self, rank, world, args):
        self.rank, self.world, self.args = rank, world, args
        self.ddpx = dist.group.WORLD
        self.gloo = dist.new_group(backend="gloo")
        # This rank alone on ddpx: torch's Python path with no peer to wait for.
        self.solo = [dist.new_group([i], backend="ddpx") for i in range(world)][rank]
        self.deepspeed_ok = self._init_deepspeed() if not args.no_deepspeed else False

    def _init_deepspeed(self):
        import deepspeed
        deepspeed.comm.init_distributed(dist_backend="gloo", verbose=False)
        cdb = deepspeed.comm.comm.cdb
        level = getattr(cdb, "shm_vector_kernel_level", 0)
        ok = (getattr(cdb, "shm_comm_op", None) is not None and level >= 1
              and hasattr(torch.ops.deepspeed, "inference_all_reduce_"))
        if not ok and self.rank == 0:
            print(f"DeepSpeed's shared-memory op is not usable here (op built: "
                  f"{getattr(cdb, 'shm_comm_op', None) is not None}, vector kernel level "
                  f"{level}); its column is left out", flush=True)
        return ok

    def _slowest(self, seconds):
        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.gloo)
        return t.item()

    def time_per_op(self, fn, budget=None, loop=None, min_iters=2):
        """The slowest rank's mean seconds per fn() (time_alternating's rule,
        for one column)."""
        return self.time_alternating({"": (fn, loop)}, budget, min_iters)[""]

    def time_alternating(self, columns, budget=None, min_iters=2, max_iters=50000):
        """For each column name -> (fn, loop): the slowest rank's mean seconds
        per fn() over iterations that fill `budget` seconds and number at
        least `min_iters` (every rank runs the same count), in up to
        --batches batches of at least 2 iterations: the median batch. The
        columns' batches take turns, so that a stretch of load, or the host
        moving this VM's CPUs, meets every column alike. `loop(n)`, if given,
        runs the n iterations itself (the C++ floors)."""
        budget = budget or self.args.budget
        loops, batches, warm = {}, {}, {}
        for name, (fn, loop) in columns.items():
            loop = loop or (lambda n, fn=fn: [fn() for _ in range(n)])
            loop(1)
            start = time.perf_counter()
            loop(1)
            estimate = self._slowest(time.perf_counter() - start)
            iters = max(min_iters, min(max_iters, int(budget / max(estimate, 1e-7))))
            count = max(1, min(self.args.batches, iters // 2))
            loops[name] = loop
            batches[name] = (count, iters // count)  # (batches, calls in each)
            # Each batch starts after a barrier through Gloo, the ranks idle
            # in it; ~2 ms of untimed calls first bring the CPUs back (a
            # column that follows Gloo's would otherwise pay for waking
            # them, one that follows a busy column not).
            warm[name] = int(2e-3 / estimate) if estimate < 1e-3 else 0
        means = {name: [] for name in columns}
        for i in range(max(count for count, _ in batches.values())):
            for name, loop in loops.items():
                count, n = batches[name]
                if i >= count:
                    continue
                dist.barrier(group=self.gloo)
                if warm[name] > 0:
                    loop(warm[name])
                start = time.perf_counter()
                loop(n)
                means[name].append(self._slowest((time.perf_counter() - start) / n))
        return {name: statistics.median(m) for name, m in means.items()}


def allreduce_fn(r, backend, t):
    """One allreduce of t the way `backend`'s column calls it (the ops looked
    up once, as a program would)."""
    if backend == "deepspeed":
        ds_op = torch.ops.deepspeed.inference_all_reduce_
        return lambda: ds_op(t)
    if backend == "ddpx_op":
        ddpx_op = torch.ops.ddpx.all_reduce_world_  # r.ddpx is the default group
        return lambda: ddpx_op(t)
    group = r.ddpx if backend == "ddpx" else r.gloo
    return lambda: dist.all_reduce(t, group=group)


def floor_loop(r, floor, t):
    """n allreduces of t from C++ on the same ddpx group: FLOORS[floor]."""
    from ddpx_torch import _C
    through_backend = floor == "ddpx_backend"
    return lambda n: _C._time_allreduce(r.ddpx, t, n, through_backend)


def check_allreduce(r, backends):
    """Each backend sums (a wrong sum would make its time meaningless)."""
    for backend in backends:
        t = torch.full((1000,), float(r.rank + 1))
        allreduce_fn(r, backend, t)()
        want = r.world * (r.world + 1) / 2
        if not bool(torch.all(t == want)):
            raise RuntimeError(f"{backend}: all_reduce gave {t[0].item()}, expected {want}")


def bench_collectives(r, out):
    backends = [b for b in BACKENDS if b != "deepspeed" or r.deepspeed_ok]
    check_allreduce(r, backends)
    # ddpx's columns and floors share the ddpx group's tensors.
    owners = {b: "ddpx" if b.startswith("ddpx") else b for b in backends}
    tensors = {(o, s): torch.zeros(s // 4) for o in set(owners.values()) for s in SIZES}
    rs_in = {b: torch.zeros(BIG // 4) for b in ("ddpx", "gloo")}
    rs_out = {b: torch.zeros(BIG // 4 // r.world) for b in ("ddpx", "gloo")}
    for rnd in range(r.args.rounds):
        order = backends[rnd % len(backends):] + backends[:rnd % len(backends)]
        for s in SIZES:
            columns = {b: (allreduce_fn(r, b, tensors[(owners[b], s)]), None) for b in order}
            columns.update({f: (None, floor_loop(r, f, tensors[("ddpx", s)])) for f in FLOORS})
            times = r.time_alternating(columns, min_iters=r.args.min_calls)
            for name, t in times.items():
                out.setdefault(("all_reduce", name, s), []).append(t)
        solo = torch.zeros(2)
        t = r.time_per_op(lambda: dist.all_reduce(solo, group=r.solo))
        out.setdefault((PYTHON_PATH, "ddpx", 8), []).append(t)
        ddpx_op, solo_name = torch.ops.ddpx.all_reduce_, r.solo.group_name
        t = r.time_per_op(lambda: ddpx_op(solo, "sum", solo_name))
        out.setdefault((OP_PATH, "ddpx", 8), []).append(t)
        neg = torch.ops.aten.neg_
        t = r.time_per_op(lambda: neg(solo))
        out.setdefault((DISPATCH_PATH, "ddpx", 8), []).append(t)
        for b in order:
            if b not in ("ddpx", "gloo"):
                continue
            group = r.ddpx if b == "ddpx" else r.gloo
            t = r.time_per_op(lambda: dist.reduce_scatter_tensor(rs_out[b], rs_in[b], group=group))
            out.setdefault(("reduce_scatter_tensor", b, BIG), []).append(t)
            t = r.time_per_op(lambda: dist.all_gather_into_tensor(rs_in[b], rs_out[b], group=group))
            out.setdefault(("all_gather_into_tensor", b, BIG), []).append(t)
        if r.rank == 0:
            print(f"  round {rnd + 1}/{r.args.rounds} done, {load_average()}", flush=True)


def ddp_model(group):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(),
                              torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                              torch.nn.Linear(2048, 10))
    return DDP(net, process_group=group)


def bench_ddp_step(r, out):
    models = {b: ddp_model(r.ddpx if b == "ddpx" else r.gloo) for b in ("ddpx", "gloo")}
    opts = {b: torch.optim.SGD(m.parameters(), lr=0.01) for b, m in models.items()}
    gen = torch.Generator().manual_seed(r.rank)
    x = torch.randn(64, 784, generator=gen)
    y = torch.randint(0, 10, (64,), generator=gen)

    def step(b):
        opts[b].zero_grad()
        torch.nn.functional.cross_entropy(models[b](x), y).backward()
        opts[b].step()

    for rnd in range(r.args.rounds):
        order = ["ddpx", "gloo"] if rnd % 2 == 0 else ["gloo", "ddpx"]
        columns = {b: (lambda b=b: step(b), None) for b in order}
        times = r.time_alternating(columns, budget=4 * r.args.budget, max_iters=50)
        for b, t in times.items():
            out.setdefault(("ddp_step", b, 0), []).append(t)


def rank_main(rank, world, port, args, result_path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_SIZE=str(world),
                      LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    try:
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False,
                              timeout=timedelta(seconds=300))
        import ddpx_torch  # noqa: F401  (registers the "ddpx" backend)
        dist.init_process_group("ddpx", store=store, rank=rank, world_size=world,
                                timeout=timedelta(seconds=300))
        r = Rank(rank, world, args)
        out = {}
        bench_collectives(r, out)
        if world == 2 and not args.no_ddp:
            bench_ddp_step(r, out)
        if rank == 0:
            torch.save({k: v for k, v in out.items()}, result_path)
        dist.barrier(group=r.gloo)
        dist.destroy_process_group()
    except BaseException:
        traceback.print_exc()
        raise


def run_world(world, args, tmpdir):
    # The parent hosts the store: the port is bound here and handed over.
    server = dist.TCPStore("127.0.0.1", 0, world + 1, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=300))
    path = os.path.join(tmpdir, f"world{world}.pt")
    mp.start_processes(rank_main, args=(world, server.port, args, path), nprocs=world,
                       join=True, start_method="spawn")
    del server
    return {k: statistics.median(v) for k, v in torch.load(path).items()}


def print_table(world, med):
    print(f"\n== {world} ranks: all_reduce (float32, SUM), median over rounds ==")
    print("   ddpx, gloo: dist.all_reduce on each (gloo/ddpx: the gloo keys)")
    print("   ddpx_op: torch.ops.ddpx.all_reduce_world_, deepspeed: "
          "torch.ops.deepspeed.inference_all_reduce_ (deepspeed/ddpx_op: the deepspeed keys)")
    for f, what in FLOORS.items():
        print(f"   {f}: {what}")
    have_ds = ("all_reduce", "deepspeed", SIZES[0]) in med
    cols = [b for b in BACKENDS if b != "deepspeed" or have_ds] + list(FLOORS)
    print(f"   {PYTHON_PATH}: dist.all_reduce of 8 B on a one-rank ddpx group (no peer): "
          f"{fmt_time(med[(PYTHON_PATH, 'ddpx', 8)])} per op")
    print(f"   {OP_PATH}: torch.ops.ddpx.all_reduce_(t, \"sum\", name) of 8 B on a one-rank "
          f"ddpx group (no peer): {fmt_time(med[(OP_PATH, 'ddpx', 8)])} per op")
    print(f"   {DISPATCH_PATH}: torch.ops.aten.neg_ of 8 B (torch's call and dispatch of "
          f"an in-place op): {fmt_time(med[(DISPATCH_PATH, 'ddpx', 8)])} per op")
    print(f"{'size':>8}" + "".join(f" {c:>12}" for c in cols)
          + "  gloo/ddpx" + ("  deepspeed/ddpx_op" if have_ds else ""))
    for s in SIZES:
        line = f"{human(s):>8}" + "".join(f" {fmt_time(med[('all_reduce', c, s)]):>12}"
                                          for c in cols)
        line += f"  {ratio(med, 'gloo', s):9.2f}"
        if have_ds:
            line += f"  {ratio(med, 'deepspeed', s):17.2f}"
        print(line)
    for op in ("reduce_scatter_tensor", "all_gather_into_tensor"):
        d, g = med[(op, "ddpx", BIG)], med[(op, "gloo", BIG)]
        print(f"{op} 64 MiB: ddpx {fmt_time(d)}, gloo {fmt_time(g)}, gloo/ddpx {g / d:.2f}")
    if ("ddp_step", "ddpx", 0) in med:
        d, g = med[("ddp_step", "ddpx", 0)], med[("ddp_step", "gloo", 0)]
        print(f"DDP step (MLP 784-2048-2048-10, batch 64/rank): ddpx {fmt_time(d)}, "
              f"gloo {fmt_time(g)}, ddpx/gloo {d / g:.3f}")


def ratio(med, other, s):
    """`other`'s time / that of ddpx's column called the same way."""
    return med[("all_reduce", other, s)] / med[("all_reduce", LIKE_FOR_LIKE[other], s)]


def result_line(med):
    fields = {
        "py_allreduce_vs_gloo_min": min(ratio(med, "gloo", s) for s in SIZES),
        "py_allreduce_vs_gloo_small_min": min(ratio(med, "gloo", s) for s in SIZES
                                              if s <= SMALL_MAX),
    }
    have_ds = ("all_reduce", "deepspeed", SIZES[0]) in med
    if have_ds:
        ds = [ratio(med, "deepspeed", s) for s in SIZES]
        fields["py_allreduce_vs_deepspeed_min"] = min(ds)
        fields["py_allreduce_vs_deepspeed_geomean"] = math.exp(sum(map(math.log, ds)) / len(ds))
    fields["py_reduce_scatter_64MiB_vs_gloo"] = (med[("reduce_scatter_tensor", "gloo", BIG)]
                                                 / med[("reduce_scatter_tensor", "ddpx", BIG)])
    if ("ddp_step", "ddpx", 0) in med:
        fields["torch_ddp_step_vs_gloo"] = (med[("ddp_step", "ddpx", 0)]
                                            / med[("ddp_step", "gloo", 0)])
    # The same ratios had ddpx's call from Python cost its C++ op (ddpx_cpp)
    # plus that call's own path alone (python_path), or torch's dispatch of
    # an in-place op (dispatch_path): the best each of ddpx's columns could
    # reach in this run.
    def floor_ratio(other, s, path):
        best = med[("all_reduce", "ddpx_cpp", s)] + med[(path, "ddpx", 8)]
        return med[("all_reduce", other, s)] / best
    fields["floor_vs_gloo_small_min"] = min(floor_ratio("gloo", s, PYTHON_PATH) for s in SIZES
                                            if s <= SMALL_MAX)
    if have_ds:
        fields["floor_vs_deepspeed_min"] = min(floor_ratio("deepspeed", s, DISPATCH_PATH)
                                               for s in SIZES)
    return "RESULT " + " ".join(f"{k}={v:.3f}" for k, v in fields.items())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="2,4", help="world sizes, comma-separated (RESULT: 2)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.15,
                   help="seconds of iterations per point and round")
    p.add_argument("--batches", type=int, default=5,
                   help="batches per point and round (of at least 2 calls), the median kept")
    p.add_argument("--min_calls", type=int, default=10,
                   help="all_reduce calls per point and round at least (the large sizes)")
    p.add_argument("--no_deepspeed", action="store_true", help="leave DeepSpeed's column out")
    p.add_argument("--no_ddp", action="store_true", help="leave the DDP step out")
    args = p.parse_args()
    worlds = [int(w) for w in args.ranks.split(",")]
    print(f"torch_backend_bench {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}, python {sys.version.split()[0]}")
    print(load_average(), flush=True)
    import tempfile
    results = {}
    with tempfile.TemporaryDirectory(prefix="torch_backend_bench_") as tmpdir:
        for world in worlds:
            print(f"-- {world} ranks ({load_average()})", flush=True)
            results[world] = run_world(world, args, tmpdir)
            print_table(world, results[world])
    print(f"\n# at the end: {load_average()}")
    if 2 in results:
        print(result_line(results[2]))
    else:
        print("RESULT (needs --ranks with 2)")


if __name__ == "__main__":
    main()

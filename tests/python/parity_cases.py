"""Every torch.distributed op on CPU tensors, run on a ddpx group and on a
torch gloo group of the same ranks in the same process, outputs compared:
exactly for integers and bool, within reduction-order rounding for floats.
Where gloo refuses a combination (AVG of integers, bitwise ops on floats,
int16), ddpx must refuse it too, with a RuntimeError naming the op.

run_all(ddpx_group, gloo_group) returns a list of mismatches (empty: all
agree) and the number of comparisons made.
"""

import torch
import torch.distributed as dist

DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]
REDUCE_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
# Rounding of a sum of a few terms in another order.
TOLERANCE = {torch.float16: 2e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5,
             torch.float64: 1e-12}


def values(dtype, n, rank, salt=0):
    """Deterministic per-rank data that no reduction overflows."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * salt + 5)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        return (torch.rand(n, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)
    # 1..3: products and sums of 4 ranks stay inside int8/uint8.
    return torch.randint(1, 4, (n,), generator=g).to(dtype)


class Comparison:
    def __init__(self):
        self.mismatches = []
        self.count = 0

    def tensors(self, what, got, want):
        self.count += 1
        if got.dtype != want.dtype or got.shape != want.shape:
            self.mismatches.append(f"{what}: ddpx gave {got.dtype}{list(got.shape)}, "
                                   f"gloo {want.dtype}{list(want.shape)}")
            return
        if want.dtype.is_floating_point:
            ok = torch.allclose(got.double(), want.double(), rtol=TOLERANCE[want.dtype],
                                atol=TOLERANCE[want.dtype])
        else:
            ok = torch.equal(got, want)
        if not ok:
            self.mismatches.append(f"{what}: ddpx {got.flatten()[:8].tolist()} "
                                   f"!= gloo {want.flatten()[:8].tolist()}")

    def lists(self, what, got, want):
        for i, (g, w) in enumerate(zip(got, want)):
            self.tensors(f"{what}[{i}]", g, w)

    def both(self, what, run):
        """run(group) -> result, on ddpx then gloo. A refusal must be mutual."""
        outcome = []
        for group in (self.ddpx, self.gloo):
            try:
                outcome.append((True, run(group)))
            except (RuntimeError, ValueError) as e:
                outcome.append((False, e))
        (ok_d, got), (ok_g, want) = outcome
        self.count += 1
        if ok_d != ok_g:
            self.mismatches.append(f"{what}: ddpx {'ran' if ok_d else 'raised ' + repr(got)[:300]}"
                                   f", gloo {'ran' if ok_g else 'raised ' + repr(want)[:200]}")
            return None
        if not ok_d:
            message = str(got)
            if "ddpx" not in message or not any(k in message for k in OP_WORDS):
                self.mismatches.append(f"{what}: ddpx's error does not name ddpx and the op: "
                                       f"{message[:300]}")
            return None
        return got, want


OP_WORDS = ["all_reduce", "broadcast", "reduce", "gather", "scatter", "all_to_all", "dtype",
            "ReduceOp"]


def run_all(ddpx_group, gloo_group):
    c = Comparison()
    c.ddpx, c.gloo = ddpx_group, gloo_group
    rank = dist.get_rank(ddpx_group)
    n = dist.get_world_size(ddpx_group)
    assert dist.get_rank(gloo_group) == rank
    to_global = lambda r: dist.get_global_rank(ddpx_group, r)  # noqa: E731

    for dtype in DTYPES:
        name = str(dtype).replace("torch.", "")
        for op in REDUCE_OPS:
            def all_reduce(group, op=op):
                t = values(dtype, 37, rank)
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op), group=group)
                return t
            r = c.both(f"all_reduce {op} {name}", all_reduce)
            if r:
                c.tensors(f"all_reduce {op} {name}", *r)

        def all_reduce_strided(group):
            t = values(dtype, 48, rank).reshape(6, 8).t()  # not contiguous
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
            return t
        if r := c.both(f"all_reduce non-contiguous {name}", all_reduce_strided):
            c.tensors(f"all_reduce non-contiguous {name}", *r)

        def all_reduce_coalesced(group):
            ts = [values(dtype, k, rank, salt=k) for k in (3, 17, 1)]
            with dist._coalescing_manager(group=group):
                for t in ts:
                    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
            return ts
        if r := c.both(f"coalesced all_reduce {name}", all_reduce_coalesced):
            c.lists(f"coalesced all_reduce {name}", *r)

        for root in range(n):
            def broadcast(group, root=root):
                t = values(dtype, 29, rank, salt=root)
                dist.broadcast(t, src=to_global(root), group=group)
                return t
            if r := c.both(f"broadcast from {root} {name}", broadcast):
                c.tensors(f"broadcast from {root} {name}", *r)

        root = n - 1
        for op in ("SUM", "MAX"):
            def reduce(group, op=op):
                t = values(dtype, 19, rank, salt=3)
                dist.reduce(t, dst=to_global(root), op=getattr(dist.ReduceOp, op), group=group)
                return t
            if (r := c.both(f"reduce {op} {name}", reduce)) and rank == root:
                c.tensors(f"reduce {op} {name}", *r)

        def all_gather(group):
            out = [torch.zeros(7, dtype=dtype) for _ in range(n)]
            dist.all_gather(out, values(dtype, 7, rank, salt=4), group=group)
            return out
        if r := c.both(f"all_gather {name}", all_gather):
            c.lists(f"all_gather {name}", *r)

        def all_gather_into_tensor(group):
            flat = torch.zeros(n * 6, dtype=dtype)
            stacked = torch.zeros(n * 2, 3, dtype=dtype)
            dist.all_gather_into_tensor(flat, values(dtype, 6, rank, salt=5), group=group)
            dist.all_gather_into_tensor(stacked, values(dtype, 6, rank, salt=6).reshape(2, 3),
                                        group=group)
            return [flat, stacked]
        if r := c.both(f"all_gather_into_tensor {name}", all_gather_into_tensor):
            c.lists(f"all_gather_into_tensor {name}", *r)

        def all_gather_into_tensor_coalesced(group):
            outs = [torch.zeros(n * k, dtype=dtype) for k in (5, 2)]
            with dist._coalescing_manager(group=group):
                for k, o in zip((5, 2), outs):
                    dist.all_gather_into_tensor(o, values(dtype, k, rank, salt=k), group=group)
            return outs
        if r := c.both(f"all_gather_into_tensor coalesced {name}",
                       all_gather_into_tensor_coalesced):
            c.lists(f"all_gather_into_tensor coalesced {name}", *r)

        def all_gather_coalesced(group):
            # torch's layout: outs[r][i] receives rank r's input i.
            inputs = [values(dtype, 3, rank, salt=8), values(dtype, 4, rank, salt=9).reshape(2, 2)]
            outs = [[torch.zeros_like(t) for t in inputs] for _ in range(n)]
            dist.all_gather_coalesced(outs, inputs, group=group)
            return [t for per_rank in outs for t in per_rank]
        if r := c.both(f"all_gather_coalesced {name}", all_gather_coalesced):
            c.lists(f"all_gather_coalesced {name}", *r)

        for op in ("SUM", "MIN"):
            def reduce_scatter(group, op=op):
                out = torch.zeros(5, dtype=dtype)
                dist.reduce_scatter(out, [values(dtype, 5, rank, salt=10 + i) for i in range(n)],
                                    op=getattr(dist.ReduceOp, op), group=group)
                return out
            if r := c.both(f"reduce_scatter {op} {name}", reduce_scatter):
                c.tensors(f"reduce_scatter {op} {name}", *r)

            def reduce_scatter_tensor(group, op=op):
                out = torch.zeros(4, dtype=dtype)
                dist.reduce_scatter_tensor(out, values(dtype, 4 * n, rank, salt=20),
                                           op=getattr(dist.ReduceOp, op), group=group)
                return out
            if r := c.both(f"reduce_scatter_tensor {op} {name}", reduce_scatter_tensor):
                c.tensors(f"reduce_scatter_tensor {op} {name}", *r)

        def reduce_scatter_tensor_coalesced(group):
            outs = [torch.zeros(k, dtype=dtype) for k in (3, 1)]
            with dist._coalescing_manager(group=group):
                for k, o in zip((3, 1), outs):
                    dist.reduce_scatter_tensor(o, values(dtype, k * n, rank, salt=30 + k),
                                               group=group)
            return outs
        if r := c.both(f"reduce_scatter_tensor coalesced {name}", reduce_scatter_tensor_coalesced):
            c.lists(f"reduce_scatter_tensor coalesced {name}", *r)

        def all_to_all(group):
            ins = [values(dtype, 4, rank, salt=40 + p) for p in range(n)]
            outs = [torch.zeros(4, dtype=dtype) for p in range(n)]
            dist.all_to_all(outs, ins, group=group)
            return outs
        if r := c.both(f"all_to_all {name}", all_to_all):
            c.lists(f"all_to_all {name}", *r)

        # Uneven all_to_all (rank r sends r + p + 1 elements to peer p), which
        # gloo refuses: against the values each peer sent.
        ins = [values(dtype, rank + p + 1, rank, salt=45 + p) for p in range(n)]
        outs = [torch.zeros(p + rank + 1, dtype=dtype) for p in range(n)]
        dist.all_to_all(outs, ins, group=ddpx_group)
        c.lists(f"uneven all_to_all {name}", outs,
                [values(dtype, p + rank + 1, p, salt=45 + rank) for p in range(n)])

        def all_to_all_single(group):
            in_splits = [rank + p + 1 for p in range(n)]
            out_splits = [p + rank + 1 for p in range(n)]
            inp = values(dtype, sum(in_splits) * 2, rank, salt=50).reshape(-1, 2)
            out = torch.zeros(sum(out_splits), 2, dtype=dtype)
            dist.all_to_all_single(out, inp, out_splits, in_splits, group=group)
            even_in = values(dtype, 3 * n, rank, salt=51)
            even_out = torch.zeros(3 * n, dtype=dtype)
            dist.all_to_all_single(even_out, even_in, group=group)
            return [out, even_out]
        if r := c.both(f"all_to_all_single {name}", all_to_all_single):
            c.lists(f"all_to_all_single {name}", *r)

        def gather(group):
            root = 0
            out = [torch.zeros(4, dtype=dtype) for _ in range(n)] if rank == root else None
            dist.gather(values(dtype, 4, rank, salt=60), out, dst=to_global(root), group=group)
            return out or []
        if r := c.both(f"gather {name}", gather):
            c.lists(f"gather {name}", *r)

        def scatter(group):
            root = n - 1
            ins = [values(dtype, 6, rank, salt=70 + p) for p in range(n)] if rank == root else None
            out = torch.zeros(6, dtype=dtype)
            dist.scatter(out, ins, src=to_global(root), group=group)
            return out
        if r := c.both(f"scatter {name}", scatter):
            c.tensors(f"scatter {name}", *r)

        def send_recv(group):
            # A ring: send to the next rank, receive from the previous one.
            nxt, prv = to_global((rank + 1) % n), to_global((rank - 1) % n)
            out = torch.zeros(9, dtype=dtype)
            works = [dist.isend(values(dtype, 9, rank, salt=80), nxt, group=group),
                     dist.irecv(out, prv, group=group)]
            for w in works:
                w.wait()
            return out
        if n > 1 and (r := c.both(f"send/recv {name}", send_recv)):
            c.tensors(f"send/recv {name}", *r)

    def recv_any_source(group):
        # Rank 0 hears from every other rank once, in whatever order.
        if rank == 0:
            got = {}
            for _ in range(n - 1):
                t = torch.zeros(3, dtype=torch.int64)
                src = dist.recv(t, group=group)
                got[dist.get_group_rank(group, src)] = t
            return [got[p] for p in range(1, n)]
        dist.send(torch.full((3,), 100 + rank, dtype=torch.int64), to_global(0), group=group)
        return []
    if r := c.both("recv from any source", recv_any_source):
        c.lists("recv from any source", *r)
        if rank == 0:
            c.tensors("recv from any source: senders", torch.stack(r[0]) if r[0] else
                      torch.zeros(0, 3, dtype=torch.int64),
                      torch.stack([torch.full((3,), 100 + p, dtype=torch.int64)
                                   for p in range(1, n)]) if n > 1 else
                      torch.zeros(0, 3, dtype=torch.int64))

    def int16(group):
        dist.all_reduce(torch.ones(3, dtype=torch.int16), group=group)
    c.both("all_reduce int16 (unsupported)", int16)

    def barriers(group):
        dist.barrier(group=group)
        dist.monitored_barrier(group=group, wait_all_ranks=True)
        return torch.ones(1)
    if r := c.both("barrier, monitored_barrier", barriers):
        c.tensors("barrier", *r)
    return c.mismatches, c.count

"""torch.ops.ddpx.all_reduce_ and ddpx_torch.inference_all_reduce
(python/csrc/inference_all_reduce.cc) on N ranks (argv[1]): every dtype and
reduce op at sizes from one element to several shared-memory slots give
what torch's gloo gives for dist.all_reduce (exactly for integers and bool,
within rounding for floats), on the default group and on new_group subsets.
With 2 ranks also: each bad argument raises a RuntimeError naming the
problem and leaves the group usable, and a peer that dies makes the live
rank raise within the group's timeout."""

import os
import sys
import time
import unittest

import harness

TIMEOUT_S = 20  # the group's timeout in the failure cases
# One element, a few, an odd count, and several 256 KiB shared-memory slots
# (the worker path rather than the small one begun on the calling thread).
SIZES = [1, 7, 4099, 300_000]
INT_DTYPES = ["int8", "uint8", "int32", "int64", "bool"]
FLOAT_DTYPES = ["float32", "float64", "float16", "bfloat16"]
INT_OPS = ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
FLOAT_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]
# (rtol, atol) for results summed in another order than gloo's. bfloat16
# keeps 8 bits: a partial sum of 4 normal values rounds by up to 1/32 near
# 8, so a result near 0 may be two such roundings away.
TOLERANCE = {"float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12), "float16": (2e-2, 2e-2),
             "bfloat16": (2e-2, 0.125)}


def rank_input(torch, rank, n, dtype_name, op):
    dtype = getattr(torch, dtype_name)
    g = torch.Generator().manual_seed(1000 * rank + n)
    if dtype_name == "bool":
        return torch.randint(0, 2, (n,), generator=g).to(torch.bool)
    if dtype_name in INT_DTYPES:
        # 1..3: sums and products of 4 ranks stay inside int8.
        return torch.randint(1, 4, (n,), generator=g).to(dtype)
    if op == "PRODUCT":
        return (1.0 + 0.1 * torch.rand(n, generator=g)).to(dtype)
    return torch.randn(n, generator=g).to(dtype)


def compare(torch, dist, ddpx_torch, ddpx_group, gloo_group, group_arg):
    """(mismatches, comparisons) over every dtype, op and size on the group;
    group_arg is what names the group to the op (None: the default)."""
    mismatches, count = [], 0
    cases = ([(d, o) for d in INT_DTYPES for o in INT_OPS]
             + [(d, o) for d in FLOAT_DTYPES for o in FLOAT_OPS])
    rank = dist.get_rank(ddpx_group)
    for i, (dtype_name, op) in enumerate(cases):
        for n in SIZES:
            x = rank_input(torch, rank, n, dtype_name, op)
            want = x.clone()
            dist.all_reduce(want, op=getattr(dist.ReduceOp, op), group=gloo_group)
            got = x.clone()
            if i % 2 == 0:  # both spellings, alternately
                out = ddpx_torch.inference_all_reduce(got, op=getattr(dist.ReduceOp, op),
                                                      group=group_arg)
            else:
                name = None if group_arg is None else group_arg.group_name
                out = torch.ops.ddpx.all_reduce_(got, op.lower(), name)
            count += 1
            if out.data_ptr() != got.data_ptr():
                mismatches.append(f"{dtype_name} {op} n={n}: returned another tensor")
            elif dtype_name in FLOAT_DTYPES:
                rtol, atol = TOLERANCE[dtype_name]
                if not torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol):
                    diff = (got.double() - want.double()).abs().max().item()
                    mismatches.append(f"{dtype_name} {op} n={n}: max difference {diff}")
            elif not torch.equal(got, want):
                mismatches.append(f"{dtype_name} {op} n={n}: {got[:4]} != gloo's {want[:4]}")
    return mismatches, count


def subsets_of(world_size):
    return {2: [[1], [0, 1]], 4: [[1, 2, 3], [0, 3]]}[world_size]


def correctness(rank, world_size, init_method):
    dist = harness.init(rank, world_size, init_method)
    import torch
    import ddpx_torch

    report = {"world": compare(torch, dist, ddpx_torch, dist.group.WORLD,
                               dist.new_group(backend="gloo"), None)}
    for subset in subsets_of(world_size):
        ddpx_sub = dist.new_group(subset)  # the default backend: ddpx
        gloo_sub = dist.new_group(subset, backend="gloo")
        if rank in subset:
            report[f"group {subset}"] = compare(torch, dist, ddpx_torch, ddpx_sub, gloo_sub,
                                                ddpx_sub)
    dist.destroy_process_group()
    return report


def bad_arguments(rank, world_size, init_method):
    # The default group on gloo: the op must find no ddpx group by default.
    dist = harness.init(rank, world_size, init_method, backend="gloo", timeout_s=TIMEOUT_S)
    import torch
    import ddpx_torch

    ddpx_group = dist.new_group(backend="ddpx")
    inf = ddpx_torch.inference_all_reduce
    calls = {
        "default group not ddpx": lambda: inf(torch.ones(4)),
        "gloo group": lambda: inf(torch.ones(4), group=dist.group.WORLD),
        "unknown group name": lambda: torch.ops.ddpx.all_reduce_(torch.ones(4), "sum",
                                                                 "no_such_group"),
        "non-contiguous": lambda: inf(torch.ones(4, 4).t(), group=ddpx_group),
        "non-CPU": lambda: inf(torch.ones(4, device="meta"), group=ddpx_group),
        "sparse": lambda: inf(torch.eye(3).to_sparse(), group=ddpx_group),
        "unknown op name": lambda: torch.ops.ddpx.all_reduce_(torch.ones(4), "mean",
                                                              ddpx_group.group_name),
        "PREMUL_SUM": lambda: inf(torch.ones(4), op=dist.ReduceOp.PREMUL_SUM,
                                  group=ddpx_group),
        "AVG of int64": lambda: inf(torch.ones(4, dtype=torch.int64), op=dist.ReduceOp.AVG,
                                    group=ddpx_group),
        "BAND of float": lambda: inf(torch.ones(4), op=dist.ReduceOp.BAND, group=ddpx_group),
        "int16": lambda: inf(torch.ones(4, dtype=torch.int16), group=ddpx_group),
    }
    seen = {}
    for name, call in calls.items():
        try:
            call()
            seen[name] = ("no error", "")
        except RuntimeError as e:
            seen[name] = (type(e).__name__, str(e))
    # The group still works afterwards.
    t = torch.full((3,), float(rank))
    inf(t, group=ddpx_group)
    seen["after"] = t.tolist()
    dist.destroy_process_group()
    return seen


def dead_peer(rank, world_size, init_method):
    dist = harness.init(rank, world_size, init_method, timeout_s=TIMEOUT_S)
    import torch
    import ddpx_torch

    t = torch.ones(1 << 10)
    ddpx_torch.inference_all_reduce(t)  # #0: everyone is there
    if rank == world_size - 1:
        os._exit(3)  # no goodbye: the peer finds the process gone
    started = time.monotonic()
    try:
        ddpx_torch.inference_all_reduce(t)
        outcome = ("returned", "")
    except RuntimeError as e:
        outcome = (type(e).__name__, str(e))
    return outcome + (time.monotonic() - started,)


class InferenceAllReduceTest(unittest.TestCase):
    maxDiff = None
    world_size = 2

    def test_every_dtype_op_and_size_matches_gloo(self):
        reports = harness.run_ranks(correctness, self.world_size)
        for rank, report in enumerate(reports):
            mismatches, count = report["world"]
            self.assertEqual(mismatches, [], f"rank {rank}, whole group")
            self.assertGreater(count, 150, "too few comparisons ran")
        for subset in subsets_of(self.world_size):
            for rank in subset:
                mismatches, count = reports[rank][f"group {subset}"]
                self.assertEqual(mismatches, [], f"rank {rank}, group {subset}")
                self.assertGreater(count, 150)

    def test_bad_arguments_raise_naming_the_problem(self):
        if self.world_size != 2:
            self.skipTest("run by the 2-rank target")
        expected_words = {
            "default group not ddpx": ["default process group is not on ddpx"],
            "gloo group": ["is not on ddpx", "gloo"],
            "unknown group name": ["no process group is named", "no_such_group"],
            "non-contiguous": ["not contiguous"],
            "non-CPU": ["meta", "CPU"],
            "sparse": ["Sparse", "dense"],
            "unknown op name": ["unknown reduce op", "mean"],
            "PREMUL_SUM": ["PREMUL_SUM"],
            "AVG of int64": ["AVG", "Long"],
            "BAND of float": ["BAND"],
            "int16": ["Short"],
        }
        for rank, seen in enumerate(harness.run_ranks(bad_arguments, 2)):
            self.assertEqual(seen.pop("after"), [1.0] * 3, f"rank {rank}")
            self.assertEqual(seen.keys(), expected_words.keys())
            for name, words in expected_words.items():
                kind, message = seen[name]
                self.assertNotEqual(kind, "no error", f"rank {rank}: {name} was accepted")
                self.assertIn("ddpx", message, f"rank {rank}: {name}")
                for word in words:
                    self.assertIn(word, message, f"rank {rank}: {name}")

    def test_dead_peer_raises_within_the_timeout(self):
        if self.world_size != 2:
            self.skipTest("run by the 2-rank target")
        outcome = harness.run_ranks(dead_peer, 2, expect_exit=[1],
                                    timeout=TIMEOUT_S + 150)[0]
        kind, message, seconds = outcome
        self.assertEqual(kind, "DistBackendError", message)
        self.assertLess(seconds, TIMEOUT_S + 10, message)
        for word in ("allreduce #1", "rank 1", "exited"):
            self.assertIn(word, message)


if __name__ == "__main__":
    InferenceAllReduceTest.world_size = int(sys.argv.pop(1))
    unittest.main()

"""torch.ops.ddpx.all_reduce_ and ddpx_torch.inference_all_reduce
(python/csrc/inference_all_reduce.cc) on N ranks (argv[1]): every dtype and
reduce op at sizes from one element to several shared-memory slots give
what torch's gloo gives for dist.all_reduce (exactly for integers and bool,
within rounding for floats), on the default group and on new_group subsets,
and so does torch.ops.ddpx.all_reduce_world_ (SUM, the default group).
With 2 ranks also: each bad argument raises a RuntimeError naming the
problem and leaves the group usable; a tensor reduced in place after
autograd saved it fails backward as torch's in-place ops do; groups
destroyed and made again under the same names are the ones the ops find
(the name lookups are cached); and a peer that dies makes the live rank
raise within the group's timeout."""

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
    group_arg is what names the group to the op (None: the default, where
    torch.ops.ddpx.all_reduce_world_ is compared too, SUM of every dtype)."""
    mismatches, count = [], 0
    cases = ([(d, o, "op") for d in INT_DTYPES for o in INT_OPS]
             + [(d, o, "op") for d in FLOAT_DTYPES for o in FLOAT_OPS])
    if group_arg is None:
        cases += [(d, "SUM", "world_op") for d in INT_DTYPES + FLOAT_DTYPES]
    rank = dist.get_rank(ddpx_group)
    for i, (dtype_name, op, form) in enumerate(cases):
        for n in SIZES:
            x = rank_input(torch, rank, n, dtype_name, op)
            want = x.clone()
            dist.all_reduce(want, op=getattr(dist.ReduceOp, op), group=gloo_group)
            got = x.clone()
            if form == "world_op":
                out = torch.ops.ddpx.all_reduce_world_(got)
            elif i % 2 == 0:  # both spellings, alternately
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
        "requires grad": lambda: inf(torch.ones(4, requires_grad=True), group=ddpx_group),
        "world op, default group not ddpx": lambda: torch.ops.ddpx.all_reduce_world_(
            torch.ones(4)),
        "world op, non-CPU": lambda: torch.ops.ddpx.all_reduce_world_(
            torch.ones(4, device="meta")),
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
    # Reduced in place under no_grad after autograd saved it: backward
    # must see the in-place change, as for torch's own in-place ops.
    x = torch.ones(3, requires_grad=True)
    y = x * 2.0
    loss = (y * y).sum()
    with torch.no_grad():
        inf(y, group=ddpx_group)
    try:
        loss.backward()
        seen["saved then reduced"] = "backward ran"
    except RuntimeError as e:
        seen["saved then reduced"] = str(e)
    dist.destroy_process_group()
    return seen


def recreated_groups(rank, world_size, init_method, second_init, third_init):
    """Groups destroyed and made again under the same names (torch numbers
    groups from 0 again after destroy_process_group()): what the op finds
    is the group torch gives the name now. Values: {step: result or error}."""
    import torch

    dist = harness.init(rank, world_size, init_method)
    op, world_op = torch.ops.ddpx.all_reduce_, torch.ops.ddpx.all_reduce_world_
    seen = {}

    def attempt(step, call):
        try:
            seen[step] = call(torch.full((2,), float(rank + 1))).tolist()
        except RuntimeError as e:
            seen[step] = str(e)

    pair = dist.new_group([0, 1])
    name = pair.group_name
    seen["names"] = [name]
    attempt("1: world", lambda t: world_op(t))
    attempt("1: pair", lambda t: op(t, "sum", name))
    # Destroyed while this rank still holds it: torch no longer knows it.
    dist.destroy_process_group(pair)
    attempt("1: pair destroyed, still held", lambda t: op(t, "sum", name))
    del pair
    dist.destroy_process_group()
    attempt("1: world destroyed", lambda t: world_op(t))

    # The same names again: `name` is rank 0's group of one now (rank 1 is
    # not in it, so torch has no group of that name on rank 1).
    dist = harness.init(rank, world_size, second_init)
    solo = [dist.new_group([r]) for r in range(world_size)]
    if rank == 0:
        seen["names"].append(solo[0].group_name)
    attempt("2: world", lambda t: world_op(t))
    attempt("2: name of the pair", lambda t: op(t, "sum", name))
    del solo
    dist.destroy_process_group()

    # Gloo's under the same names; a ddpx group beside them.
    dist = harness.init(rank, world_size, third_init, backend="gloo")
    gloo_pair = dist.new_group([0, 1], backend="gloo")
    ddpx_pair = dist.new_group([0, 1], backend="ddpx")
    seen["names"].append(gloo_pair.group_name)
    attempt("3: world (gloo)", lambda t: world_op(t))
    attempt("3: name of the pair (gloo)", lambda t: op(t, "sum", name))
    attempt("3: ddpx pair", lambda t: op(t, "sum", ddpx_pair.group_name))
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
            "requires grad": ["requires grad", "no_grad"],
            "world op, default group not ddpx": ["all_reduce_world_",
                                                 "default process group is not on ddpx"],
            "world op, non-CPU": ["all_reduce_world_", "meta", "CPU"],
        }
        for rank, seen in enumerate(harness.run_ranks(bad_arguments, 2)):
            self.assertEqual(seen.pop("after"), [1.0] * 3, f"rank {rank}")
            self.assertIn("modified by an inplace operation", seen.pop("saved then reduced"),
                          f"rank {rank}")
            self.assertEqual(seen.keys(), expected_words.keys())
            for name, words in expected_words.items():
                kind, message = seen[name]
                self.assertNotEqual(kind, "no error", f"rank {rank}: {name} was accepted")
                self.assertIn("ddpx", message, f"rank {rank}: {name}")
                for word in words:
                    self.assertIn(word, message, f"rank {rank}: {name}")

    def test_groups_made_again_under_a_name_are_the_ones_found(self):
        if self.world_size != 2:
            self.skipTest("run by the 2-rank target")
        inits = (harness.new_init_method(), harness.new_init_method())
        for rank, seen in enumerate(harness.run_ranks(recreated_groups, 2, args=inits)):
            names = seen.pop("names")
            self.assertEqual(len(set(names)), 1,
                             f"torch did not give the groups the same name again: {names}")
            self.assertEqual(seen.pop("1: world"), [3.0, 3.0], f"rank {rank}")
            self.assertEqual(seen.pop("1: pair"), [3.0, 3.0], f"rank {rank}")
            self.assertEqual(seen.pop("2: world"), [3.0, 3.0], f"rank {rank}")
            self.assertEqual(seen.pop("3: ddpx pair"), [3.0, 3.0], f"rank {rank}")
            # Rank 0 alone in the group of that name now; rank 1 has none.
            if rank == 0:
                self.assertEqual(seen.pop("2: name of the pair"), [1.0, 1.0])
            expected_words = {
                "1: pair destroyed, still held": ["no process group is named", names[0]],
                "1: world destroyed": ["default process group is not on ddpx"],
                "2: name of the pair": ["no process group is named", names[0]],
                "3: world (gloo)": ["default process group is not on ddpx"],
                "3: name of the pair (gloo)": ["is not on ddpx", "gloo"],
            }
            if rank == 0:
                del expected_words["2: name of the pair"]
            self.assertEqual(seen.keys(), expected_words.keys(), f"rank {rank}")
            for step, words in expected_words.items():
                for word in words:
                    self.assertIn(word, str(seen[step]), f"rank {rank}, {step}")

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

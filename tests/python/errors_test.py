"""Failures on ddpx raise in every live rank within the group's timeout,
with ddpx's message (op, sequence number, culprit rank), and leave
DDPX_TRACE_DIR dumps that tools/trace_analyze reads; bad arguments raise a
RuntimeError naming the op, never crash."""

import os
import subprocess
import sys
import time
import unittest

import harness

TIMEOUT_S = 20  # the group's timeout in these tests


def failing_op(rank, world_size, init_method, mode):
    dist = harness.init(rank, world_size, init_method, timeout_s=TIMEOUT_S)
    import torch

    t = torch.ones(1 << 18)
    dist.all_reduce(t)  # #0: everyone is there
    store = dist.distributed_c10d._get_default_store()
    if mode == "dead" and rank == world_size - 1:
        os._exit(3)  # no goodbye: the peers find the process gone
    started = time.monotonic()
    try:
        if mode == "mismatch" and rank == 1:
            dist.broadcast(t, 0)
        elif mode == "absent" and rank == 1:
            # Comes only after rank 0 has given up (the store has no timeout
            # that short): rank 0 must fail by its own timeout.
            store.wait(["rank0_gave_up"])
            return None
        else:
            dist.all_reduce(t)
        outcome = ("returned", "")
    except RuntimeError as e:
        outcome = (type(e).__name__, str(e))
    if mode == "absent" and rank == 0:
        store.set("rank0_gave_up", "1")
    return outcome + (time.monotonic() - started,)


def bad_arguments(rank, world_size, init_method):
    dist = harness.init(rank, world_size, init_method, timeout_s=TIMEOUT_S)
    import torch

    calls = {
        "int16": lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
        "complex PRODUCT": lambda: dist.all_reduce(torch.ones(4, dtype=torch.complex64),
                                                   op=dist.ReduceOp.PRODUCT),
        "sparse": lambda: dist.all_reduce(torch.eye(3).to_sparse()),
        "AVG of int64": lambda: dist.all_reduce(torch.ones(4, dtype=torch.int64),
                                                op=dist.ReduceOp.AVG),
        "BAND of float": lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND),
        "reduce_scatter_tensor sizes": lambda: dist.reduce_scatter_tensor(torch.zeros(3),
                                                                          torch.zeros(5)),
        "all_gather_into_tensor sizes": lambda: dist.all_gather_into_tensor(torch.zeros(5),
                                                                            torch.zeros(2)),
        "all_to_all_single splits": lambda: dist.all_to_all_single(
            torch.zeros(4), torch.zeros(4), [1, 1], [3, 3]),
        "premul_sum": lambda: dist.all_reduce(
            torch.ones(4), op=dist._make_nccl_premul_sum(2.0)),
    }
    seen = {}
    for name, call in calls.items():
        try:
            call()
            seen[name] = "no error"
        except (RuntimeError, ValueError) as e:
            seen[name] = str(e)
    # The group still works afterwards.
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    seen["after"] = t.tolist()
    dist.destroy_process_group()
    return seen


class ErrorsTest(unittest.TestCase):
    maxDiff = None

    def run_mode(self, mode, world_size, trace_dir=None, expect_exit=None):
        env = {"DDPX_TRACE_DIR": trace_dir} if trace_dir else {}
        return harness.run_ranks(failing_op, world_size, args=(mode,), env=env,
                                 expect_exit=expect_exit, timeout=TIMEOUT_S + 150)

    def assert_raised_within_timeout(self, outcome, words):
        kind, message, seconds = outcome
        self.assertEqual(kind, "DistBackendError", message)
        self.assertLess(seconds, TIMEOUT_S + 10, message)
        for word in words:
            self.assertIn(word, message)

    def test_dead_peer_raises_in_every_live_rank_and_dumps_for_trace_analyze(self):
        trace_dir = os.path.join(harness.scratch_dir(), "dead_trace")
        os.makedirs(trace_dir, exist_ok=True)
        outcomes = self.run_mode("dead", 3, trace_dir, expect_exit=[2])
        for outcome in outcomes[:2]:
            # allreduce #1 (the second op), rank 2 named as gone.
            self.assert_raised_within_timeout(outcome, ["allreduce #1", "rank 2", "exited"])
        for rank in (0, 1):
            self.assertTrue(os.path.exists(os.path.join(trace_dir, f"rank{rank}.jsonl")))
        analyze = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                               "trace_analyze")
        result = subprocess.run([sys.executable, analyze, trace_dir, "--no-png"],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        verdict = result.stdout.strip().splitlines()[-1]
        self.assertTrue(verdict.startswith("VERDICT kind=dead"), result.stdout)
        self.assertIn("ranks=2", verdict)
        self.assertIn("seq=1", verdict)

    def test_mismatched_ops_raise_in_both_ranks(self):
        outcomes = self.run_mode("mismatch", 2)
        self.assert_raised_within_timeout(outcomes[0], ["allreduce #1", "rank 1", "broadcast"])
        self.assert_raised_within_timeout(outcomes[1], ["broadcast #1", "rank 0", "allreduce"])

    def test_absent_peer_times_out_naming_it(self):
        outcome = self.run_mode("absent", 2)[0]
        kind, message, seconds = outcome
        self.assert_raised_within_timeout(outcome, ["allreduce #1", "rank 1", "timed out"])
        self.assertGreater(seconds, TIMEOUT_S * 0.9, message)

    def test_bad_arguments_raise_naming_the_op(self):
        for rank, seen in enumerate(harness.run_ranks(bad_arguments, 2)):
            print(rank, seen)
            self.assertEqual(seen.pop("after"), [1.0] * 3)
            expected_words = {
                "int16": ["all_reduce", "Short"],
                "complex PRODUCT": ["PRODUCT"],
                "sparse": [],
                "AVG of int64": ["all_reduce", "AVG", "Long"],
                "BAND of float": ["all_reduce", "BAND"],
                "reduce_scatter_tensor sizes": ["reduce_scatter"],
                "all_gather_into_tensor sizes": ["allgather"],
                "all_to_all_single splits": ["alltoall"],
                "premul_sum": ["PREMUL_SUM"],
            }
            for name, words in expected_words.items():
                self.assertNotEqual(seen[name], "no error", f"rank {rank}: {name}")
                for word in words:
                    self.assertIn(word, seen[name], f"rank {rank}: {name}")


if __name__ == "__main__":
    unittest.main()

"""async_op=True on ddpx: the Work and its future follow torch's contract."""

import unittest
from datetime import timedelta

import harness


def lifecycle(rank, world_size, init_method):
    dist = harness.init(rank, world_size, init_method)
    import torch

    store = dist.distributed_c10d._get_default_store()
    seen = {}
    t = torch.full((1 << 16,), float(rank + 1))
    if rank == 0:
        # Rank 1 joins only once rank 0 has looked: the op cannot be done yet.
        work = dist.all_reduce(t, async_op=True)
        seen["completed before the peer joined"] = work.is_completed()
        store.set("rank0_looked", "1")
        seen["wait"] = work.wait()
    else:
        store.wait(["rank0_looked"], timedelta(seconds=60))
        work = dist.all_reduce(t, async_op=True)
        seen["wait"] = work.wait()
    seen["completed"] = work.is_completed()
    seen["success"] = work.is_success()
    seen["exception"] = work.exception()
    future = work.get_future()
    seen["future done"] = future.done()
    seen["future value is the tensor"] = future.value()[0].data_ptr() == t.data_ptr()
    seen["result is the tensor"] = work.result()[0].data_ptr() == t.data_ptr()
    seen["sum"] = t[:4].tolist()

    # A chain on the future runs once the op is done, with its output.
    x = torch.full((5,), float(rank))
    chained = dist.all_reduce(x, async_op=True).get_future().then(lambda f: f.value()[0] * 10)
    seen["then"] = chained.wait().tolist()

    # Many ops in flight at once complete in order, each with its own data.
    tensors = [torch.full((1000 * (i + 1),), float(i + rank)) for i in range(8)]
    works = [dist.all_reduce(tensor, async_op=True) for tensor in tensors]
    for w in works:
        w.wait()
    seen["in flight"] = [tensor[0].item() for tensor in tensors]
    seen["all completed"] = all(w.is_completed() for w in works)

    # A rank that waits on an async op it later lets go of: no crash.
    dropped = dist.broadcast(torch.zeros(10), 0, async_op=True)
    del dropped
    dist.barrier()
    seen["sequence number"] = dist.distributed_c10d._get_default_group()._get_sequence_number_for_group()
    dist.destroy_process_group()
    return seen


def failure(rank, world_size, init_method):
    """An op on a group of 3 s whose peer never comes: wait() raises, and the
    Work and its future say so afterwards."""
    dist = harness.init(rank, world_size, init_method)
    import time

    import torch

    store = dist.distributed_c10d._get_default_store()
    short = dist.new_group([0, 1], timeout=timedelta(seconds=3))
    seen = {}
    if rank == 0:
        work = dist.all_reduce(torch.ones(8), group=short, async_op=True)
        started = time.monotonic()
        try:
            work.wait()
            seen["wait"] = "returned"
        except RuntimeError as e:
            seen["wait"] = str(e)
        seen["seconds"] = time.monotonic() - started
        seen["completed"] = work.is_completed()
        seen["success"] = work.is_success()
        seen["exception"] = str(work.exception())
        try:
            work.get_future().wait()
            seen["future"] = "no error"
        except RuntimeError as e:
            seen["future"] = str(e)
        store.set("rank0_done", "1")
    else:
        store.wait(["rank0_done"], timedelta(seconds=120))
    return seen


def nested_in_callback(rank, world_size, init_method):
    """A future callback that issues another collective on the same group
    and waits for it, as torch's powerSGD_hook does, nested twice: each must
    finish, with the right sums. One chain at a time: callbacks of ops in
    flight together run in no set order, so their nested ops could pair up
    differently on each rank (with Gloo too)."""
    dist = harness.init(rank, world_size, init_method)
    import torch

    def allreduce_and_wait(t):
        return dist.all_reduce(t, async_op=True).get_future().wait()[0]

    def second(fut):
        return allreduce_and_wait(fut.value()[0] + 1)

    def third(fut):
        return allreduce_and_wait(fut.value() * 2)

    seen = {"chains": []}
    for i in range(4):
        t = torch.full((1000 * (i + 1),), float(i + rank))
        chain = dist.all_reduce(t, async_op=True).get_future().then(second).then(third)
        seen["chains"].append(chain.wait()[0].item())
    # A plain op after the chains: the group is free again.
    x = torch.ones(3)
    dist.all_reduce(x)
    seen["after"] = x.tolist()
    dist.destroy_process_group()
    return seen


class WorkTest(unittest.TestCase):
    maxDiff = None

    def test_async_work_follows_torch(self):
        for rank, seen in enumerate(harness.run_ranks(lifecycle, 2)):
            if rank == 0:
                self.assertFalse(seen["completed before the peer joined"])
            self.assertTrue(seen["wait"])
            self.assertTrue(seen["completed"])
            self.assertTrue(seen["success"])
            self.assertIsNone(seen["exception"])
            self.assertTrue(seen["future done"])
            self.assertTrue(seen["future value is the tensor"])
            self.assertTrue(seen["result is the tensor"])
            self.assertEqual(seen["sum"], [3.0] * 4)
            self.assertEqual(seen["then"], [10.0] * 5)
            self.assertEqual(seen["in flight"], [2.0 * i + 1 for i in range(8)])
            self.assertTrue(seen["all completed"])
            self.assertGreaterEqual(seen["sequence number"], 12)

    def test_future_callback_may_wait_on_another_collective(self):
        for seen in harness.run_ranks(nested_in_callback, 2):
            # Sums on 2 ranks: 2i + 1, then 2 (2i + 2), then 2 (2 (4i + 4)).
            self.assertEqual(seen["chains"], [4.0 * (2 * (2 * i + 1) + 2) for i in range(4)])
            self.assertEqual(seen["after"], [2.0] * 3)

    def test_failed_work_raises_and_keeps_its_exception(self):
        seen = harness.run_ranks(failure, 2)[0]
        self.assertIn("ddpx", seen["wait"])
        self.assertIn("allreduce", seen["wait"])
        self.assertIn("rank 1", seen["wait"])
        # The group's 3 s, not the default group's minute (generous bounds).
        self.assertGreaterEqual(seen["seconds"], 2.5)
        self.assertLess(seen["seconds"], 40)
        self.assertTrue(seen["completed"])
        self.assertFalse(seen["success"])
        self.assertIn("allreduce", seen["exception"])
        self.assertIn("allreduce", seen["future"])


if __name__ == "__main__":
    unittest.main()

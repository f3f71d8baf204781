"""Real ranks for the ddpx_torch tests: one process per rank, started by
multiprocessing's "forkserver", meeting through a FileStore file of their
own. The server is a fresh process that imports torch and ddpx_torch once
and forks each rank from there: a rank starts as clean as a spawned one (no
state of the test's own process, no threads), without importing torch again
(seconds per rank on two cores).

    results = run_ranks(body, world_size=3, args=(...,), timeout=120)

body(rank, world_size, init_method, *args) runs in every rank; its return
value comes back in results[rank]. An exception in any rank, a rank that
exits without answering, or the deadline passing fails with every rank's
story (traceback, exit code), and the ranks still running are killed.
"""

import multiprocessing
import os
import queue
import sys
import tempfile
import time
import traceback
from datetime import timedelta

# Generous on a shared 2-core machine: a rank that imports torch takes seconds.
DEFAULT_TIMEOUT = 240


# Started once per test process, on first use; every rank is forked from it.
_RANKS = multiprocessing.get_context("forkserver")
_RANKS.set_forkserver_preload(["torch", "torch.distributed", "ddpx_torch"])


def _rank_main(body, rank, world_size, init_method, args, results, env):
    # The server's environment is the test's at the server's start: what
    # this run adds is set here, before the body makes its group.
    os.environ.update(env)
    try:
        value = body(rank, world_size, init_method, *args)
        results.put((rank, True, value))
    except BaseException:  # noqa: BLE001  (everything goes back to the parent)
        results.put((rank, False, traceback.format_exc()))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def scratch_dir():
    return os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()


def new_init_method():
    fd, path = tempfile.mkstemp(prefix="filestore_", dir=scratch_dir())
    os.close(fd)
    os.unlink(path)  # FileStore creates it
    return "file://" + path


def run_ranks(body, world_size, args=(), timeout=DEFAULT_TIMEOUT, env=None,
              expect_exit=None):
    """Runs body on world_size ranks; returns their values by rank.

    expect_exit: ranks allowed to end without answering (a test that kills
    one), mapped to None in the results.
    """
    results = _RANKS.Queue()
    init_method = new_init_method()
    procs = [_RANKS.Process(target=_rank_main,
                            args=(body, r, world_size, init_method, args, results, env or {}))
             for r in range(world_size)]
    for p in procs:
        p.start()
    expect_exit = set(expect_exit or ())
    needed = set(range(world_size)) - expect_exit
    answers = {}
    deadline = time.monotonic() + timeout
    try:
        while not needed <= answers.keys():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                rank, ok, value = results.get(timeout=min(left, 1.0))
                answers[rank] = (ok, value)
                continue
            except queue.Empty:
                pass
            dead = [r for r in needed if r not in answers and procs[r].exitcode is not None]
            if dead:
                try:  # what they put just before exiting
                    while True:
                        rank, ok, value = results.get(timeout=1.0)
                        answers[rank] = (ok, value)
                except queue.Empty:
                    pass
                if any(r not in answers for r in dead):
                    break
    finally:
        # Ranks that answered get time to shut down (destroy their groups,
        # exit the interpreter): a crash there fails the test too.
        grace = time.monotonic() + 60
        for r, p in enumerate(procs):
            if r in answers and answers[r][0]:
                p.join(max(0.0, grace - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(10)
    story = []
    for r, p in enumerate(procs):
        if r in answers:
            ok, value = answers[r]
            if not ok:
                story.append(f"rank {r} raised:\n{value}")
            elif p.exitcode != 0:
                story.append(f"rank {r} answered, then exited with code {p.exitcode}")
        elif r not in expect_exit:
            story.append(f"rank {r}: no answer (exit code {p.exitcode}; "
                         f"{'killed at the deadline' if p.exitcode == -9 else 'ended'})")
    if story:
        raise AssertionError(f"{world_size} ranks, timeout {timeout}s:\n" + "\n".join(story))
    return [answers[r][1] if r in answers else None for r in range(world_size)]


def init(rank, world_size, init_method, backend="ddpx", timeout_s=60):
    """init_process_group for a test rank (ddpx_torch imported first, so the
    backend is registered without the wheel's entry point)."""
    import ddpx_torch  # noqa: F401
    import torch.distributed as dist

    dist.init_process_group(backend, init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=timeout_s))
    return dist

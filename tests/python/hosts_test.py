"""Hosts found per group through the store, never from LOCAL_WORLD_SIZE:
ranks are put on virtual hosts (a UTS namespace with a hostname of its own
and an IPC namespace per host, as tools/virtual_cluster's hosts have: a
holder process makes them, its ranks join them with setns), and each
group's ddpx backend must see the hosts its own ranks are on, choose shared
memory only inside one host, the two-level allreduce across hosts of equal
size, and still agree with torch's gloo op by op.

Needs unshare(2) of UTS and IPC namespaces (root, or CAP_SYS_ADMIN); where
it is refused, the test says so and skips.
"""

import ctypes
import os
import socket
import subprocess
import unittest

import harness

CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000


def make_host(name):
    """A process holding a new UTS (hostname `name`) and IPC namespace."""
    holder = subprocess.Popen(
        ["unshare", "--uts", "--ipc", "--", "sh", "-c", f"hostname {name} && echo ready && exec cat"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if holder.stdout.readline().strip() != "ready":
        holder.wait(30)
        return None
    return holder


def join_host(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    for ns in ("uts", "ipc"):
        fd = os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, 0) != 0:
                raise OSError(ctypes.get_errno(), f"setns({ns} of pid {pid})")
        finally:
            os.close(fd)


def namespaces_available():
    holder = make_host("ddpx-probe")
    if holder is None:
        return False
    holder.stdin.close()
    holder.stdout.close()
    holder.wait(30)
    return True


def body(rank, world_size, init_method, hosts, holder_pids):
    join_host(holder_pids[hosts[rank]])
    assert socket.gethostname() == f"vhost{hosts[rank]}"
    # A launcher's hint that would be wrong for every group here: ignored.
    os.environ["LOCAL_WORLD_SIZE"] = "1"
    os.environ["LOCAL_RANK"] = "0"
    dist = harness.init(rank, world_size, init_method)
    import ddpx_torch
    import parity_cases

    import torch

    report = {"world info": ddpx_torch.group_info()}
    gloo = dist.new_group(backend="gloo")
    report["world"] = parity_cases.run_all(dist.group.WORLD, gloo)
    # Large enough for the two-level allreduce (where the hosts allow it).
    big = parity_cases.values(torch.float32, 1 << 19, rank)
    want = big.clone()
    dist.all_reduce(big)
    dist.all_reduce(want, group=gloo)
    report["2 MiB allreduce"] = torch.allclose(big, want, rtol=1e-5, atol=1e-5)
    # Ranks 0 and 1 share host 0: their group runs on shared memory.
    pair = dist.new_group([0, 1])
    pair_gloo = dist.new_group([0, 1], backend="gloo")
    if rank in (0, 1):
        report["pair info"] = ddpx_torch.group_info(pair)
        report["pair"] = parity_cases.run_all(pair, pair_gloo)
    dist.destroy_process_group()
    return report


@unittest.skipUnless(namespaces_available(),
                     "SKIPPED LOUDLY: unshare of UTS+IPC namespaces is not allowed here, so "
                     "ranks cannot be put on virtual hosts")
class HostsTest(unittest.TestCase):
    maxDiff = None

    def check(self, hosts, two_level):
        holders = [make_host(f"vhost{h}") for h in range(max(hosts) + 1)]
        try:
            reports = harness.run_ranks(body, len(hosts),
                                        args=(hosts, [holder.pid for holder in holders]))
        finally:
            for holder in holders:
                holder.stdin.close()
                holder.stdout.close()
                holder.wait(30)
        by_host = {}
        for rank, h in enumerate(hosts):
            by_host.setdefault(h, []).append(rank)
        for rank, report in enumerate(reports):
            self.assertEqual(report["world"][0], [], f"rank {rank}")
            self.assertTrue(report["2 MiB allreduce"], f"rank {rank}")
            info = report["world info"]
            self.assertEqual(info["host_count"], len(by_host), info)
            self.assertEqual(info["ranks_by_host"], [by_host[h] for h in sorted(by_host)], info)
            self.assertFalse(info["shared_memory"], info)
            self.assertEqual(info["two_level_allreduce"], two_level, info)
            if rank in (0, 1):
                pair = report["pair info"]
                self.assertEqual(pair["host_count"], 1, pair)
                self.assertTrue(pair["shared_memory"], pair)
                self.assertEqual(report["pair"][0], [], f"rank {rank}, group [0, 1]")

    def test_two_hosts_of_two_ranks(self):
        self.check([0, 0, 1, 1], two_level=True)

    def test_uneven_hosts(self):
        # Two ranks on one host, one on another: one rank per host is not
        # what LOCAL_WORLD_SIZE says, and no two-level layout fits.
        self.check([0, 0, 1], two_level=False)


if __name__ == "__main__":
    unittest.main()

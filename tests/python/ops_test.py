"""ddpx against torch's gloo, op by op (parity_cases.py), on N ranks
(argv[1]) in one job: the whole group, then subgroups (new_group of a
subset, both backends), so host discovery and rank translation per group
are exercised as well."""

import sys
import unittest

import harness


def body(rank, world_size, init_method):
    dist = harness.init(rank, world_size, init_method)
    import ddpx_torch
    import parity_cases

    report = {}
    gloo_world = dist.new_group(backend="gloo")
    report["world"] = parity_cases.run_all(dist.group.WORLD, gloo_world)
    info = ddpx_torch.group_info()
    # Every rank is on this host: the group runs on shared memory.
    report["world shared memory"] = info.get("shared_memory"), info.get("host_count")
    subsets = {2: [[1]], 3: [[0, 2]], 4: [[1, 2, 3], [0, 3]]}[world_size]
    for subset in subsets:
        ddpx_sub = dist.new_group(subset)  # the default backend: ddpx
        gloo_sub = dist.new_group(subset, backend="gloo")
        if rank in subset:
            sub_info = ddpx_torch.group_info(ddpx_sub)
            report[f"group {subset} info"] = (sub_info["size"], sub_info["rank"])
            report[f"group {subset}"] = parity_cases.run_all(ddpx_sub, gloo_sub)
    dist.destroy_process_group()
    return report


class OpsTest(unittest.TestCase):
    maxDiff = None
    world_size = 2

    def test_every_op_dtype_and_reduce_op_matches_gloo(self):
        reports = harness.run_ranks(body, self.world_size)
        for rank, report in enumerate(reports):
            mismatches, count = report["world"]
            self.assertEqual(mismatches, [], f"rank {rank}, whole group")
            self.assertGreater(count, 300, "too few comparisons ran")
            self.assertEqual(report["world shared memory"], (True, 1), f"rank {rank}")
            for key, value in report.items():
                if key.startswith("group ") and not key.endswith("info"):
                    self.assertEqual(value[0], [], f"rank {rank}, {key}")
                    self.assertGreater(value[1], 100, f"rank {rank}, {key}")
        for subset in {2: [[1]], 3: [[0, 2]], 4: [[1, 2, 3], [0, 3]]}[self.world_size]:
            for group_rank, rank in enumerate(subset):
                self.assertEqual(reports[rank][f"group {subset} info"], (len(subset), group_rank))


if __name__ == "__main__":
    OpsTest.world_size = int(sys.argv.pop(1))
    unittest.main()

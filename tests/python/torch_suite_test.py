"""torch's own distributed test cases against the "ddpx" backend:
torch.testing._internal.distributed.distributed_test.DistributedTest.
_DistTestBase, the suite torch runs for Gloo (test/distributed/
test_distributed_spawn.py), with BACKEND=ddpx, 2 ranks forked per test
case, a file:// rendezvous. Needs `pip install expecttest` (tools/setup).

bazel test runs SELECTED: torch's checks of the CPU collectives,
point-to-point ops, objects and DDP. docs/python.md lists the results of
the wider run (DDPX_TORCH_SUITE=all: SELECTED and MORE) with the reason for
each case that does not pass.

    python3 tests/python/torch_suite_test.py             # SELECTED
    DDPX_TORCH_SUITE=all python3 tests/python/torch_suite_test.py -v
"""
import os
import sys

import torch.multiprocessing

os.environ.setdefault("BACKEND", "ddpx")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "OFF")

import ddp_common  # noqa: E402,F401  (puts the built ddpx_torch on sys.path under Bazel)
import ddpx_torch  # noqa: E402,F401  (registers "ddpx"; the forked ranks inherit it)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402

# The feature sets torch's cases consult for third-party backends, read when
# distributed_test decorates its cases: ddpx runs DDP, subgroups and the
# collectives torch files under "gpu" (every one of them on CPU tensors);
# "plugin" marks it a registered third-party backend.
for _feature in ("plugin", "ddp", "subgroup", "gpu"):
    DistTestCases.backend_feature[_feature].add("ddpx")
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

# Run by bazel test; all pass (docs/python.md, "torch's own test cases").
SELECTED = [
    "test_get_rank", "test_get_backend", "test_get_rank_size_full_group",
    "test_destroy_full_group", "test_barrier", "test_barrier_full_group",
    "test_broadcast", "test_broadcast_full_group",
    "test_reduce_sum", "test_reduce_product", "test_reduce_min", "test_reduce_max",
    "test_reduce_full_group_product", "test_reduce_sum_twice",
    "test_all_reduce_sum", "test_all_reduce_sum_async", "test_all_reduce_product",
    "test_all_reduce_min", "test_all_reduce_max", "test_all_reduce_full_group_max",
    "test_all_reduce_sum_complex", "test_all_reduce_complex_unsupported_ops",
    "test_scatter", "test_scatter_checks", "test_scatter_complex",
    "test_gather", "test_gather_checks", "test_all_gather", "test_all_gather_complex",
    "test_all_gather_coalesced_simple", "test_all_gather_coalesced_with_empty",
    "test_send_recv", "test_send_recv_any_source", "test_send_recv_with_tag", "test_isend",
    "test_irecv", "test_all_gather_object_default_pg", "test_DistributedDataParallelCPU",
    "test_DistributedDataParallelCPU_grad_is_view", "test_static_graph_api_cpu",
]

# With DDPX_TORCH_SUITE=all as well: the one case that fails on ddpx, and
# cases torch skips for any backend but Gloo/MPI or without GPUs
# (docs/python.md gives each one's result and reason).
MORE = [
    "test_ddp_logging_data_cpu",
    "test_all_reduce_coalesced_sum", "test_all_to_all_single_unequal_split", "test_all_to_all",
    "test_get_future", "test_scatter_object_list", "test_broadcast_object_list",
    "test_gather_object", "test_monitored_barrier_gloo", "test_barrier_timeout_global",
    "test_sparse_all_reduce_sum", "test_batch_isend_irecv_gloo", "test_new_subgroups",
    "test_ddp_hook_parity_allreduce", "test_ddp_sync_module_states", "test_average_parameters",
]


class TestDdpxBackend(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Forked, not spawned (torch's own test_distributed_fork.py ran this
        # suite so): each rank inherits the imported torch and ddpx_torch
        # instead of importing them again (~5 s per rank on two cores), and
        # the environment the suite sets per case (TEMP_DIR), which a
        # forkserver started once would not see. Nothing in this process
        # has made a process group or a ddpx thread before the fork.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)


def load_tests(loader, standard_tests, pattern):
    del standard_tests, pattern
    import unittest
    names = SELECTED + (MORE if os.environ.get("DDPX_TORCH_SUITE") == "all" else [])
    suite = unittest.TestSuite()
    for name in names:
        suite.addTest(TestDdpxBackend(name))
    return suite


if __name__ == "__main__":
    sys.exit(run_tests())

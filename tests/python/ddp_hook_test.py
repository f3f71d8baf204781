"""ddpx's own hooks on torch's DDP (ddpx_torch.register_comm_hook) train
exactly as the same hook does in ddpx's C++ DDP for libtorch modules
(reducer/torch), which //tests/python:ddp_hook_reference runs on the same
MLP 784-64-10, weights, Fashion-MNIST batches and SGD: fp16, int8 and
PowerSGD (rank 2 from step 10, so its error feedback and warm start carry
across steps), 2 ranks, 150 steps after a first step with zero loss
(ddp_common.train's zero_first_step: both DDPs then hold the bucket in the
same order). Also: each hook changes the result
against DDP's default allreduce (so it really ran), PowerSGD's state counts
the steps it saw, and a bad spec or a non-ddpx group is refused naming it.

    python3 tests/python/ddp_hook_test.py   (finds the reference binary in
    Bazel's runfiles, or at $DDP_HOOK_REFERENCE)
"""
import os
import subprocess
import tempfile
import unittest

import numpy
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_common

STEPS = int(os.environ.get("DDPX_HOOK_STEPS", "150"))
WORLD = 2
BATCH = 32
HIDDEN = 64
SPECS = ["fp16", "int8", "powersgd:rank=2,start_iter=10"]


def reference_binary():
    # Under bazel test the binary is in the runfiles (a data dependency).
    root = (os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "ddpx"))
            if "TEST_SRCDIR" in os.environ else ddp_common.ROOT)
    path = os.environ.get("DDP_HOOK_REFERENCE") or os.path.join(
        root, "tests", "python", "ddp_hook_reference")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is missing: bazel build //tests/python:ddp_hook_reference "
                           "or set DDP_HOOK_REFERENCE")
    return path


def train_hooks(rank, world):
    import ddpx_torch
    out = {}
    for spec in ["allreduce"] + SPECS:
        model = DDP(ddp_common.make_model((HIDDEN,)))
        handle = None if spec == "allreduce" else ddpx_torch.register_comm_hook(model, spec)
        losses, params = ddp_common.train(model, rank, STEPS, world, BATCH, zero_first_step=True)
        out[spec] = (losses, params, handle.state_iteration() if handle else None,
                     handle.name if handle else None)
    errors = {}
    model = DDP(ddp_common.make_model((HIDDEN,)))
    try:
        ddpx_torch.register_comm_hook(model, "int9")
    except ValueError as e:
        errors["bad_spec"] = str(e)
    gloo = dist.new_group(backend="gloo")
    try:
        ddpx_torch.register_comm_hook(DDP(ddp_common.make_model((HIDDEN,)), process_group=gloo),
                                      "fp16")
    except ValueError as e:
        errors["gloo_group"] = str(e)
    out["errors"] = errors
    return out


class DDPHookTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.python = ddp_common.run_ranks(WORLD, "ddpx", train_hooks)
        cls.tmp = tempfile.TemporaryDirectory(prefix="ddp_hook_ref_")
        d = cls.tmp.name
        ddp_common.flat_parameters(ddp_common.make_model((HIDDEN,))).numpy().tofile(
            os.path.join(d, "init.f32"))
        x, y = ddp_common.batches(STEPS, WORLD, BATCH)
        x.numpy().tofile(os.path.join(d, "x.f32"))
        y.numpy().tofile(os.path.join(d, "y.i64"))
        cls.reference = {}
        for spec in SPECS:
            subprocess.run([reference_binary(), f"--dir={d}", f"--hook={spec}",
                            f"--world={WORLD}", f"--steps={STEPS}", f"--batch={BATCH}",
                            f"--hidden={HIDDEN}"], check=True, timeout=600)
            finals = [torch.from_numpy(numpy.fromfile(
                os.path.join(d, f"final_rank{r}.f32"), dtype="float32")) for r in range(WORLD)]
            with open(os.path.join(d, "losses_rank0.txt")) as f:
                losses = [float(line) for line in f]
            cls.reference[spec] = (losses, finals)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_spec(self, spec):
        ref_losses, ref_finals = self.reference[spec]
        self.assertEqual(len(ref_losses), STEPS)
        for rank in range(WORLD):
            losses, params, _, _ = self.python[rank][spec]
            ddp_common.assert_close_parameters(
                self, params, ref_finals[rank],
                f"{spec}, rank {rank}: torch DDP + ddpx hook vs ddpx's C++ DDP",
                rtol=1e-5, atol=1e-6)
        for step, (a, b) in enumerate(zip(self.python[0][spec][0], ref_losses)):
            self.assertAlmostEqual(a, b, delta=1e-5 * (1 + abs(b)), msg=f"{spec}: loss at step {step}")
        # The hook ran: its quantization/compression moved the result away
        # from the plain allreduce's.
        plain = self.python[0]["allreduce"][1]
        self.assertGreater((self.python[0][spec][1] - plain).abs().max().item(), 1e-6,
                           f"{spec}: same parameters as without a hook")
        self.assertLess(sum(ref_losses[-20:]) / 20, 0.8 * sum(ref_losses[:20]) / 20,
                        f"{spec}: training did not learn")

    def test_fp16(self):
        self.check_spec("fp16")

    def test_int8(self):
        self.check_spec("int8")

    def test_powersgd_state_across_steps(self):
        self.check_spec("powersgd:rank=2,start_iter=10")
        for rank in range(WORLD):
            _, _, iteration, name = self.python[rank]["powersgd:rank=2,start_iter=10"]
            self.assertEqual(iteration, STEPS + 1,  # and the zero first step
                             f"rank {rank}: PowerSGD state's iteration")
            self.assertIn("powersgd", name.lower())

    def test_errors_name_the_problem(self):
        for rank in range(WORLD):
            errors = self.python[rank]["errors"]
            self.assertIn("int9", errors.get("bad_spec", "no error raised"))
            self.assertIn("gloo", errors.get("gloo_group", "no error raised").lower())


if __name__ == "__main__":
    unittest.main()

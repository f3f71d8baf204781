"""FSDP2 (`torch.distributed.fsdp.fully_shard`) on CPU over the "ddpx"
backend trains as it does over Gloo: 2 ranks (real processes), the MLP of
ddp_common sharded per Linear layer and at the root, on a 1-D CPU
DeviceMesh, 30 SGD steps with momentum. FSDP2 gathers parameters with
all_gather_into_tensor and reduces gradients with reduce_scatter_tensor.
Variants: default; reshard_after_forward=False; MixedPrecisionPolicy with
bfloat16 parameters and bfloat16 gradient reduction; a hidden width (63)
that does not split evenly over the ranks. Each ends with Gloo's parameters
(full tensors) within float tolerance; the default variant also equals DDP
on ddpx. CPUOffloadPolicy is left out: torch 2.15 runs it only with CUDA,
on Gloo too (docs/python.md, FSDP).
"""
import unittest

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_common

STEPS = 30
WORLD = 2
BATCH = 32
VARIANTS = ["default", "no_reshard", "bf16", "uneven"]


def fsdp_kwargs(variant):
    from torch.distributed.fsdp import MixedPrecisionPolicy
    if variant == "no_reshard":
        return {"reshard_after_forward": False}
    if variant == "bf16":
        return {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                  reduce_dtype=torch.bfloat16)}
    return {}


def train_fsdp(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    out = {}
    for variant in VARIANTS:
        model = ddp_common.make_model((63,) if variant == "uneven" else (64,))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh, **fsdp_kwargs(variant))
        fully_shard(model, mesh=mesh, **fsdp_kwargs(variant))
        out[variant] = ddp_common.train(model, rank, STEPS, world, BATCH)
    out["ddp"] = ddp_common.train(DDP(ddp_common.make_model((64,))), rank, STEPS, world, BATCH)
    return out


class FSDPTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = {b: ddp_common.run_ranks(WORLD, b, train_fsdp) for b in ("gloo", "ddpx")}

    def check(self, variant, rtol=1e-4, atol=1e-5):
        gloo_losses, want = self.runs["gloo"][0][variant]
        self.assertLess(gloo_losses[-1], gloo_losses[0], f"{variant}: Gloo's run did not learn")
        for rank in range(WORLD):
            _, got = self.runs["ddpx"][rank][variant]
            ddp_common.assert_close_parameters(
                self, got, want, f"FSDP {variant}, rank {rank}: ddpx vs gloo", rtol=rtol, atol=atol)

    def test_default(self):
        self.check("default")
        ddp_common.assert_close_parameters(self, self.runs["ddpx"][0]["default"][1],
                                           self.runs["ddpx"][0]["ddp"][1],
                                           "FSDP vs DDP, both on ddpx")

    def test_no_reshard_after_forward(self):
        self.check("no_reshard")

    def test_bf16_mixed_precision(self):
        self.check("bf16", rtol=1e-2, atol=1e-3)

    def test_uneven_shards(self):
        self.check("uneven")


if __name__ == "__main__":
    unittest.main()

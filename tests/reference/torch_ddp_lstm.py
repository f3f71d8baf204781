#!/usr/bin/env python3
"""Trains a small LSTM language model with torch's own DistributedDataParallel
(gloo, 2 CPU processes, one thread each) and writes the final weights, for
tests/torch/torch_ddp_lstm_parity_test.cc, which runs this script and
repeats the training with ddpx::torch::DistributedDataParallel over libtorch.

    python3 tests/reference/torch_ddp_lstm.py --out DIR

The model has what trips a reducer up: the decoder uses the embedding's
weight (tied), a branch is used on odd steps only (no rank uses it on even
steps), a branch only rank 1 uses (rank 0's share of its average is zero),
and a layer no step uses. find_unused_parameters=True, SGD with momentum
and weight decay, 20 steps. Weights, tokens and targets come from formulas
the C++ test repeats. Run once per zero_grad mode: set_to_none (a globally
unused parameter's .grad stays None, so SGD skips it) and zeroed in place
(its zero .grad is left as it is, and SGD still applies weight decay and
momentum to it).

Files in DIR: lstm.txt (settings, then "param NAME SHAPE" per parameter in
named_parameters() order, which lists the tied weight once) and
lstm_<mode>.f32 per mode ("none", "zero"): rank 0's final parameters
flattened in that order, float32 little endian.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from deterministic_init import free_port, init_parameters

WORLD_SIZE = 2
VOCAB = 12
WIDTH = 6  # embedding and hidden size (equal, so the decoder can tie)
BATCH = 3
SEQ = 5
STEPS = 20
LR = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 0.01
MODES = ["none", "zero"]  # zero_grad(set_to_none=True), zero_grad(set_to_none=False)


class LstmLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, WIDTH)
        self.lstm = nn.LSTM(WIDTH, WIDTH, batch_first=True)
        self.odd = nn.Linear(WIDTH, WIDTH)       # odd steps only
        self.one_rank = nn.Linear(WIDTH, WIDTH)  # rank 1 only
        self.never = nn.Linear(WIDTH, WIDTH)     # never
        self.decoder = nn.Linear(WIDTH, VOCAB)
        self.decoder.weight = self.embedding.weight

    def forward(self, tokens, step, rank):
        h, _ = self.lstm(self.embedding(tokens))
        if step % 2 == 1:
            h = h + torch.tanh(self.odd(h))
        if rank == 1:
            h = h + torch.tanh(self.one_rank(h))
        return self.decoder(h)




def make_model():
    return init_parameters(LstmLm())


def batch(step, rank):
    tokens = [[(b * 5 + s * 3 + step * 7 + rank * 11) % VOCAB for s in range(SEQ)]
              for b in range(BATCH)]
    targets = [[(b * 3 + s * 5 + step * 2 + rank * 7 + 1) % VOCAB for s in range(SEQ)]
               for b in range(BATCH)]
    return torch.tensor(tokens, dtype=torch.int64), torch.tensor(targets, dtype=torch.int64)


def train(mode, rank):
    model = make_model()
    ddp = DDP(model, find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM,
                          weight_decay=WEIGHT_DECAY, foreach=False)
    for step in range(STEPS):
        opt.zero_grad(set_to_none=(mode == "none"))
        tokens, targets = batch(step, rank)
        logits = ddp(tokens, step, rank)
        F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1)).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def worker(rank, port, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=WORLD_SIZE)
    finals = {mode: train(mode, rank) for mode in MODES}
    dist.barrier()
    if rank == 0:
        lines = ["# torch %s, gloo, %d ranks, one thread each; written by "
                 "tests/reference/torch_ddp_lstm.py" % (torch.__version__, WORLD_SIZE)]
        for key, value in [("vocab", VOCAB), ("width", WIDTH), ("batch", BATCH), ("seq", SEQ),
                           ("steps", STEPS), ("lr", LR), ("momentum", MOMENTUM),
                           ("weight_decay", WEIGHT_DECAY)]:
            lines.append("%s %r" % (key, value))
        for name, p in make_model().named_parameters():
            lines.append("param %s %s" % (name, "x".join(map(str, p.shape))))
        for mode in MODES:
            with open(os.path.join(out_dir, "lstm_%s.f32" % mode), "wb") as f:
                f.write(finals[mode].numpy().astype("<f4").tobytes())
        with open(os.path.join(out_dir, "lstm.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.barrier()
    # Every collective is done: leave without torch's Gloo teardown, which
    # now and then aborts a rank ("terminate called without an active
    # exception") when the other rank leaves first.
    os._exit(0)




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # Gloo on loopback, whatever the host name resolves to (a test sandbox).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(free_port(), args.out), nprocs=WORLD_SIZE, join=True)
    print("wrote", args.out)


if __name__ == "__main__":
    main()

"""What the torch DDP reference scripts share with their C++ tests: every
parameter's initial value from a formula (tests/torch/torch_test_util.h's
init_value is the twin), and a free port for the gloo ranks."""
import math
import socket

import torch


def init_value(k, i, name, shape):
    """Element i of parameter k (named_parameters order)."""
    v = ((i * 37 + k * 11) % 29 - 14) / 14.0
    if len(shape) > 1:
        fan_in = math.prod(shape) // shape[0]
        return v / math.sqrt(fan_in)
    if name.endswith("weight"):
        return 1.0 + 0.1 * v
    return 0.1 * v


def init_parameters(model):
    """Sets every parameter of `model` to init_value; returns the model."""
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            vals = [init_value(k, i, name, tuple(p.shape)) for i in range(p.numel())]
            p.copy_(torch.tensor(vals, dtype=torch.float64).view(p.shape).float())
    return model


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

"""Shared by the tools/golden/make_*_golden.py scripts: deterministic inputs
from a closed-form formula, so that a script's output depends on PyTorch's
arithmetic alone (the files store the inputs too; the C++ tests read them)."""
import math

import torch


def wave(shape, a=1.0, f=0.37, p=0.0, off=0.0):
    """float32 of `shape`: element i is off + a sin(f i + p) + 0.3 cos(1.7 f i)."""
    n = math.prod(shape)
    return torch.tensor([off + a * math.sin(f * i + p) + 0.3 * math.cos(1.7 * f * i) for i in range(n)],
                        dtype=torch.float32).reshape(shape)


def leaf(t):
    """A copy of t that requires grad."""
    return t.clone().requires_grad_(True)

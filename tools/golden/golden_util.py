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


def record(g, case, fn, x0, w0=None, b0=None):
    """Runs fn(x, w, b) on leaf copies of the inputs (w, b may be None), backward
    with a wave upstream gradient, and stores into dict g "<case>.x", ".go",
    ".out", ".dx" and, for the inputs given, ".w"/".dw" and ".b"/".db"
    (tests/nn/golden_case.h reads them)."""
    x = leaf(x0)
    w = leaf(w0) if w0 is not None else None
    b = leaf(b0) if b0 is not None else None
    out = fn(x, w, b)
    go = wave(tuple(out.shape), 1.0, 0.29, 0.6)
    out.backward(go)
    fields = dict(x=x0, go=go, out=out, dx=x.grad)
    if w is not None:
        fields.update(w=w0, dw=w.grad)
    if b is not None:
        fields.update(b=b0, db=b.grad)
    for k, v in fields.items():
        g[f"{case}.{k}"] = v.detach().clone().contiguous()

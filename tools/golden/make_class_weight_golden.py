#!/usr/bin/env python3
"""Writes tests/nn/golden/class_weights_golden.safetensors: PyTorch's outputs
and input gradients for cross_entropy and nll_loss with per-class weights
(`weight=`), alone and with ignore_index, label smoothing, spatial dims and
unbatched input, which tests/nn/class_weights_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_class_weight_golden.py

Names are "<case>.<field>": ".x" float32 logits (log-probabilities for nll
cases), ".t" int64 targets, ".w" float32 class weights, ".go" the upstream
gradient (1 for a scalar result), ".out" the loss, ".dx" the gradient of x.
The arguments of each case are in build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import leaf, wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "class_weights_golden.safetensors")


def build():
    g = {}

    def run(case, fn, x0, t, w):
        x = leaf(x0)
        out = fn(x, t, w)
        go = torch.tensor(1.0) if out.dim() == 0 else wave(tuple(out.shape), 1.0, 0.29, 0.6)
        out.backward(go)
        for k, v in dict(x=x0, t=t, w=w, go=go, out=out, dx=x.grad).items():
            g[f"{case}.{k}"] = v.detach().clone().contiguous()

    x = wave((6, 5), 2.0, 0.43, 0.1)
    t = torch.tensor([2, 0, -100, 4, 1, 2])
    w = torch.tensor([0.5, 2.0, 1.0, 0.25, 3.0])
    run("ce_mean", lambda x, t, w: F.cross_entropy(x, t, weight=w), x, t, w)
    run("ce_sum", lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="sum"), x, t, w)
    run("ce_none", lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="none"), x, t, w)
    run("ce_ls_mean", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.2), x, t, w)
    run("ce_ls_none", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.3, reduction="none"), x, t,
        w)
    run("ce_ls_sum", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1, reduction="sum"), x, t, w)
    # (N, C, H, W) with a real class as ignore_index
    x4 = wave((2, 3, 2, 2), 1.5, 0.37, 0.5)
    t4 = torch.tensor([[[0, 1], [2, 2]], [[1, 0], [0, 2]]])
    w3 = torch.tensor([1.5, 0.2, 0.7])
    run("ce4d_mean", lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=1), x4, t4, w3)
    run("ce4d_ls_mean", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.25), x4, t4, w3)
    # unbatched (C) input, 0-dim target
    x1 = wave((5,), 1.0, 0.71, 0.2)
    t1 = torch.tensor(3)
    run("ce1d_mean", lambda x, t, w: F.cross_entropy(x, t, weight=w), x1, t1, w)
    # nll_loss on log-probabilities
    lp = torch.log_softmax(wave((6, 5), 1.8, 0.29, 0.7), 1)
    run("nll_mean", lambda x, t, w: F.nll_loss(x, t, weight=w), lp, t, w)
    run("nll_none", lambda x, t, w: F.nll_loss(x, t, weight=w, reduction="none"), lp, t, w)
    return g


def main():
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"producer": "make_class_weight_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)} with torch {torch.__version__}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes tests/nn/golden/losses_golden.safetensors: PyTorch's outputs and
gradients for the losses and functions of core/ops/losses_composed.cc
(l1_loss, smooth_l1_loss, huber_loss, kl_div, binary_cross_entropy,
cosine_similarity, normalize) and core/ops/piecewise.cc (softplus, elu), which
tests/nn/losses_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_losses_golden.py

All tensors are float32. Inputs come from closed-form formulas (`wave`) and are
stored in the file. Names are "<case>.<field>": inputs ".x", ".y" (target or
second input), ".w" (weight), ".go" (the upstream gradient, 1 for a scalar
result); outputs ".out"; gradients ".dx", ".dy". The cases' arguments are in
build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "losses_golden.safetensors")


def build():
    g = {}

    def run(case, fn, x0, y0=None, w0=None, grad_y=True):
        x = x0.clone().requires_grad_(True)
        y = None if y0 is None else y0.clone().requires_grad_(grad_y)
        out = fn(x, y, w0)
        go = torch.tensor(1.0) if out.dim() == 0 else wave(tuple(out.shape), 1.0, 0.29, 0.6)
        out.backward(go)
        fields = dict(x=x0, go=go, out=out, dx=x.grad)
        if y0 is not None:
            fields["y"] = y0
            if grad_y:
                fields["dy"] = y.grad
        if w0 is not None:
            fields["w"] = w0
        for k, v in fields.items():
            g[f"{case}.{k}"] = v.detach().clone().contiguous()

    a, b = wave((3, 5), 1.5, 0.41, 0.2), wave((3, 5), 1.2, 0.23, 1.1)
    run("l1_mean", lambda x, y, w: F.l1_loss(x, y), a, b)
    run("l1_none", lambda x, y, w: F.l1_loss(x, y, reduction="none"), a, b)
    run("sl1_b05_sum", lambda x, y, w: F.smooth_l1_loss(x, y, reduction="sum", beta=0.5), a, b)
    run("sl1_b0", lambda x, y, w: F.smooth_l1_loss(x, y, beta=0.0), a, b)
    run("huber_d07_none", lambda x, y, w: F.huber_loss(x, y, reduction="none", delta=0.7), a, b)
    run("huber_mean", lambda x, y, w: F.huber_loss(x, y), a, b)
    # kl_div: log-probabilities against probabilities (one exact 0) and log-probabilities
    logp = torch.log_softmax(wave((4, 6), 1.3, 0.53), 1)
    q = torch.softmax(wave((4, 6), 0.9, 0.31, 0.4), 1)
    q[1, 2] = 0.0
    # (no gradient for the target here: PyTorch's is NaN where the target is 0)
    run("kl_batchmean", lambda x, y, w: F.kl_div(x, y, reduction="batchmean"), logp, q, grad_y=False)
    run("kl_none", lambda x, y, w: F.kl_div(x, y, reduction="none"), logp, q, grad_y=False)
    logq = torch.log_softmax(wave((4, 6), 0.9, 0.31, 0.4), 1)
    run("kl_logt_sum", lambda x, y, w: F.kl_div(x, y, reduction="sum", log_target=True), logp, logq)
    # binary_cross_entropy on probabilities away from 0 and 1
    p = torch.sigmoid(wave((4, 5), 2.5, 0.61))
    t = (wave((4, 5), 0.5, 0.45, 0.3) + 0.5).clamp(0, 1)
    wt = wave((4, 5), 0.4, 0.8, 0.0, 1.0)
    run("bce_mean", lambda x, y, w: F.binary_cross_entropy(x, y), p, t)
    run("bce_w_none", lambda x, y, w: F.binary_cross_entropy(x, y, weight=w, reduction="none"), p, t, wt)
    # cosine_similarity and normalize
    u, v = wave((3, 4, 5), 1.0, 0.37), wave((3, 4, 5), 1.0, 0.19, 0.9)
    run("cos_dim1", lambda x, y, w: F.cosine_similarity(x, y, dim=1), u, v)
    run("cos_dimm1", lambda x, y, w: F.cosine_similarity(x, y, dim=-1), u, v)
    run("normalize_p2", lambda x, y, w: F.normalize(x, p=2.0, dim=1), u)
    run("normalize_p1", lambda x, y, w: F.normalize(x, p=1.0, dim=-1), u)
    # softplus past its threshold and elu on both sides of 0
    s = wave((4, 5), 6.0, 0.57)
    run("softplus", lambda x, y, w: F.softplus(x), s)
    run("softplus_b2_t5", lambda x, y, w: F.softplus(x, beta=2.0, threshold=5.0), s)
    run("elu", lambda x, y, w: F.elu(x, alpha=1.3), s)
    return g


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_losses_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

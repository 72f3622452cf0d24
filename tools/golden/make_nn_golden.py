#!/usr/bin/env python3
"""Writes tests/nn/golden/nn_ops_golden.safetensors: PyTorch's outputs and
gradients for the nn ops in core/nn_ops.h (batch_norm, layer_norm,
cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits,
scaled_dot_product_attention), which tests/nn/nn_ops_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft-venv/bin/python tools/golden/make_nn_golden.py

All tensors are float32 unless noted (targets are int64). Inputs are generated
from closed-form formulas (see `wave`) and stored in the file, so weft reads
them rather than recomputing them. Names are "<case>.<field>":
- inputs: "<case>.x", ".w", ".b", ".target", ".go" (the upstream gradient used
  for backward; losses with a scalar result use gradient 1), ...
- outputs: "<case>.out", gradients "<case>.dx", ".dw", ".db", ...
Cases are listed in build() below and mirrored in tests/nn/nn_ops_test.cc.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave, leaf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "nn_ops_golden.safetensors")


def build():
    g = {}

    def put(case, **tensors):
        for k, v in tensors.items():
            g[f"{case}.{k}"] = v.detach().clone().contiguous()

    # ---- batch_norm: training (running stats updated) for (N, C, L) and (N, C); eval
    for case, shape in (("bn_train3d", (4, 3, 5)), ("bn_train2d", (6, 3))):
        x0, w0, b0 = wave(shape, 1.5, 0.41, 0.2, 0.5), wave((3,), 0.5, 1.1, 0.3, 1.0), wave((3,), 0.4, 0.9, 1.0)
        rm0, rv0 = torch.tensor([0.1, -0.2, 0.3]), torch.tensor([1.0, 1.5, 0.7])
        go = wave(shape, 1.0, 0.23, 0.7)
        x, w, b = leaf(x0), leaf(w0), leaf(b0)
        rm, rv = rm0.clone(), rv0.clone()
        y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
        y.backward(go)
        put(case, x=x0, w=w0, b=b0, rm=rm0, rv=rv0, go=go, out=y, rm_after=rm, rv_after=rv, dx=x.grad,
            dw=w.grad, db=b.grad)
    x0, w0, b0 = wave((4, 3, 5), 1.5, 0.41, 0.2, 0.5), wave((3,), 0.5, 1.1, 0.3, 1.0), wave((3,), 0.4, 0.9, 1.0)
    rm0, rv0 = torch.tensor([0.1, -0.2, 0.3]), torch.tensor([1.0, 1.5, 0.7])
    go = wave((4, 3, 5), 1.0, 0.23, 0.7)
    x, w, b = leaf(x0), leaf(w0), leaf(b0)
    y = F.batch_norm(x, rm0.clone(), rv0.clone(), w, b, training=False, momentum=0.1, eps=1e-5)
    y.backward(go)
    put("bn_eval", x=x0, w=w0, b=b0, rm=rm0, rv=rv0, go=go, out=y, dx=x.grad, dw=w.grad, db=b.grad)

    # ---- layer_norm over the trailing (3, 4)
    x0, w0, b0 = wave((2, 3, 4), 2.0, 0.53, 0.1, 0.3), wave((3, 4), 0.5, 0.7, 0.0, 1.0), wave((3, 4), 0.3, 1.3)
    go = wave((2, 3, 4), 1.0, 0.31, 0.4)
    x, w, b = leaf(x0), leaf(w0), leaf(b0)
    y = F.layer_norm(x, (3, 4), w, b, eps=1e-5)
    y.backward(go)
    put("ln", x=x0, w=w0, b=b0, go=go, out=y, dx=x.grad, dw=w.grad, db=b.grad)

    # ---- cross_entropy (N, C) = (5, 4)
    logits0 = wave((5, 4), 2.0, 0.61, 0.5)
    tgt = torch.tensor([0, 3, 1, 2, 1], dtype=torch.int64)
    tgt_ign = torch.tensor([0, -100, 1, 2, -100], dtype=torch.int64)
    tgt_ign7 = torch.tensor([0, 7, 1, 7, 3], dtype=torch.int64)
    go_rows = wave((5,), 1.0, 0.9, 0.2)
    ce_cases = [
        ("ce_mean", tgt, "mean", -100, 0.0),
        ("ce_sum", tgt, "sum", -100, 0.0),
        ("ce_none", tgt, "none", -100, 0.0),
        ("ce_ignore", tgt_ign, "mean", -100, 0.0),
        ("ce_ignore7", tgt_ign7, "mean", 7, 0.0),
        ("ce_ls_mean", tgt_ign, "mean", -100, 0.1),
        ("ce_ls_sum", tgt_ign, "sum", -100, 0.1),
        ("ce_ls_none", tgt_ign, "none", -100, 0.25),
    ]
    for case, t, red, ign, ls in ce_cases:
        x = leaf(logits0)
        out = F.cross_entropy(x, t, reduction=red, ignore_index=ign, label_smoothing=ls)
        go = go_rows if red == "none" else torch.tensor(1.0)
        out.backward(go)
        put(case, x=logits0, target=t, go=go, out=out, dx=x.grad)
    # (N, C, d) = (2, 4, 3) with ignored positions and label smoothing
    logits_nd = wave((2, 4, 3), 1.7, 0.47, 0.9)
    tgt_nd = torch.tensor([[0, 3, -100], [2, 1, 1]], dtype=torch.int64)
    for case, red, ls in (("ce_nd_mean", "mean", 0.2), ("ce_nd_none", "none", 0.0)):
        x = leaf(logits_nd)
        out = F.cross_entropy(x, tgt_nd, reduction=red, label_smoothing=ls)
        go = wave((2, 3), 1.0, 0.8) if red == "none" else torch.tensor(1.0)
        out.backward(go)
        put(case, x=logits_nd, target=tgt_nd, go=go, out=out, dx=x.grad)

    # ---- nll_loss on log-probabilities
    lp0 = torch.log_softmax(logits0, 1)
    for case, t, red in (("nll_mean", tgt_ign, "mean"), ("nll_sum", tgt, "sum")):
        x = leaf(lp0)
        out = F.nll_loss(x, t, reduction=red)
        out.backward()
        put(case, x=lp0, target=t, out=out, dx=x.grad)

    # ---- mse_loss
    a0, b0 = wave((3, 4), 1.2, 0.5), wave((3, 4), 0.8, 0.3, 1.0)
    for red in ("mean", "sum", "none"):
        a, bb = leaf(a0), leaf(b0)
        out = F.mse_loss(a, bb, reduction=red)
        go = wave((3, 4), 1.0, 0.77) if red == "none" else torch.tensor(1.0)
        out.backward(go)
        put(f"mse_{red}", x=a0, y=b0, go=go, out=out, dx=a.grad, dy=bb.grad)

    # ---- binary_cross_entropy_with_logits (large logits exercise the stable formula)
    z0 = wave((3, 4), 6.0, 0.9, 0.1)
    y0 = (wave((3, 4), 0.5, 0.45, 0.3) + 0.5).clamp(0, 1)
    pw0 = torch.tensor([0.5, 1.0, 2.0, 3.5])
    for case, red, use_pw in (("bce_pw_mean", "mean", True), ("bce_sum", "sum", False), ("bce_pw_none", "none", True)):
        z, y = leaf(z0), leaf(y0)
        pw = pw0.clone() if use_pw else None  # PyTorch has no gradient w.r.t. pos_weight
        out = F.binary_cross_entropy_with_logits(z, y, reduction=red, pos_weight=pw)
        go = wave((3, 4), 1.0, 0.66) if red == "none" else torch.tensor(1.0)
        out.backward(go)
        fields = dict(x=z0, y=y0, go=go, out=out, dx=z.grad, dy=y.grad)
        if use_pw:
            fields.update(pw=pw0)
        put(case, **fields)

    # ---- scaled_dot_product_attention (B, H, T, D) = (2, 2, 5, 4)
    q0, k0, v0 = wave((2, 2, 5, 4), 1.0, 0.29), wave((2, 2, 5, 4), 1.0, 0.41, 0.5), wave((2, 2, 5, 4), 1.0, 0.17, 1.0)
    go = wave((2, 2, 5, 4), 1.0, 0.53, 0.2)
    for case, causal in (("sdpa_causal", True), ("sdpa_full", False)):
        q, k, v = leaf(q0), leaf(k0), leaf(v0)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=0.0)
        out.backward(go)
        put(case, q=q0, k=k0, v=v0, go=go, out=out, dq=q.grad, dk=k.grad, dv=v.grad)
    return g


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_nn_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

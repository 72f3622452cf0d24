#!/usr/bin/env python3
"""Writes tests/nn/golden/embedding_bag_golden.safetensors: PyTorch's outputs
and gradients for F.embedding with max_norm (the weight renormalised in
place) and scale_grad_by_freq, and for F.embedding_bag in its three modes,
with offsets (an empty bag among them, include_last_offset), with a 2-D
input, per_sample_weights and padding_idx, which
tests/nn/embedding_bag_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_embedding_bag_golden.py

The weights are float32 from closed-form formulas (golden_util.wave), the
indices and offsets int64, all stored in the file. Per case "<case>.idx",
".offsets" (where given), ".psw" (per_sample_weights, where given), ".w" (the
weight before the call), ".w_after" (after it: max_norm renormalises rows in
place), ".go" (the upstream gradient), ".out", ".dw" and ".dpsw". The cases'
arguments are in build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "embedding_bag_golden.safetensors")

IDX = torch.tensor([1, 3, 1, 0, 2, 5, 1, 4, 4, 3], dtype=torch.int64)
OFFSETS = torch.tensor([0, 3, 3, 7], dtype=torch.int64)  # bags of 3, 0 (empty), 4 and 3


def case(g, name, fn, w0, idx, offsets=None, psw0=None):
    """fn(idx, w, offsets, psw) -> out; stores the inputs, out, the weight after
    the call, and the gradients for a wave upstream gradient."""
    w = w0.clone().requires_grad_(True)
    psw = psw0.clone().requires_grad_(True) if psw0 is not None else None
    out = fn(idx, w, offsets, psw)
    go = wave(tuple(out.shape), 1.0, 0.29, 0.6)
    out.backward(go)
    fields = {"idx": idx, "w": w0, "w_after": w.detach(), "go": go, "out": out.detach(), "dw": w.grad}
    if offsets is not None:
        fields["offsets"] = offsets
    if psw is not None:
        fields.update(psw=psw0, dpsw=psw.grad)
    for k, v in fields.items():
        g[f"{name}.{k}"] = v.detach().clone().contiguous()


def build():
    g = {}
    w = wave((6, 4), 1.2, 0.47, 0.1)
    idx2d = torch.tensor([[1, 3, 1], [0, 2, 5], [4, 4, 3]], dtype=torch.int64)
    # ---- embedding: max_norm (2- and 1-norm, rows above and below it), scale_grad_by_freq
    case(g, "emb_max_norm", lambda i, w, o, p: F.embedding(i, w, max_norm=1.0), w, idx2d)
    case(g, "emb_max_norm_p1_pad", lambda i, w, o, p: F.embedding(i, w, padding_idx=4, max_norm=1.5, norm_type=1.0),
         w, idx2d)
    case(g, "emb_freq_pad", lambda i, w, o, p: F.embedding(i, w, padding_idx=3, scale_grad_by_freq=True), w, idx2d)
    # ---- embedding_bag
    for mode in ("sum", "mean", "max"):
        case(g, f"bag_{mode}", lambda i, w, o, p, m=mode: F.embedding_bag(i, w, o, mode=m), w, IDX, OFFSETS)
        case(g, f"bag_{mode}_2d", lambda i, w, o, p, m=mode: F.embedding_bag(i, w, mode=m), w, idx2d)
        case(g, f"bag_{mode}_pad", lambda i, w, o, p, m=mode: F.embedding_bag(i, w, o, mode=m, padding_idx=1),
             w, IDX, OFFSETS)
    case(g, "bag_sum_psw", lambda i, w, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
         w, IDX, OFFSETS, wave((10,), 0.8, 0.61, 0.2, 0.5))
    case(g, "bag_mean_last_offset",
         lambda i, w, o, p: F.embedding_bag(i, w, o, mode="mean", include_last_offset=True),
         w, IDX, torch.tensor([0, 3, 3, 7, 10], dtype=torch.int64))
    case(g, "bag_sum_max_norm_freq",
         lambda i, w, o, p: F.embedding_bag(i, w, o, mode="sum", max_norm=1.0, scale_grad_by_freq=True),
         w, IDX, OFFSETS)
    return {k: v.contiguous() for k, v in g.items()}


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_embedding_bag_golden.py",
                                "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

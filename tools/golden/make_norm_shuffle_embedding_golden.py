#!/usr/bin/env python3
"""Writes tests/nn/golden/norm_shuffle_embedding_golden.safetensors: PyTorch's
outputs and gradients for instance_norm (affine, plain, updating running
statistics, and normalising with them), pixel_shuffle / pixel_unshuffle, and
embedding with padding_idx, which tests/nn/norm_shuffle_embedding_test.cc
compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_norm_shuffle_embedding_golden.py

All tensors are float32 (embedding indices int64; in1d_offset computed in
float64, then rounded), inputs from closed-form
formulas (golden_util.wave), stored in the file. Names are "<case>.<field>" as
golden_util.record writes them, plus:
- "<case>.rm", "<case>.rv": the running statistics given to instance_norm, and
  "<case>.rm_after", "<case>.rv_after" after the call (updating cases);
- "embedding_pad.idx" (int64), ".w", ".go", ".out", ".dw".
The cases' arguments are in build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import record, wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "norm_shuffle_embedding_golden.safetensors")


def build():
    g = {}
    # ---- instance_norm
    record(g, "in2d_affine", lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-5),
           wave((2, 3, 4, 5), 1.5, 0.37, 0.2), wave((3,), 0.5, 1.1, 0.3, 1.0), wave((3,), 0.4, 0.9))
    # An offset of 50: computed in float64 and rounded to float32, since PyTorch's float32 batch-norm
    # backward loses up to 4e-5 to the offset here (1% of the smallest gradients).
    record(g, "in1d_offset", lambda x, w, b: F.instance_norm(x.double(), eps=1e-3).float(),
           wave((3, 4, 6), 1.0, 0.53, 0.1, 50.0))
    for case, use_input_stats in (("in2d_running", True), ("in2d_eval", False)):
        rm0, rv0 = wave((3,), 0.3, 0.7, 0.2), wave((3,), 0.2, 0.8, 0.5, 1.0)
        rm, rv = rm0.clone(), rv0.clone()
        record(g, case, lambda x, w, b, rm=rm, rv=rv, u=use_input_stats: F.instance_norm(
            x, rm, rv, weight=w, bias=b, use_input_stats=u, momentum=0.2, eps=1e-5),
            wave((2, 3, 3, 4), 1.2, 0.41, 0.6, 0.5), wave((3,), 0.5, 0.6, 0.1, 1.0), wave((3,), 0.3, 1.3))
        g[f"{case}.rm"], g[f"{case}.rv"] = rm0, rv0
        g[f"{case}.rm_after"], g[f"{case}.rv_after"] = rm.clone(), rv.clone()
    # ---- pixel_shuffle / pixel_unshuffle (an extra leading dim in the second shuffle)
    record(g, "pixel_shuffle", lambda x, w, b: F.pixel_shuffle(x, 2), wave((2, 8, 3, 4), 1.0, 0.29))
    record(g, "pixel_shuffle_5d", lambda x, w, b: F.pixel_shuffle(x, 3), wave((2, 1, 9, 2, 2), 1.0, 0.31))
    record(g, "pixel_unshuffle", lambda x, w, b: F.pixel_unshuffle(x, 2), wave((2, 2, 4, 6), 1.0, 0.43))
    # ---- embedding with padding_idx (the padded index repeated)
    idx = torch.tensor([[1, 3, 1, 0], [2, 1, 4, 3]], dtype=torch.int64)
    w0 = wave((5, 3), 1.0, 0.47)
    w = w0.clone().requires_grad_(True)
    out = F.embedding(idx, w, padding_idx=1)
    go = wave(tuple(out.shape), 1.0, 0.29, 0.6)
    out.backward(go)
    g.update({"embedding_pad.idx": idx, "embedding_pad.w": w0, "embedding_pad.go": go,
              "embedding_pad.out": out.detach().clone(), "embedding_pad.dw": w.grad.clone()})
    return {k: v.contiguous() for k, v in g.items()}


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_norm_shuffle_embedding_golden.py",
                                "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

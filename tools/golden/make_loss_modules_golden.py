#!/usr/bin/env python3
"""Writes tests/nn/golden/loss_modules_golden.safetensors: PyTorch's values and
gradients for nn.BCEWithLogitsLoss with a weight (of the input's shape and
broadcast from (C)) and a pos_weight in its three reductions, which
tests/nn/loss_modules_test.cc compares against. (The other loss modules call
functional forms whose own tests compare them with PyTorch.)

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_loss_modules_golden.py

Inputs are float32 from closed-form formulas (golden_util.wave), all stored.
Per case "<case>.out" and "<case>.dx" (the gradient of the output times
"<case>.go", for reduction none, or of the scalar output).
"""
import os
import sys

import torch
import torch.nn as nn
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "loss_modules_golden.safetensors")


def build():
    g = {}
    x = wave((4, 3), 2.0, 0.37, 0.2)
    t = (wave((4, 3), 1.0, 0.91, 1.1) > 0).to(torch.float32) * 0.9 + 0.05  # soft targets
    w_full = wave((4, 3), 0.5, 0.29, 0.4, 1.0)
    w_row = torch.tensor([0.5, 2.0, 1.25])
    pos = torch.tensor([3.0, 0.5, 1.0])
    g.update({"x": x, "t": t, "w_full": w_full, "w_row": w_row, "pos": pos})
    for red in ("none", "mean", "sum"):
        for wname, w in (("full", w_full), ("row", w_row)):
            case = f"bce_logits_{wname}_{red}"
            xi = x.clone().requires_grad_(True)
            out = nn.BCEWithLogitsLoss(weight=w, pos_weight=pos, reduction=red)(xi, t)
            go = wave(tuple(out.shape), 1.0, 0.29, 0.6)
            out.backward(go)
            g[f"{case}.out"] = out.detach().clone()
            g[f"{case}.go"] = go
            g[f"{case}.dx"] = xi.grad.clone()
    return {k: v.contiguous() for k, v in g.items()}


def main():
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_loss_modules_golden.py",
                                "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

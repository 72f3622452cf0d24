#!/usr/bin/env python3
"""Writes tests/nn/golden/bicubic_golden.safetensors: PyTorch's outputs and
gradients for F.interpolate(mode="bicubic"), which tests/nn/bicubic_test.cc
compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_bicubic_golden.py

All tensors are float32, inputs from closed-form formulas (golden_util.wave),
stored in the file. Names are "<case>.<field>" as golden_util.record writes
them; the cases' arguments are in CASES below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import record, wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "bicubic_golden.safetensors")

# name -> F.interpolate keyword arguments (mode bicubic)
CASES = {
    "up_size": dict(size=(9, 11), align_corners=False),
    "up_size_ac": dict(size=(9, 11), align_corners=True),
    "up_scale": dict(scale_factor=1.5, align_corners=False),
    "down_size": dict(size=(3, 4), align_corners=False),
    "mixed_scale": dict(scale_factor=(1.3, 0.7), align_corners=False),
    "one_row_ac": dict(size=(1, 8), align_corners=True),
}


def main():
    g = {}
    x = wave((2, 3, 5, 6), 1.0, 0.37, 0.2)
    for name, kw in CASES.items():
        record(g, name, lambda x, w, b, kw=kw: F.interpolate(x, mode="bicubic", **kw), x)
    g = {k: v.contiguous() for k, v in g.items()}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_bicubic_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

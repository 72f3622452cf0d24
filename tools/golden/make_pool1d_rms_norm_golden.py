#!/usr/bin/env python3
"""Writes tests/nn/golden/pool1d_rms_norm_golden.safetensors: PyTorch's outputs
and gradients for max_pool1d, avg_pool1d, adaptive_avg_pool1d, rms_norm and
conv_transpose1d (for nn::ConvTranspose1d), which
tests/nn/pool1d_rms_norm_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_pool1d_rms_norm_golden.py

All tensors are float32, inputs from closed-form formulas (golden_util.wave),
stored in the file. Names are "<case>.<field>" as golden_util.record writes
them; the cases' arguments are in build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import record, wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "pool1d_rms_norm_golden.safetensors")


def build():
    g = {}
    x3 = wave((2, 3, 11), 1.0, 0.37, 0.2)
    # ---- max_pool1d
    record(g, "maxpool1d_k3s2p1", lambda x, w, b: F.max_pool1d(x, 3, stride=2, padding=1), x3)
    record(g, "maxpool1d_dil_ceil",
           lambda x, w, b: F.max_pool1d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True), x3)
    record(g, "maxpool1d_unbatched", lambda x, w, b: F.max_pool1d(x, 2), wave((3, 9), 1.0, 0.53, 0.4))
    # ---- avg_pool1d
    record(g, "avgpool1d_k3s2p1", lambda x, w, b: F.avg_pool1d(x, 3, stride=2, padding=1), x3)
    record(g, "avgpool1d_ceil_excl",
           lambda x, w, b: F.avg_pool1d(x, 4, stride=3, padding=2, ceil_mode=True, count_include_pad=False), x3)
    # ---- adaptive_avg_pool1d: 11 -> 4 (uneven windows), 11 -> 7 (overlapping), unbatched
    record(g, "adaptive1d_4", lambda x, w, b: F.adaptive_avg_pool1d(x, 4), x3)
    record(g, "adaptive1d_7", lambda x, w, b: F.adaptive_avg_pool1d(x, 7), x3)
    record(g, "adaptive1d_unbatched", lambda x, w, b: F.adaptive_avg_pool1d(x, 3), wave((3, 9), 1.0, 0.53, 0.4))
    # ---- rms_norm: the default eps with a weight; two trailing dims with eps; an offset input
    record(g, "rms_weight", lambda x, w, b: F.rms_norm(x, (8,), w),
           wave((2, 3, 8), 1.0, 0.41, 0.3), wave((8,), 0.5, 0.7, 0.1, 1.0))
    record(g, "rms_2d_eps", lambda x, w, b: F.rms_norm(x, (3, 8), eps=1e-3), wave((2, 3, 8), 0.2, 0.29, 0.1))
    record(g, "rms_offset", lambda x, w, b: F.rms_norm(x, (6,), w, eps=1e-5),
           wave((4, 6), 0.5, 0.61, 0.0, 3.0), wave((6,), 0.3, 0.9, 0.5, 1.0))
    # ---- conv_transpose1d, which the test runs through nn::ConvTranspose1d with these w and b
    record(g, "convtranspose1d_module", lambda x, w, b: F.conv_transpose1d(
        x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
        wave((2, 4, 7), 1.0, 0.33), wave((4, 3, 3), 0.4, 0.47, 0.3), wave((6,), 0.5, 0.8))
    return g


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_pool1d_rms_norm_golden.py",
                                "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

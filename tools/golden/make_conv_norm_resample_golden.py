#!/usr/bin/env python3
"""Writes tests/nn/golden/conv_norm_resample_golden.safetensors: PyTorch's
outputs and gradients for conv_transpose2d, conv1d, conv_transpose1d,
group_norm, interpolate (nearest, nearest-exact, linear, bilinear),
leaky_relu, pad's reflect, replicate and circular modes, and Conv2d with
padding="same" and padding_mode, which tests/nn/conv_norm_resample_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_conv_norm_resample_golden.py

All tensors are float32. Inputs come from closed-form formulas (`wave`) and are
stored in the file, so weft reads them rather than recomputing them. Names are
"<case>.<field>": inputs ".x", ".w", ".b", ".go" (the upstream gradient);
outputs ".out"; gradients ".dx", ".dw", ".db". The cases' arguments are in
build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import record, wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "conv_norm_resample_golden.safetensors")


def build():
    g = {}

    def run(case, fn, x0, w0=None, b0=None):
        record(g, case, fn, x0, w0, b0)

    # ---- conv_transpose2d
    run("convt2d_s2", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        wave((2, 4, 5, 6), 1.0, 0.31), wave((4, 3, 3, 3), 0.4, 0.53, 0.2), wave((3,), 0.5, 0.9, 1.0))
    run("convt2d_groups",
        lambda x, w, b: F.conv_transpose2d(x, w, None, stride=(1, 2), padding=(0, 1), groups=2, dilation=2),
        wave((2, 4, 4, 5), 1.0, 0.43, 0.3), wave((4, 3, 2, 3), 0.4, 0.61, 0.7))
    run("convt2d_plain", lambda x, w, b: F.conv_transpose2d(x, w, b),
        wave((1, 3, 4, 4), 1.0, 0.27, 0.1), wave((3, 5, 3, 3), 0.3, 0.71), wave((5,), 0.5, 1.3))
    # ---- conv1d / conv_transpose1d
    run("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
        wave((2, 4, 9), 1.0, 0.33), wave((6, 2, 3), 0.5, 0.47, 0.4), wave((6,), 0.5, 0.8))
    run("convt1d", lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
        wave((2, 4, 7), 1.0, 0.39, 0.5), wave((4, 3, 4), 0.5, 0.57), wave((3,), 0.5, 1.1, 0.2))
    # ---- group_norm (a large offset checks the two-pass statistics)
    run("gn_affine", lambda x, w, b: F.group_norm(x, 3, w, b, eps=1e-5),
        wave((3, 6, 4, 5), 2.0, 0.41, 0.2, 0.5), wave((6,), 0.5, 1.1, 0.3, 1.0), wave((6,), 0.4, 0.9, 1.0))
    run("gn_plain", lambda x, w, b: F.group_norm(x, 2, eps=1e-3), wave((2, 4, 7), 1.5, 0.53, 0.0, 100.0))
    # ---- interpolate
    x4 = wave((2, 3, 5, 6), 1.0, 0.37, 0.2)
    x3 = wave((2, 3, 7), 1.0, 0.45, 0.1)
    x5 = wave((1, 2, 3, 4, 2), 1.0, 0.51)
    cases = [
        ("near_size", x4, dict(size=(7, 9), mode="nearest")),
        ("near_x2", x4, dict(scale_factor=2, mode="nearest")),
        ("near_s17", x4, dict(scale_factor=1.7, mode="nearest")),
        ("near_down", x4, dict(size=(3, 4), mode="nearest")),
        ("nearx_s06", x4, dict(scale_factor=(0.6, 1.5), mode="nearest-exact")),
        ("near_3d", x3, dict(size=11, mode="nearest")),
        ("near_5d", x5, dict(size=(4, 6, 3), mode="nearest")),
        ("bil_size", x4, dict(size=(7, 4), mode="bilinear", align_corners=False)),
        ("bil_ac", x4, dict(size=(9, 11), mode="bilinear", align_corners=True)),
        ("bil_s15", x4, dict(scale_factor=1.5, mode="bilinear", align_corners=False)),
        ("bil_s13", x4, dict(scale_factor=(1.3, 0.7), mode="bilinear", align_corners=False)),
        ("lin_s23", x3, dict(scale_factor=2.3, mode="linear", align_corners=False)),
        ("lin_ac1", x3, dict(size=1, mode="linear", align_corners=True)),
        ("lin_ac", x3, dict(size=12, mode="linear", align_corners=True)),
    ]
    for case, x0, kw in cases:
        run("interp_" + case, lambda x, w, b, kw=kw: F.interpolate(x, **kw), x0)
    # ---- pad modes, and Conv2d with padding="same" and padding_mode
    xp = wave((2, 3, 4, 5), 1.0, 0.47, 0.3)
    run("pad_reflect", lambda x, w, b: F.pad(x, (2, 1, 3, 0), mode="reflect"), xp)
    run("pad_replicate", lambda x, w, b: F.pad(x, (3, 2, 0, 4), mode="replicate"), xp)
    run("pad_circular", lambda x, w, b: F.pad(x, (5, 1, 2, 4), mode="circular"), xp)
    run("pad_reflect_1d", lambda x, w, b: F.pad(x, (3, 2), mode="reflect"), wave((2, 3, 6), 1.0, 0.61))
    for case, kw in (("conv_same_k4", dict(padding="same", dilation=(1, 2))),
                     ("conv_reflect", dict(padding=(1, 2), padding_mode="reflect")),
                     ("conv_circular_same", dict(padding="same", padding_mode="circular"))):
        conv = torch.nn.Conv2d(3, 4, (3, 4), bias=True, **kw)
        with torch.no_grad():
            conv.weight.copy_(wave((4, 3, 3, 4), 0.3, 0.43, 0.5))
            conv.bias.copy_(wave((4,), 0.5, 0.9))
        run(case, lambda x, w, b, conv=conv: conv(x), xp)
        g[f"{case}.w"] = conv.weight.detach().clone()
        g[f"{case}.b"] = conv.bias.detach().clone()
        g[f"{case}.dw"] = conv.weight.grad.detach().clone()
        g[f"{case}.db"] = conv.bias.grad.detach().clone()
    # ---- leaky_relu, with exact zeros (PyTorch's gradient there is the slope)
    xl = wave((4, 5), 1.0, 0.7)
    xl[0, 0] = 0.0
    xl[2, 3] = 0.0
    run("leaky", lambda x, w, b: F.leaky_relu(x, 0.2), xl)
    return g


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_conv_norm_resample_golden.py",
                                "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

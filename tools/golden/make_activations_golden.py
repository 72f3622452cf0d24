#!/usr/bin/env python3
"""Writes tests/nn/golden/activations_golden.safetensors: PyTorch's outputs and
gradients for hardtanh, relu6, hardsigmoid, hardswish, mish, selu, celu,
logsigmoid, softsign, glu and prelu, which tests/nn/activations_test.cc
compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_activations_golden.py

All tensors are float32, inputs from closed-form formulas (golden_util.wave)
with every kink of these functions (-3, -2, -1, 0, 1, 3, 6) and values far out
(-30, 25) written into the first elements, so the file pins PyTorch's
gradients at the kinks too. Names are "<case>.<field>" as golden_util.record
writes them; the cases' arguments are in build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import record, wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "activations_golden.safetensors")
KINKS = [-3.0, -2.0, -1.0, 0.0, 1.0, 3.0, 6.0, -30.0, 25.0]


def with_kinks(shape):
    x = wave(shape, 4.0, 0.37, 0.2).reshape(-1)
    x[:len(KINKS)] = torch.tensor(KINKS)
    return x.reshape(shape)


def build():
    g = {}
    x = with_kinks((3, 8))
    unary = {
        "hardtanh": lambda x: F.hardtanh(x),
        "hardtanh_range": lambda x: F.hardtanh(x, -2.0, 3.0),
        "relu6": F.relu6,
        "hardsigmoid": F.hardsigmoid,
        "hardswish": F.hardswish,
        "mish": F.mish,
        "selu": F.selu,
        "celu": lambda x: F.celu(x, alpha=1.5),
        "logsigmoid": F.logsigmoid,
        "softsign": F.softsign,
    }
    for name, fn in unary.items():
        record(g, name, lambda x, w, b, fn=fn: fn(x), x)
    record(g, "glu_last", lambda x, w, b: F.glu(x, -1), wave((4, 6), 1.5, 0.43, 0.1))
    record(g, "glu_dim0", lambda x, w, b: F.glu(x, 0), wave((4, 3, 2), 1.5, 0.51, 0.3))
    xp = with_kinks((2, 3, 5))
    record(g, "prelu_one", lambda x, w, b: F.prelu(x, w), xp, torch.tensor([0.25]))
    record(g, "prelu_channels", lambda x, w, b: F.prelu(x, w), xp, torch.tensor([0.1, -0.3, 0.6]))
    record(g, "prelu_1d", lambda x, w, b: F.prelu(x, w), with_kinks((11,)), torch.tensor([0.2]))
    return g


def main():
    torch.manual_seed(0)
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_activations_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

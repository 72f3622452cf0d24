#!/usr/bin/env python3
"""Writes tests/io/golden/python_written.safetensors with the `safetensors` Python
package (PyPI) and PyTorch, one tensor per weft dtype, with known values, plus
__metadata__. tests/io/safetensors_test.cc reads it and checks every value.

Made with: safetensors 0.8.0 and torch 2.15.0 from PyPI
  python3 -m venv /tmp/v && /tmp/v/bin/pip install torch safetensors numpy
  /tmp/v/bin/python tools/golden/make_safetensors_golden.py [weft_written.safetensors]

Given a second argument (a file written by weft, e.g. by
`bazel-bin/tests/io/safetensors_test --write_interop=PATH`), it also loads that file
with the Python package and checks the values weft wrote, so interop is checked
in both directions.
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "io", "golden", "python_written.safetensors")


def golden():
    return {
        "f32": torch.tensor([[1.5, -2.25, 3.0], [0.0, 1e-3, -7.5]], dtype=torch.float32),
        "f64": torch.tensor([3.141592653589793, -1e-300, 2.0], dtype=torch.float64),
        "f16": torch.tensor([0.5, -65504.0, 1.0 / 3.0], dtype=torch.float16),
        "bf16": torch.tensor([1.0, -3.140625, 256.0], dtype=torch.bfloat16),
        "i64": torch.tensor([-(2**40), 0, 7], dtype=torch.int64),
        "i32": torch.tensor([[-5, 6], [2**30, -(2**31)]], dtype=torch.int32),
        "u8": torch.tensor([0, 255, 17], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True], dtype=torch.bool),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
        "scalar": torch.tensor(42.0, dtype=torch.float32),
    }


def main():
    save_file(golden(), OUT, metadata={"format": "pt", "producer": "make_safetensors_golden.py"})
    print("wrote", os.path.normpath(OUT), "with torch", torch.__version__)
    if len(sys.argv) > 1:
        got = load_file(sys.argv[1])
        # weft's interop writer stores the same tensors under the same names
        for k, v in golden().items():
            assert k in got, k
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, (k, got[k].dtype, got[k].shape)
            assert torch.equal(got[k], v), (k, got[k], v)
        print("weft-written file", sys.argv[1], "matches all", len(got), "tensors")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes tests/nn/golden/ctc_golden.safetensors: PyTorch's F.ctc_loss values
and the gradients of the logits under it (log_probs = log_softmax(logits)),
which tests/nn/ctc_loss_test.cc compares against: padded targets with repeated
labels and an empty target in the three reductions, concatenated targets with
blank as the last class, an alignment that cannot fit its input (infinite
loss, and zero_infinity), and an unbatched input.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_ctc_golden.py

Everything is float64 but the integer targets and lengths (int64). The logits
come from golden_util.wave. Per case "<case>.logits", ".targets",
".input_lengths", ".target_lengths", ".out" and ".dlogits" (the gradient of
sum(out * go) with a wave ".go"; for an infinite loss no gradient is stored).
The cases' options are in build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "ctc_golden.safetensors")


def case(g, name, logits0, targets, input_lengths, target_lengths, with_grad=True, **kw):
    logits = logits0.clone().requires_grad_(True)
    lp = logits.log_softmax(-1)
    out = F.ctc_loss(lp, targets, input_lengths, target_lengths, **kw)
    go = wave(tuple(out.shape), 1.0, 0.29, 0.6).double()
    fields = dict(logits=logits0, targets=targets, input_lengths=input_lengths, target_lengths=target_lengths,
                  out=out.detach(), go=go)
    if with_grad:
        (out * go).sum().backward()
        fields["dlogits"] = logits.grad
    for k, v in fields.items():
        g[f"{name}.{k}"] = v.detach().clone().contiguous()


def build():
    g = {}
    T, N, C = 7, 3, 5
    logits = wave((T, N, C), 1.5, 0.37, 0.2).double()
    padded = torch.tensor([[1, 1, 2], [3, 0, 0], [2, 4, 2]], dtype=torch.int64)  # sample 1: one label
    il = torch.tensor([7, 5, 6], dtype=torch.int64)
    tl = torch.tensor([3, 1, 3], dtype=torch.int64)
    for red in ("none", "mean", "sum"):
        case(g, f"padded_{red}", logits, padded, il, tl, reduction=red)
    case(g, "empty_target", logits, padded, il, torch.tensor([3, 0, 2], dtype=torch.int64), reduction="none")
    concat = torch.tensor([0, 0, 1, 2, 3, 1], dtype=torch.int64)  # blank is 4
    case(g, "concat_blank_last", logits, concat, il, torch.tensor([2, 1, 3], dtype=torch.int64), blank=4,
         reduction="none")
    # sample 0 needs 5 frames for [1, 1, 1] (blanks between repeats) but has 4
    impossible_il = torch.tensor([4, 5, 6], dtype=torch.int64)
    impossible_t = torch.tensor([[1, 1, 1], [3, 0, 0], [2, 4, 2]], dtype=torch.int64)
    case(g, "impossible", logits, impossible_t, impossible_il, tl, with_grad=False, reduction="none")
    case(g, "impossible_zero_inf", logits, impossible_t, impossible_il, tl, reduction="mean", zero_infinity=True)
    case(g, "unbatched", logits[:, 0], padded[0], torch.tensor(6), torch.tensor(3), reduction="sum")
    return {k: v.contiguous() for k, v in g.items()}


def main():
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_ctc_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

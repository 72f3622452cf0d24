#!/usr/bin/env python3
"""Writes tests/nn/golden/losses_margin_golden.safetensors: PyTorch's values and
gradients for margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
cosine_embedding_loss, triplet_margin_loss, poisson_nll_loss,
gaussian_nll_loss, multilabel_soft_margin_loss, multi_margin_loss,
multilabel_margin_loss and triplet_margin_with_distance_loss, which
tests/nn/losses_margin_test.cc compares against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_losses_margin_golden.py

All tensors are float32, inputs from closed-form formulas (golden_util.wave),
stored in the file. Names are "<case>.<field>" as golden_util.record writes
them (x, w and b are the loss's differentiable inputs in its argument order),
plus "<case>.target", the target (not differentiated; class indices stored
as float) and "multi_margin_p2_weight_sum.weight". The cases' arguments
are in build() below and mirrored in the test.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import record, wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "nn", "golden", "losses_margin_golden.safetensors")


def signs(n, phase=0):
    """1, -1 in a fixed irregular pattern."""
    return torch.tensor([1.0 if (3 * i + phase) % 5 < 3 else -1.0 for i in range(n)])


def build():
    g = {}

    def case(name, fn, target, *inputs):
        record(g, name, lambda x, w, b: fn(x, w, b, target), *inputs)
        g[f"{name}.target"] = target.clone().contiguous()

    y12 = signs(12).reshape(3, 4)
    a, b = wave((3, 4), 1.0, 0.37, 0.2), wave((3, 4), 1.0, 0.53, 0.9)
    case("margin_ranking", lambda x, w, _, t: F.margin_ranking_loss(x, w, t, margin=0.3), y12, a, b)
    case("margin_ranking_sum", lambda x, w, _, t: F.margin_ranking_loss(x, w, t, reduction="sum"), y12, a, b)
    case("hinge", lambda x, w, _, t: F.hinge_embedding_loss(x, t, margin=0.7, reduction="none"), y12, a)
    case("soft_margin", lambda x, w, _, t: F.soft_margin_loss(x, t), y12, a)
    x1, x2 = wave((4, 5), 1.0, 0.41, 0.1), wave((4, 5), 1.0, 0.29, 0.7)
    case("cosine_embedding", lambda x, w, _, t: F.cosine_embedding_loss(x, w, t, margin=0.2), signs(4, 1), x1, x2)
    case("cosine_embedding_1d", lambda x, w, _, t: F.cosine_embedding_loss(x, w, t, reduction="none"),
         torch.tensor(-1.0), wave((5,), 1.0, 0.31), wave((5,), 1.0, 0.33, 0.2))
    an, po, ne = wave((4, 6), 1.0, 0.43, 0.1), wave((4, 6), 1.0, 0.47, 0.5), wave((4, 6), 1.0, 0.23, 1.3)
    none = torch.zeros(())
    case("triplet", lambda x, w, b, t: F.triplet_margin_loss(x, w, b, margin=1.0), none, an, po, ne)
    case("triplet_swap_p1", lambda x, w, b, t: F.triplet_margin_loss(x, w, b, margin=0.5, p=1, swap=True,
                                                                        reduction="none"), none, an, po, ne)
    counts = torch.tensor([0.0, 1.0, 2.0, 3.0, 0.0, 5.0, 1.0, 7.0, 2.0, 0.0, 4.0, 1.5]).reshape(3, 4)
    case("poisson_log", lambda x, w, _, t: F.poisson_nll_loss(x, t), counts, a)
    case("poisson_full", lambda x, w, _, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="sum"),
         counts, wave((3, 4), 0.5, 0.61, 0.3, 1.2))
    mu = wave((3, 4), 1.0, 0.37, 0.4)
    var = wave((3, 4), 0.4, 0.7, 0.2, 0.6)
    var[1, 2] = 1e-8  # below eps: clamped in value, not in gradient
    case("gaussian", lambda x, w, _, t: F.gaussian_nll_loss(x, t, w), a, mu, var)
    case("gaussian_homo_full", lambda x, w, _, t: F.gaussian_nll_loss(x, t, w, full=True, reduction="sum"), a, mu,
         wave((3,), 0.3, 0.9, 0.1, 0.8))
    labels = torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0, 0.0]])
    case("multilabel", lambda x, w, _, t: F.multilabel_soft_margin_loss(x, t, weight=w), labels,
         wave((3, 5), 2.0, 0.39, 0.3), wave((5,), 0.5, 0.8, 0.1, 1.0))
    case("multilabel_none", lambda x, w, _, t: F.multilabel_soft_margin_loss(x, t, reduction="none"), labels,
         wave((3, 5), 2.0, 0.39, 0.3))
    # multi_margin_loss: targets stored as float, class indices; the weight is a constant (PyTorch does not
    # differentiate it).
    classes = torch.tensor([1.0, 0.0, 4.0, 2.0])
    xm = wave((4, 5), 1.2, 0.43, 0.2)
    case("multi_margin", lambda x, w, _, t: F.multi_margin_loss(x, t.long()), classes, xm)
    class_weight = wave((5,), 0.4, 0.9, 0.3, 1.0)
    case("multi_margin_p2_weight_sum", lambda x, w, _, t: F.multi_margin_loss(
        x, t.long(), p=2, margin=0.7, weight=class_weight, reduction="sum"), classes, xm)
    g["multi_margin_p2_weight_sum.weight"] = class_weight.clone()
    case("multi_margin_none_1d", lambda x, w, _, t: F.multi_margin_loss(x, t.long(), reduction="none"),
         torch.tensor(3.0), wave((5,), 1.0, 0.51, 0.4))
    # multilabel_margin_loss: each row's labels end at the first -1 (later entries ignored); row 1 repeats a
    # label, row 2 lists every class (no loss).
    label_lists = torch.tensor([[3.0, 0.0, -1.0, 1.0, 2.0], [4.0, 4.0, -1.0, 0.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0]])
    case("multilabel_margin", lambda x, w, _, t: F.multilabel_margin_loss(x, t.long()), label_lists,
         wave((3, 5), 1.0, 0.47, 0.6))
    case("multilabel_margin_none_1d", lambda x, w, _, t: F.multilabel_margin_loss(x, t.long(), reduction="none"),
         torch.tensor([2.0, -1.0, 0.0, 0.0]), wave((4,), 1.0, 0.61, 0.2))
    # triplet_margin_with_distance_loss: the default distance, and 1 - cosine similarity with swap.
    case("triplet_distance", lambda x, w, b, t: F.triplet_margin_with_distance_loss(x, w, b), none, an, po, ne)
    case("triplet_distance_cosine_swap", lambda x, w, b, t: F.triplet_margin_with_distance_loss(
        x, w, b, distance_function=lambda u, v: 1.0 - F.cosine_similarity(u, v), margin=0.4, swap=True,
        reduction="sum"), none, an, po, ne)
    return g


def main():
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_losses_margin_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

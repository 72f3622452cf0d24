#!/usr/bin/env python3
"""Writes tests/optim/golden/lbfgs_golden.safetensors: torch.optim.LBFGS's
trajectories, which tests/optim/lbfgs_test.cc compares against: per step the
returned loss, the parameters after it and the optimizer's func_evals and
n_iter, for the Rosenbrock function with the strong-Wolfe line search (from lr 1, and from lr 10, whose
zoom phase meets trial steps near the bracket's ends), for sum |x|^1.5 +
(x0 x1)^2 (whose zoom moves steps off a bracket's end), and for
a least-squares fit of two parameter tensors without a line search (a history
of 3 pairs, so older pairs drop out) and with one capped by max_eval.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_lbfgs_golden.py

Everything is float64. Inputs come from closed-form formulas (golden_util.wave)
and are stored ("ls.X", "ls.Y", "ls.W0", "ls.c0", "abs15.x0"). Per case and step s:
"<case>.<s>.loss", "<case>.<s>.<param>", "<case>.<s>.func_evals",
"<case>.<s>.n_iter". The options are in build() below and mirrored in the test.
"""
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "optim", "golden", "lbfgs_golden.safetensors")
STEPS = 4


def rosenbrock(xy):
    return (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2


def run(g, case, params, loss_fn, **opts):
    """STEPS optimizer steps; params is a dict name -> leaf tensor."""
    opt = torch.optim.LBFGS(list(params.values()), **opts)

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    for s in range(STEPS):
        loss = opt.step(closure)
        g[f"{case}.{s}.loss"] = loss.detach().clone()
        for name, p in params.items():
            g[f"{case}.{s}.{name}"] = p.detach().clone()
        st = opt.state[next(iter(params.values()))]
        g[f"{case}.{s}.func_evals"] = torch.tensor(st["func_evals"], dtype=torch.int64)
        g[f"{case}.{s}.n_iter"] = torch.tensor(st["n_iter"], dtype=torch.int64)


def build():
    g = {}
    xy = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    run(g, "rosen_wolfe", {"xy": xy}, lambda: rosenbrock(xy), lr=1, max_iter=20, line_search_fn="strong_wolfe")
    # lr 10 overshoots: the zoom's trial steps land near the bracket's ends
    xy10 = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    run(g, "rosen_wolfe_lr10", {"xy": xy10}, lambda: rosenbrock(xy10), lr=10, max_iter=20,
        line_search_fn="strong_wolfe")
    # sum |x|^1.5 + (x0 x1)^2 from lr 30: twice the zoom moves a trial step off a
    # bracket end after two near-end trials in a row (its insufficient-progress rule)
    x0 = torch.tensor([3.0819922164880866, -0.5868578115218928, -4.357578764149115], dtype=torch.float64)
    g["abs15.x0"] = x0.clone()
    x = x0.clone().requires_grad_(True)
    run(g, "abs15_wolfe_lr30", {"x": x}, lambda: (x.abs() ** 1.5).sum() + (x[0] * x[1]) ** 2, lr=30, max_iter=20,
        line_search_fn="strong_wolfe")

    X = wave((8, 4), 1.0, 0.37, 0.1).double()
    Y = wave((8, 3), 0.8, 0.53, 0.9).double()
    W0 = wave((3, 4), 0.3, 0.21, 0.5).double()
    c0 = wave((3,), 0.2, 0.71, 0.2).double()
    g.update({"ls.X": X, "ls.Y": Y, "ls.W0": W0, "ls.c0": c0})

    def least_squares(case, **opts):
        W = W0.clone().requires_grad_(True)
        c = c0.clone().requires_grad_(True)
        run(g, case, {"W": W, "c": c}, lambda: ((X @ W.t() + c - Y) ** 2).mean() + 0.1 * (W ** 4).sum(), **opts)

    least_squares("ls_fixed", lr=0.5, max_iter=5, history_size=3)
    least_squares("ls_wolfe_capped", lr=1, max_iter=10, max_eval=12, history_size=2, line_search_fn="strong_wolfe")
    return {k: v.contiguous() for k, v in g.items()}


def main():
    g = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"generator": "tools/golden/make_lbfgs_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

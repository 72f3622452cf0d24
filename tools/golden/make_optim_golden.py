#!/usr/bin/env python3
"""Writes tests/optim/golden/optim_golden.safetensors: expected results of
PyTorch's optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, RAdam, Adamax,
Adadelta; single-tensor path,
foreach=False), two of them with a learning-rate schedule, and
clip_grad_norm_, which tests/optim/*_test.cc compare weft against (the
schedulers alone: make_lr_scheduler_golden.py).

Made with: torch 2.15.0 (PyPI, CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_optim_golden.py

Contents (all names are flat; K = number of optimizer steps):
- "init.p0" (3, 4), "init.p1" (5,): float32 starting parameters.
- "grads.p0" (K, 3, 4), "grads.p1" (K, 5): float32 gradients for step k, from
  g0[k][i] = 0.8 * sin(0.37 * i + 1.3 * k), g1[k][i] = cos(0.91 * i - 0.6 * k) + 0.1
  (stored, so weft reads them rather than recomputing them).
- "opt.<case>.p0" (K + 1, 3, 4), "opt.<case>.p1" (K + 1, 5): the parameters
  before the first step (row 0) and after each step k (row k + 1).
- "opt.<case>.lr" (K + 1,) float64: group lr before each step / at the end
  (only for cases with a scheduler, stepped after each optimizer step).
  Cases and hyper-parameters are listed in CASES below and mirrored in
  tests/optim/optim_test.cc.
- "clip.<name>.total" () float32 and "clip.<name>.g0"/"g1": total norm returned
  by clip_grad_norm_ and the clipped gradients, starting from grads step 0.
"""
import math
import os

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "optim", "golden", "optim_golden.safetensors")
K = 6


def init_params():
    p0 = torch.tensor([0.5 * math.cos(0.7 * i + 0.2) for i in range(12)], dtype=torch.float32).reshape(3, 4)
    p1 = torch.tensor([0.3 * i - 0.7 for i in range(5)], dtype=torch.float32)
    return p0, p1


def grads():
    g0 = torch.tensor([[0.8 * math.sin(0.37 * i + 1.3 * k) for i in range(12)] for k in range(K)],
                      dtype=torch.float32).reshape(K, 3, 4)
    g1 = torch.tensor([[math.cos(0.91 * i - 0.6 * k) + 0.1 for i in range(5)] for k in range(K)],
                      dtype=torch.float32)
    return g0, g1


CASES = {
    "sgd_plain": (torch.optim.SGD, dict(lr=0.1), None),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.05, momentum=0.9), None),
    "sgd_damp_wd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01), None),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.02), None),
    "adam": (torch.optim.Adam, dict(lr=0.01), None),
    "adam_wd": (torch.optim.Adam, dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1), None),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.05), None),
    "adam_amsgrad": (torch.optim.Adam, dict(lr=0.02, betas=(0.8, 0.9), weight_decay=0.05, amsgrad=True), None),
    "adamw_amsgrad": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1, amsgrad=True), None),
    "rmsprop": (torch.optim.RMSprop, dict(lr=0.01), None),
    "rmsprop_wd_mom": (torch.optim.RMSprop, dict(lr=0.005, alpha=0.9, eps=1e-6, weight_decay=0.05, momentum=0.8),
                       None),
    "rmsprop_centered": (torch.optim.RMSprop, dict(lr=0.002, alpha=0.95, momentum=0.5, centered=True), None),
    "rmsprop_small_alpha": (torch.optim.RMSprop, dict(lr=0.01, alpha=0.3, centered=True), None),
    "adagrad": (torch.optim.Adagrad, dict(lr=0.1), None),
    "adagrad_decay": (torch.optim.Adagrad, dict(lr=0.2, lr_decay=0.1, weight_decay=0.02,
                                                initial_accumulator_value=0.5, eps=1e-6), None),
    "sgd_maximize": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.01, maximize=True), None),
    "adam_maximize": (torch.optim.Adam, dict(lr=0.01, weight_decay=0.05, maximize=True), None),
    "adamw_maximize": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.05, amsgrad=True, maximize=True), None),
    "rmsprop_maximize": (torch.optim.RMSprop, dict(lr=0.01, weight_decay=0.02, momentum=0.5, centered=True,
                                                   maximize=True), None),
    "adagrad_maximize": (torch.optim.Adagrad, dict(lr=0.1, weight_decay=0.02, maximize=True), None),
    "radam": (torch.optim.RAdam, dict(lr=0.01), None),
    "radam_wd": (torch.optim.RAdam, dict(lr=0.02, betas=(0.8, 0.9), weight_decay=0.05), None),
    "radam_decoupled": (torch.optim.RAdam, dict(lr=0.02, betas=(0.9, 0.9), weight_decay=0.1,
                                                 decoupled_weight_decay=True), None),
    "adamax": (torch.optim.Adamax, dict(lr=0.02), None),
    "adamax_wd_max": (torch.optim.Adamax, dict(lr=0.01, betas=(0.8, 0.95), eps=1e-3, weight_decay=0.05,
                                               maximize=True), None),
    "adadelta": (torch.optim.Adadelta, dict(), None),
    "adadelta_wd_max": (torch.optim.Adadelta, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.05, maximize=True), None),
    "sgd_steplr": (torch.optim.SGD, dict(lr=0.1, momentum=0.9),
                   lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)),
    "adamw_warmcos": (torch.optim.AdamW, dict(lr=0.02, weight_decay=0.1),
                      lambda o: warmup_cosine(o, warmup=2, total=K, start_factor=0.25, eta_min=1e-3)),
}


def warmup_cosine(opt, warmup, total, start_factor, eta_min):
    s = torch.optim.lr_scheduler
    lin = s.LinearLR(opt, start_factor=start_factor, end_factor=1.0, total_iters=warmup)
    cos = s.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=eta_min)
    return s.SequentialLR(opt, [lin, cos], milestones=[warmup])


def run_case(cls, kw, make_sched, g0, g1):
    p0, p1 = init_params()
    p0.requires_grad_(True)
    p1.requires_grad_(True)
    opt = cls([p0, p1], foreach=False, **kw)
    sched = make_sched(opt) if make_sched else None
    h0, h1, lrs = [p0.detach().clone()], [p1.detach().clone()], [opt.param_groups[0]["lr"]]
    for k in range(K):
        p0.grad = g0[k].clone()
        p1.grad = g1[k].clone()
        opt.step()
        if sched:
            sched.step()
        h0.append(p0.detach().clone())
        h1.append(p1.detach().clone())
        lrs.append(opt.param_groups[0]["lr"])
    return torch.stack(h0), torch.stack(h1), torch.tensor(lrs, dtype=torch.float64)


CLIPS = {"l2_clipped": (0.5, 2.0), "l2_unclipped": (100.0, 2.0), "inf_clipped": (0.3, math.inf),
         "l1_clipped": (1.0, 1.0)}


def main():
    g0, g1 = grads()
    out = {}
    p0, p1 = init_params()
    out["init.p0"], out["init.p1"], out["grads.p0"], out["grads.p1"] = p0, p1, g0, g1
    for name, (cls, kw, make_sched) in CASES.items():
        h0, h1, lrs = run_case(cls, kw, make_sched, g0, g1)
        out[f"opt.{name}.p0"], out[f"opt.{name}.p1"] = h0, h1
        if make_sched:
            out[f"opt.{name}.lr"] = lrs
    for name, (max_norm, norm_type) in CLIPS.items():
        a, b = init_params()
        a.grad, b.grad = g0[0].clone(), g1[0].clone()
        total = torch.nn.utils.clip_grad_norm_([a, b], max_norm, norm_type=norm_type, foreach=False)
        out[f"clip.{name}.total"] = total.detach().to(torch.float32).reshape(())
        out[f"clip.{name}.g0"], out[f"clip.{name}.g1"] = a.grad.clone(), b.grad.clone()
    out = {k: v.contiguous() for k, v in out.items()}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(out, OUT, metadata={"producer": "make_optim_golden.py", "torch": torch.__version__})
    print(f"wrote {len(out)} tensors to {os.path.normpath(OUT)} with torch {torch.__version__}")


if __name__ == "__main__":
    main()

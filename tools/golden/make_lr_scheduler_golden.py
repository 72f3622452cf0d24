#!/usr/bin/env python3
"""Writes tests/optim/golden/lr_scheduler_golden.safetensors: the learning
rates (and cycled momenta, and ReduceLROnPlateau's counters) of PyTorch's
learning-rate schedulers, which tests/optim/lr_scheduler_test.cc compares
optim/lr_scheduler.h against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_lr_scheduler_golden.py

Every case has two parameter groups, base lrs 0.1 and 0.03, on the optimizer
named in CASES (SGD unless it says Adam); the scheduler is made, then stepped N
times (after an optimizer step without gradients, so nothing else changes).
All tensors are float64. Names (case names and arguments: CASES below,
mirrored in the test):
- "sched.<case>.lr" (N + 1, 2): get_last_lr() of both groups right after
  construction (row 0) and after each step.
- "sched.<case>.momentum" (N + 1, 2), for the cases that cycle the momentum
  (OneCycleLR, CyclicLR, and a SequentialLR ending in OneCycleLR): each group's
  momentum (SGD's group["momentum"], Adam's group["betas"][0]) at the same points.
The SequentialLR and ChainedScheduler cases build their schedulers in the
order they are listed, on the same optimizer.
- "sched.<case>.metric" (N,), ReduceLROnPlateau cases only: the metric given to
  step k (NaN included); and "sched.<case>.state" (N + 1, 3): best,
  num_bad_epochs and cooldown_counter at the same points as the lrs.
"""
import math
import os

import torch
import torch.optim.swa_utils
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "optim", "golden", "lr_scheduler_golden.safetensors")
S = torch.optim.lr_scheduler
NAN = float("nan")


def warmup_cosine(opt, warmup, total, start_factor, eta_min):
    lin = S.LinearLR(opt, start_factor=start_factor, end_factor=1.0, total_iters=warmup)
    cos = S.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=eta_min)
    return S.SequentialLR(opt, [lin, cos], milestones=[warmup])


def sequential(opt, makers, milestones):
    return S.SequentialLR(opt, [m(opt) for m in makers], milestones=milestones)


def chained(opt, makers):
    return S.ChainedScheduler([m(opt) for m in makers])


# Metric sequences for ReduceLROnPlateau: a loss that falls, stalls, jumps and
# falls again, with a NaN; an accuracy that rises and stalls, with a NaN first.
LOSS = [1.0, 0.95, 0.8, 0.79, 0.78, 0.85, 0.5, 0.49, 0.6, 0.7, 0.45, 0.44, NAN, 0.43, 0.2, 0.2, 0.2, 0.2, 0.19,
        0.25, 0.3, 0.1, 0.1, 0.1, 0.1]
ACC = [NAN, 0.5, 0.6, 0.6, 0.605, 0.7, 0.7, 0.71, 0.69, 0.72, 0.9, 0.9, NAN, 0.9, 0.95, 0.95, 0.951, 0.94, 0.96,
       0.96, 0.96, 0.96]

# name -> (optimizer: "sgd" / "sgd_momentum" / "adam", make scheduler, steps, plateau metrics or None)
CASES = {
    "step": ("sgd", lambda o: S.StepLR(o, step_size=3, gamma=0.1), 20, None),
    "cosine": ("sgd", lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 35, None),
    "warmcos": ("sgd", lambda o: warmup_cosine(o, warmup=5, total=20, start_factor=0.1, eta_min=1e-4), 20, None),
    "warm_restarts": ("sgd", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=4, eta_min=0.002), 13, None),
    "warm_restarts_mult": ("sgd", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001), 25,
                           None),
    "polynomial": ("sgd", lambda o: S.PolynomialLR(o, total_iters=6, power=2.0), 9, None),
    "polynomial_default": ("sgd", lambda o: S.PolynomialLR(o), 7, None),
    "polynomial_sqrt": ("sgd", lambda o: S.PolynomialLR(o, total_iters=10, power=0.5), 12, None),
    "multistep": ("sgd", lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5), 12, None),
    "multistep_zero": ("sgd", lambda o: S.MultiStepLR(o, milestones=[3, 0]), 5, None),
    "exponential": ("sgd", lambda o: S.ExponentialLR(o, gamma=0.9), 10, None),
    "linear": ("sgd", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6), 10, None),
    "linear_default": ("sgd", lambda o: S.LinearLR(o), 8, None),
    "linear_down": ("sgd", lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=4), 6, None),
    "constant": ("sgd", lambda o: S.ConstantLR(o, factor=0.5, total_iters=4), 7, None),
    "constant_default": ("sgd", lambda o: S.ConstantLR(o), 8, None),
    "lambda": ("sgd", lambda o: S.LambdaLR(o, lambda e: 0.95 ** e), 8, None),
    "lambda_per_group": ("sgd", lambda o: S.LambdaLR(o, [lambda e: 1.0 / (e + 1), lambda e: 0.5 * e + 1.0]), 8,
                         None),
    "multiplicative": ("sgd", lambda o: S.MultiplicativeLR(o, lambda e: 0.9), 6, None),
    "multiplicative_per_group": ("sgd", lambda o: S.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 1.0 - 0.01 * e]),
                                 6, None),
    # OneCycleLR: SGD's momentum cycled (SGD built with momentum 0.9), or Adam's beta1.
    "onecycle_cos_sgd": ("sgd_momentum", lambda o: S.OneCycleLR(o, max_lr=[1.0, 0.3], total_steps=20), 20, None),
    "onecycle_linear_sgd": ("sgd_momentum", lambda o: S.OneCycleLR(
        o, max_lr=0.5, total_steps=17, pct_start=0.25, anneal_strategy="linear", div_factor=10.0,
        final_div_factor=100.0), 17, None),
    "onecycle_three_phase_adam": ("adam", lambda o: S.OneCycleLR(
        o, max_lr=[0.01, 0.004], total_steps=24, three_phase=True, base_momentum=0.8, max_momentum=0.9), 24, None),
    "onecycle_three_phase_linear_adam": ("adam", lambda o: S.OneCycleLR(
        o, max_lr=0.02, total_steps=15, pct_start=0.4, anneal_strategy="linear", three_phase=True,
        base_momentum=[0.85, 0.8], max_momentum=[0.95, 0.9]), 15, None),
    "onecycle_no_momentum": ("sgd_momentum", lambda o: S.OneCycleLR(
        o, max_lr=0.4, total_steps=10, cycle_momentum=False), 10, None),
    # ReduceLROnPlateau in both modes and both threshold modes, with cooldown, min_lr floors and eps.
    "plateau_min_rel": ("sgd", lambda o: S.ReduceLROnPlateau(
        o, mode="min", factor=0.5, patience=2, threshold=0.1, threshold_mode="rel"), len(LOSS), LOSS),
    "plateau_min_abs_cooldown": ("sgd", lambda o: S.ReduceLROnPlateau(
        o, mode="min", factor=0.3, patience=1, threshold=0.05, threshold_mode="abs", cooldown=2,
        min_lr=[0.01, 0.005]), len(LOSS), LOSS),
    "plateau_max_rel": ("sgd", lambda o: S.ReduceLROnPlateau(
        o, mode="max", factor=0.7, patience=0, threshold=0.01, threshold_mode="rel", min_lr=0.02), len(ACC), ACC),
    "plateau_max_abs_eps": ("sgd", lambda o: S.ReduceLROnPlateau(
        o, mode="max", factor=0.5, patience=1, threshold=0.0, threshold_mode="abs", cooldown=1, eps=0.01),
        len(ACC), ACC),
    "plateau_default": ("sgd", lambda o: S.ReduceLROnPlateau(o), len(LOSS), LOSS),
    # CyclicLR: the three modes, custom scale functions in both scale modes, no way down.
    "cyclic_triangular_sgd": ("sgd_momentum", lambda o: S.CyclicLR(
        o, base_lr=[0.01, 0.002], max_lr=[0.1, 0.02], step_size_up=3), 15, None),
    "cyclic_triangular2_down": ("sgd", lambda o: S.CyclicLR(
        o, base_lr=0.001, max_lr=0.01, step_size_up=2, step_size_down=4, mode="triangular2",
        cycle_momentum=False), 20, None),
    "cyclic_exp_range_adam": ("adam", lambda o: S.CyclicLR(
        o, base_lr=0.001, max_lr=[0.006, 0.004], step_size_up=4, mode="exp_range", gamma=0.95,
        base_momentum=0.85, max_momentum=[0.95, 0.9]), 20, None),
    "cyclic_scale_fn_iterations": ("sgd", lambda o: S.CyclicLR(
        o, base_lr=0.002, max_lr=0.02, step_size_up=3, step_size_down=1, scale_fn=lambda x: 1.0 / (1.0 + 0.1 * x),
        scale_mode="iterations", cycle_momentum=False), 12, None),
    "cyclic_scale_fn_cycle": ("sgd", lambda o: S.CyclicLR(
        o, base_lr=0.002, max_lr=0.02, step_size_up=2, scale_fn=lambda c: 0.5 ** c, cycle_momentum=False), 12, None),
    "cyclic_down_zero": ("sgd", lambda o: S.CyclicLR(
        o, base_lr=0.01, max_lr=0.05, step_size_up=3, step_size_down=0, cycle_momentum=False), 8, None),
    # SequentialLR: closed forms at the milestones, a MultiplicativeLR that keeps the lrs it finds, a milestone
    # at 0, OneCycleLR's initial_lr taking over the reset, CyclicLR made after another scheduler.
    "seq_constant_exp": ("sgd", lambda o: sequential(
        o, [lambda o: S.ConstantLR(o, factor=0.1, total_iters=4), lambda o: S.ExponentialLR(o, gamma=0.9)], [4]),
        12, None),
    "seq_three": ("sgd", lambda o: sequential(
        o, [lambda o: S.LinearLR(o, start_factor=0.2, total_iters=3), lambda o: S.StepLR(o, step_size=2, gamma=0.5),
            lambda o: S.CosineAnnealingLR(o, T_max=6, eta_min=1e-3)], [3, 8]), 20, None),
    "seq_multiplicative_lambda": ("sgd", lambda o: sequential(
        o, [lambda o: S.MultiStepLR(o, milestones=[1, 2], gamma=0.5), lambda o: S.MultiplicativeLR(o, lambda e: 0.8),
            lambda o: S.LambdaLR(o, lambda e: 1.0 / (e + 1))], [3, 6]), 12, None),
    "seq_milestone_zero": ("sgd", lambda o: sequential(
        o, [lambda o: S.ExponentialLR(o, gamma=0.5), lambda o: S.PolynomialLR(o, total_iters=4, power=2.0)], [0]),
        6, None),
    "seq_onecycle": ("sgd_momentum", lambda o: sequential(
        o, [lambda o: S.LinearLR(o, start_factor=0.5, total_iters=2),
            lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=8)], [2]), 10, None),
    "seq_warm_restarts_cyclic": ("sgd", lambda o: sequential(
        o, [lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3),
            lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, cycle_momentum=False)], [5]),
        12, None),
    # ChainedScheduler: PyTorch's example, two recursive forms, a SequentialLR inside.
    "chain_constant_exp": ("sgd", lambda o: chained(
        o, [lambda o: S.ConstantLR(o, factor=0.1, total_iters=2), lambda o: S.ExponentialLR(o, gamma=0.9)]), 6, None),
    "chain_step_cosine": ("sgd", lambda o: chained(
        o, [lambda o: S.StepLR(o, step_size=3, gamma=0.5), lambda o: S.CosineAnnealingLR(o, T_max=5)]), 12, None),
    "chain_nested": ("sgd", lambda o: chained(
        o, [lambda o: sequential(o, [lambda o: S.LinearLR(o, start_factor=0.5, total_iters=2),
                                     lambda o: S.ExponentialLR(o, gamma=0.8)], [3]),
            lambda o: S.MultiplicativeLR(o, lambda e: 0.95)]), 8, None),
    # SWALR (torch.optim.swa_utils): cosine and linear annealing to per-group or shared swa_lrs, no annealing.
    "swalr_cos": ("sgd", lambda o: torch.optim.swa_utils.SWALR(o, swa_lr=[0.05, 0.01], anneal_epochs=3), 6, None),
    "swalr_linear": ("sgd", lambda o: torch.optim.swa_utils.SWALR(
        o, swa_lr=0.02, anneal_epochs=4, anneal_strategy="linear"), 6, None),
    "swalr_no_anneal": ("sgd", lambda o: torch.optim.swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=0), 3, None),
    "seq_cos_swalr": ("sgd", lambda o: sequential(
        o, [lambda o: S.CosineAnnealingLR(o, T_max=4), lambda o: torch.optim.swa_utils.SWALR(
            o, swa_lr=0.02, anneal_epochs=2)], [3]), 8, None),
}
MOMENTUM = {"cyclic_triangular_sgd", "cyclic_exp_range_adam", "seq_onecycle"}


def make_optimizer(kind):
    a = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    groups = [{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.03}]
    if kind == "adam":
        return torch.optim.Adam(groups)
    return torch.optim.SGD(groups, momentum=0.9 if kind == "sgd_momentum" else 0.0)


def momentum(group):
    return group["betas"][0] if "betas" in group else group["momentum"]


def run_case(kind, make, n, metrics):
    opt = make_optimizer(kind)
    sched = make(opt)
    out = {"lr": [list(sched.get_last_lr())], "momentum": [[momentum(g) for g in opt.param_groups]]}
    if metrics is not None:
        out["state"] = [[sched.best, sched.num_bad_epochs, sched.cooldown_counter]]
    for k in range(n):
        opt.step()
        if metrics is not None:
            sched.step(metrics[k])
            out["state"].append([sched.best, sched.num_bad_epochs, sched.cooldown_counter])
        else:
            sched.step()
        out["lr"].append(list(sched.get_last_lr()))
        out["momentum"].append([momentum(g) for g in opt.param_groups])
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in out.items()}


def main():
    out = {}
    for name, (kind, make, n, metrics) in CASES.items():
        r = run_case(kind, make, n, metrics)
        out[f"sched.{name}.lr"] = r["lr"]
        if name.startswith("onecycle") or name in MOMENTUM:
            out[f"sched.{name}.momentum"] = r["momentum"]
        if metrics is not None:
            out[f"sched.{name}.metric"] = torch.tensor(metrics, dtype=torch.float64)
            out[f"sched.{name}.state"] = r["state"]
    assert all(not math.isnan(v) for v in out["sched.onecycle_cos_sgd.lr"].flatten().tolist())
    out = {k: v.contiguous() for k, v in out.items()}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(out, OUT, metadata={"producer": "make_lr_scheduler_golden.py", "torch": torch.__version__})
    print(f"wrote {len(out)} tensors to {os.path.normpath(OUT)} with torch {torch.__version__}")


if __name__ == "__main__":
    main()

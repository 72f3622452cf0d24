#!/usr/bin/env python3
"""Writes tests/optim/golden/swa_golden.safetensors: PyTorch's
torch.optim.swa_utils.AveragedModel averages (SWA and EMA, with and without
buffers, with avg_fn and multi_avg_fn) of a sequence of model states, and the
batch norm statistics update_bn recomputes, which
tests/optim/swa_utils_test.cc compares optim/swa_utils.h against.

Made with: torch 2.15.0 (PyPI build 2.15.0+cu132, run on CPU) and safetensors 0.8.0, Python 3.11:
  /root/.cache/weft/torch-venv/bin/python tools/golden/make_swa_golden.py

The model is Sequential(Linear(4, 8), BatchNorm1d(8), ReLU(), Linear(8, 3));
its states 0..K come from golden_util.wave (running_var kept positive,
num_batches_tracked 3k + 1). Each averaged model is made from state 0, then
update_parameters is called with states 1..K. Names:
- "model.<k>.<key>": state k (its state_dict keys: "0.weight", ...,
  "1.num_batches_tracked").
- "<avg>.<k>.<key>" and "<avg>.<k>.n_averaged": the averaged module's state
  dict after the update with state k, for <avg> in AVERAGED below.
- "bn.x.<i>" (6, 4): update_bn's batches; "bn.<key>": the "swa" model's batch
  norm buffers after update_bn(batches, swa) (swa in eval mode before and
  after); "bn.probe" (5, 4) and "bn.out" (5, 3): its eval output afterwards.
"""
import os
import sys

import torch
from torch import nn
from torch.optim import swa_utils
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_util import wave  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "optim", "golden", "swa_golden.safetensors")
K = 4

# name -> AveragedModel keyword arguments (mirrored in the test).
AVERAGED = {
    "swa": {},
    "swa_buffers": {"use_buffers": True},
    "swa_multi": {"multi_avg_fn": swa_utils.get_swa_multi_avg_fn()},
    "ema_multi_buffers": {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(0.9), "use_buffers": True},
    "ema_fn": {"avg_fn": swa_utils.get_ema_avg_fn(0.75)},
}


def net():
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def state(model, k):
    out = {}
    for i, (key, v) in enumerate(model.state_dict().items()):
        if key.endswith("num_batches_tracked"):
            out[key] = torch.tensor(3 * k + 1, dtype=torch.int64)
        elif key.endswith("running_var"):
            out[key] = 1.0 + 0.5 * wave(tuple(v.shape), 1.0, 0.41 + 0.07 * k, 0.3 * i).abs()
        else:
            out[key] = wave(tuple(v.shape), 0.8, 0.23 + 0.05 * k, 0.9 * i + 0.4 * k, 0.1 * k)
    return out


def main():
    g = {}
    model = net()
    states = [state(model, k) for k in range(K + 1)]
    for k, sd in enumerate(states):
        for key, v in sd.items():
            g[f"model.{k}.{key}"] = v
    model.load_state_dict(states[0])
    averaged = {name: swa_utils.AveragedModel(model, **kw) for name, kw in AVERAGED.items()}
    for k in range(1, K + 1):
        model.load_state_dict(states[k])
        for name, avg in averaged.items():
            avg.update_parameters(model)
            for key, v in avg.module.state_dict().items():
                g[f"{name}.{k}.{key}"] = v.detach().clone()
            g[f"{name}.{k}.n_averaged"] = avg.n_averaged.detach().clone()

    swa = averaged["swa"]
    batches = [wave((6, 4), 1.5, 0.31 + 0.02 * i, 0.5 * i, 0.2) for i in range(4)]
    for i, x in enumerate(batches):
        g[f"bn.x.{i}"] = x
    swa.eval()
    swa_utils.update_bn(batches, swa)
    assert not swa.training and swa.module[1].momentum == 0.1
    for key in ("running_mean", "running_var", "num_batches_tracked"):
        g[f"bn.{key}"] = getattr(swa.module[1], key).detach().clone()
    probe = wave((5, 4), 1.0, 0.53, 0.1)
    g["bn.probe"] = probe
    with torch.no_grad():
        g["bn.out"] = swa(probe)

    g = {k: v.contiguous() for k, v in g.items()}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(g, OUT, metadata={"producer": "make_swa_golden.py", "torch": torch.__version__})
    print(f"wrote {len(g)} tensors to {os.path.normpath(OUT)} with torch {torch.__version__}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""weft against PyTorch training the same models on the CPU, in one run.

For each model (MLP 784-512-256-10, the reference CNN, and the row-by-row
LSTM classifier of examples/models.h: 28 steps of 28 pixels, hidden 128, the
last step into fc(128->10)), trains for a fixed
number of SGD-momentum steps at batch 128 on Fashion-MNIST, once with weft
(//bench:train_weft, a separate process) and once with PyTorch (a separate
process too, so each peak RSS is its own), with the same thread count, and
prints one line per model:
  <model>: weft=<img/s> torch=<img/s> img/s speedup=<weft/torch> (peak RSS weft=<MB> torch=<MB>)
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import CHILD_PRELUDE, last_json  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"

TORCH_CHILD = r'''
import gzip, json, sys, time
import numpy as np
import torch
import torch.nn as nn
model_name, steps, warmup, threads, batch, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
torch.set_num_threads(threads)
torch.manual_seed(0)
def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    shape = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * nd).reshape(shape)
x_all = torch.from_numpy(idx(data + "/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
y_all = torch.from_numpy(idx(data + "/train-labels-idx1-ubyte.gz").astype(np.int64))
class RowLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 128, batch_first=True)
        self.fc = nn.Linear(128, 10)
    def forward(self, x):
        out, _ = self.lstm(x.reshape(x.shape[0], 28, 28))
        return self.fc(out[:, -1])
if model_name == "mlp":
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
elif model_name == "lstm":
    model = RowLSTM()
else:
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
n = x_all.shape[0]
def step(s):
    start = (s * batch) % (n - batch)
    x, y = x_all[start:start + batch], y_all[start:start + batch]
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
for s in range(warmup):
    step(s)
t0 = time.perf_counter()
for s in range(steps):
    last = step(warmup + s)
secs = time.perf_counter() - t0
print(json.dumps({"model": model_name, "images_per_second": steps * batch / secs,
                  "peak_rss_mb": peak_rss_mb(),
                  "final_loss": last, "torch": torch.__version__, "threads": torch.get_num_threads()}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft-bin", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--models", default="mlp,cnn,lstm")
    args = ap.parse_args()
    import torch  # noqa: F401  (version line)
    print(f"peer: torch {torch.__version__}, threads={args.threads}, batch={args.batch}, steps={args.steps}", flush=True)
    for model in args.models.split(","):
        common = [str(args.steps), str(args.warmup), str(args.threads), str(args.batch)]
        w = last_json(subprocess.run([args.weft_bin, "--model", model, "--steps", common[0], "--warmup", common[1],
                                      "--threads", common[2], "--batch", common[3]],
                                     check=True, capture_output=True, text=True).stdout)
        t = last_json(subprocess.run([sys.executable, "-c", CHILD_PRELUDE + TORCH_CHILD, model] + common + [DATA],
                                     check=True, capture_output=True, text=True).stdout)
        print(f"{model}: weft={w['images_per_second']:.0f} torch={t['images_per_second']:.0f} img/s "
              f"speedup={w['images_per_second'] / t['images_per_second']:.2f} "
              f"(peak RSS weft={w['peak_rss_mb']:.0f}MB torch={t['peak_rss_mb']:.0f}MB)", flush=True)


if __name__ == "__main__":
    main()

"""PyTorch peer of bench/cnn_gpu_weft.cc: Fashion-MNIST CNN training steps
(SGD momentum 0.9, lr 0.01) at batch 256 on synthetic images on a GPU, eager mode.
Prints `images_per_s=<v>`."""
import argparse
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda:0")
p.add_argument("--batch", type=int, default=256)
p.add_argument("--steps", type=int, default=50)
p.add_argument("--warmup", type=int, default=10)
a = p.parse_args()

torch.manual_seed(0)
dev = torch.device(a.device)
# Same architecture as examples/models.h fashion_cnn().
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.rand(a.batch, 1, 28, 28, device=dev) * 2 - 1
y = torch.randint(0, 10, (a.batch,), device=dev)
loss_fn = nn.CrossEntropyLoss()


def step():
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


for _ in range(a.warmup):
    step()
torch.cuda.synchronize(dev)
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
torch.cuda.synchronize(dev)
secs = time.perf_counter() - t0
print(f"images_per_s={a.batch * a.steps / secs:.1f}")

# PyTorch peer of bench/conv_bench.cc: same layers and shapes, 2 threads, median ms.
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(int(__import__("os").environ.get("TORCH_THREADS", "2")))
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
N = 128


def t(f):
    f()
    ts = []
    for _ in range(reps):
        a = time.perf_counter()
        f()
        ts.append((time.perf_counter() - a) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


x = torch.rand(N, 1, 28, 28)
w1 = (torch.rand(32, 1, 3, 3) * 0.6 - 0.3).requires_grad_()
b1 = torch.zeros(32).requires_grad_()
h1 = torch.rand(N, 32, 14, 14).requires_grad_()
w2 = (torch.rand(64, 32, 3, 3) * 0.12 - 0.06).requires_grad_()
b2 = torch.zeros(64).requires_grad_()
p1 = torch.randn(N, 32, 28, 28).requires_grad_()
p2 = torch.randn(N, 64, 14, 14).requires_grad_()


def bw(y):
    y.backward(torch.ones_like(y))


def nograd(f):
    def g():
        with torch.no_grad():
            f()
    return g


c1f = t(nograd(lambda: F.conv2d(x, w1, b1, padding=1)))
c1 = t(lambda: bw(F.conv2d(x, w1, b1, padding=1)))
c2f = t(nograd(lambda: F.conv2d(h1, w2, b2, padding=1)))
c2 = t(lambda: bw(F.conv2d(h1, w2, b2, padding=1)))
m1f = t(nograd(lambda: F.max_pool2d(p1, 2)))
m2f = t(nograd(lambda: F.max_pool2d(p2, 2)))
m1 = t(lambda: bw(F.max_pool2d(p1, 2)))
m2 = t(lambda: bw(F.max_pool2d(p2, 2)))
print(f"torch conv1 fwd {c1f:.3f} ms  fwd+bwd {c1:.3f} ms")
print(f"torch conv2 fwd {c2f:.3f} ms  fwd+bwd {c2:.3f} ms")
print(f"torch pool1 fwd {m1f:.3f} ms  fwd+bwd {m1:.3f} ms  pool2 fwd {m2f:.3f} ms  fwd+bwd {m2:.3f} ms")
print(f"torch total {c1 + c2 + m1 + m2:.3f} ms")

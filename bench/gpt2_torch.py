"""PyTorch peer of bench/gpt2_weft.cc: a GPT-2-small-shaped training step (12
layers, d_model 768, 12 heads, context 1024, vocab 50257, learned position
embeddings, pre-norm blocks with fused qkv and GELU(tanh) MLP, final LayerNorm,
untied lm_head without bias), torch.autocast bfloat16 forward, AdamW (lr 3e-4,
default implementation), eager mode. Prints the same line as gpt2_weft:
  params=<N> tokens_per_s=<v> peak_bf16_tflops=<p> mfu=<m>
MFU = (6 N + 12 L d T) * tokens/s / peak, peak = measured 8192^3 bf16 matmul."""
import argparse
import sys
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda:0")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--peak-iters", type=int, default=20, help="8192^3 bf16 matmuls timed for the peak (0: none)")
a = p.parse_args()
V, T, L, C, H = 50257, 1024, a.layers, 768, 12


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, T_, _ = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T_, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T_, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = Attention()
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(approximate="tanh"), nn.Linear(4 * C, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.Sequential(*[Block() for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.lm_head(self.ln_f(self.h(self.wte(idx) + self.wpe(pos))))


def bf16_peak(dev, n=8192, iters=20):
    x = torch.rand(n, n, device=dev, dtype=torch.bfloat16) - 0.5
    y = torch.rand(n, n, device=dev, dtype=torch.bfloat16) - 0.5
    for _ in range(3):
        x @ y
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        x @ y
    torch.cuda.synchronize(dev)
    return 2 * n ** 3 * iters / (time.perf_counter() - t0) / 1e12


torch.manual_seed(0)
dev = torch.device(a.device)
model = GPT2().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
data = torch.randint(0, V, (a.batch, T + 1), device=dev)
idx, target = data[:, :T].contiguous(), data[:, 1:].contiguous()


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, V).float(), target.view(-1))
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
tok_s = a.batch * T * a.steps / (time.perf_counter() - t0)
n_params = sum(p.numel() for p in model.parameters())
flops_per_token = 6 * n_params + 12 * L * C * T
if a.peak_iters <= 0:
    print(f"params={n_params} tokens_per_s={tok_s:.1f}")
    sys.exit(0)
peak = bf16_peak(dev, iters=a.peak_iters)
print(f"params={n_params} tokens_per_s={tok_s:.1f} peak_bf16_tflops={peak:.1f} "
      f"mfu={flops_per_token * tok_s / (peak * 1e12):.4f}")

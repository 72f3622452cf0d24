#!/usr/bin/env python3
"""weft against PyTorch training the same GPT on the CPU, in one run.

For each workload (the GPT example's model: byte vocabulary 256, context 256,
width 384, 6 heads, tied head, no dropout; 6 layers, about 10.7 M parameters,
and 12 layers), //bench:gpt_weft writes its initial weights and a fixed batch of
8 rows (safetensors) and trains a fixed number of AdamW steps with gradient
clipping at 1.0; then PyTorch, in its own process, loads the same weights and
tokens and trains the same steps with the same thread count. Each side's peak
RSS is its own process's. Prints one line per workload:
  <workload>: weft=<tokens/s> torch=<tokens/s> tokens/s speedup=<weft/torch>
      (peak RSS weft=<MB> torch=<MB>; max |loss difference| over <n> steps=<d>)
The loss difference is the check that both trained the same model: from the
same weights and data, each step's loss should agree to float32 rounding.
--precisions fp32,bf16 (the default) adds, per workload, a line for bfloat16
autocast on both sides (<workload>_bf16): weft's --amp bf16 against
torch.autocast("cpu", dtype=torch.bfloat16), float32 weights and optimizer
state on both; their losses agree to bfloat16 rounding, not float32's.
With --repeat N > 1 each line is printed N times (weft and torch alternated),
then once per row a summary: the median speedup and the range,
  <workload>: median speedup=<m> over N runs (range <lo> - <hi>)
since on a shared machine single runs of either side move by several per cent.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import CHILD_PRELUDE, last_json  # noqa: E402

TORCH_CHILD = r'''
import json, struct, sys, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
path, layers, dim, heads, context, steps, warmup, threads = sys.argv[1], *map(int, sys.argv[2:9])
amp = sys.argv[9] == "bf16"
torch.set_num_threads(threads)

def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(raw, dtype=dtypes[info["dtype"]], offset=8 + n + a, count=(b - a) // np.dtype(dtypes[info["dtype"]]).itemsize)
        out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return out

class Embedding(nn.Module):
    def __init__(self, vocab, context, dim):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.drop = nn.Dropout(0.0)
    def forward(self, idx):
        return self.drop(self.tok(idx) + self.pos(torch.arange(idx.shape[1])))

class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim), nn.Dropout(0.0))
    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

class Head(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight
    def forward(self, x):
        return F.linear(x, self.weight)

emb = Embedding(256, context, dim)
model = nn.Sequential(emb, *[Block(dim, heads) for _ in range(layers)], nn.LayerNorm(dim), Head(emb.tok.weight))
state = load_safetensors(path)
tokens = state.pop("tokens")
result = model.load_state_dict(state, strict=False)
assert not result.unexpected_keys, result.unexpected_keys
assert result.missing_keys == [f"{layers + 2}.weight"], result.missing_keys  # the tied head
idx, target = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
params = list(model.parameters())
opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.01)
losses = []
def step():
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        logits = model(idx)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    losses.append(loss.item())
for _ in range(warmup):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
secs = time.perf_counter() - t0
print(json.dumps({"tokens_per_second": steps * idx.numel() / secs,
                  "peak_rss_mb": peak_rss_mb(),
                  "params": sum(p.numel() for p in params), "threads": torch.get_num_threads(),
                  "torch": torch.__version__, "losses": losses}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft-bin", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", default="6,12", help="one workload per layer count")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=1, help="alternate weft and torch this many times per workload")
    ap.add_argument("--precisions", default="fp32,bf16", help="fp32 and/or bf16 (autocast) rows per workload")
    args = ap.parse_args()
    import torch  # noqa: F401  (version line)
    print(f"peer: torch {torch.__version__}, threads={args.threads}, batch={args.batch}, context={args.context}, "
          f"dim={args.dim}, heads={args.heads}, steps={args.steps} (+{args.warmup} warm-up)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for layers in [int(x) for x in args.layers.split(",")]:
            init = os.path.join(tmp, f"gpt_{layers}.safetensors")
            shape = [str(layers), str(args.dim), str(args.heads), str(args.context)]
            common = [str(args.steps), str(args.warmup), str(args.threads)]
            ratios = {}  # row name -> speedups of its runs
            for precision, _ in [(p, r) for p in args.precisions.split(",") for r in range(args.repeat)]:
                if precision not in ("fp32", "bf16"):
                    sys.exit(f"gpt_vs_torch: --precisions takes fp32 and bf16, got {precision!r}")
                amp = "bf16" if precision == "bf16" else "none"
                w = last_json(subprocess.run(
                    [args.weft_bin, "--layers", shape[0], "--dim", shape[1], "--heads", shape[2], "--context", shape[3],
                     "--batch", str(args.batch), "--steps", common[0], "--warmup", common[1], "--threads", common[2],
                     "--init", init, "--amp", amp], check=True, capture_output=True, text=True).stdout)
                t = last_json(subprocess.run(
                    [sys.executable, "-c", CHILD_PRELUDE + TORCH_CHILD, init] + shape + common + [amp],
                    check=True, capture_output=True, text=True).stdout)
                if w["params"] != t["params"]:
                    sys.exit(f"gpt_vs_torch: parameter counts differ: weft {w['params']}, torch {t['params']}")
                diff = max(abs(a - b) for a, b in zip(w["losses"], t["losses"]))
                name = f"gpt_{layers}x{args.dim}" + ("_bf16" if precision == "bf16" else "")
                print(f"{name}: weft={w['tokens_per_second']:.0f} torch={t['tokens_per_second']:.0f} tokens/s "
                      f"speedup={w['tokens_per_second'] / t['tokens_per_second']:.2f} "
                      f"(peak RSS weft={w['peak_rss_mb']:.0f}MB torch={t['peak_rss_mb']:.0f}MB; "
                      f"{w['params'] / 1e6:.2f}M params; max |loss difference| over {len(w['losses'])} steps="
                      f"{diff:.2e}, last loss {w['losses'][-1]:.4f})", flush=True)
                ratios.setdefault(name, []).append(w["tokens_per_second"] / t["tokens_per_second"])
            for name, r in ratios.items():
                if len(r) > 1:
                    print(f"{name}: median speedup={statistics.median(r):.2f} over {len(r)} runs "
                          f"(range {min(r):.2f} - {max(r):.2f})", flush=True)


if __name__ == "__main__":
    main()

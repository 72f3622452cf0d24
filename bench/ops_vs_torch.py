"""weft vs PyTorch on the same CPU workloads, with the same thread count.

Run through ./bazelw run //bench:ops_vs_torch (bench/ops_vs_torch.sh finds or
installs torch). Runs the weft timing binary (bench/ops_weft.cc; JSON lines) and
the equivalent torch code, each with warm-up and the median of several timed
repetitions, and prints one line per workload:
  <workload>: weft=<value> torch=<value> <unit> speedup=<weft/torch>
Units are higher-is-better (GFLOP/s, GB/s), so speedup > 1 means weft is faster.
With --rounds R (R > 1) weft and torch take turns R times (weft's binary, then
torch, then weft's again, ...): values are the medians over the rounds, speedup
the median of the rounds' own ratios, and `rounds=lo..hi` gives their range. On
a host whose neighbours' load moves, one round can read far off the next.
Work counts match bench/bench_util.h: sgemm 2 N^3 flops; bgemm_fc1 and
bgemm_fc1_wgrad, bfloat16 matmuls at the GPT benchmark's MLP sizes (x W^T with
x (2048, 384) and W (1536, 384); g^T x with g (2048, 1536)), 2 T C 4C flops;
add 3 arrays of 2^24 floats moved; softmax reads and writes a (4096, 4096)
float32 array; attention_gpt and attention_gpt_bf16 are one layer of the GPT
benchmark's causal self-attention forward + backward (batch 8, 6 heads, 256
tokens, head dim 64; q, k, v views of one (B, T, 3C) tensor; float32, or
bfloat16 as CPU autocast passes it), 12 B H T^2 D flops (the full products,
not causally halved) -- F.scaled_dot_product_attention on the torch side.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

GEMM_N = 1024
ADD_N = 1 << 24
SM_ROWS, SM_COLS = 4096, 4096
F32 = 4
BG_T, BG_C, BG_H = 2048, 384, 1536  # bfloat16 matmuls at the GPT benchmark's MLP sizes
AT_B, AT_T, AT_H, AT_D = 8, 256, 6, 64  # the GPT benchmark's attention

WORKLOADS = [
    # name, unit, work per call (flops or bytes)
    ("sgemm_1024", "GFLOP/s", 2.0 * GEMM_N ** 3),
    ("bgemm_fc1", "GFLOP/s", 2.0 * BG_T * BG_C * BG_H),
    ("bgemm_fc1_wgrad", "GFLOP/s", 2.0 * BG_T * BG_C * BG_H),
    ("add_large", "GB/s", 3.0 * ADD_N * F32),
    ("softmax_4096", "GB/s", 2.0 * SM_ROWS * SM_COLS * F32),
    ("attention_gpt", "GFLOP/s", 12.0 * AT_B * AT_H * AT_T * AT_T * AT_D),
    ("attention_gpt_bf16", "GFLOP/s", 12.0 * AT_B * AT_H * AT_T * AT_T * AT_D),
]


def filled(torch, shape, lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g, dtype=torch.float32) * (hi - lo) + lo


def torch_runs(torch):
    a = filled(torch, (GEMM_N, GEMM_N), -1, 1, 1)
    b = filled(torch, (GEMM_N, GEMM_N), -1, 1, 2)
    x = filled(torch, (ADD_N,), -1, 1, 3)
    y = filled(torch, (ADD_N,), -1, 1, 4)
    s = filled(torch, (SM_ROWS, SM_COLS), -3, 3, 5)
    bx = filled(torch, (BG_T, BG_C), -1, 1, 6).bfloat16()  # (T, C)
    bw = filled(torch, (BG_H, BG_C), -1, 1, 7).bfloat16()  # (4C, C)
    bg = filled(torch, (BG_T, BG_H), -1, 1, 8).bfloat16()  # (T, 4C)
    def attention(dtype, seed):
        c = AT_H * AT_D
        qkv = filled(torch, (AT_B, AT_T, 3 * c), -1, 1, seed).to(dtype).requires_grad_()  # (B, T, 3C)
        g = filled(torch, (AT_B, AT_H, AT_T, AT_D), -1, 1, seed + 1).to(dtype)  # (B, H, T, D)

        def heads(t):
            return t.reshape(AT_B, AT_T, AT_H, AT_D).transpose(1, 2)

        def run():
            with torch.enable_grad():  # the timing loop runs under no_grad
                q, k, v = qkv.split(c, dim=2)
                y = torch.nn.functional.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
                y.backward(g)
                qkv.grad = None
            return y

        return run

    return {
        "attention_gpt": attention(torch.float32, 9),
        "attention_gpt_bf16": attention(torch.bfloat16, 9),
        "sgemm_1024": lambda: torch.matmul(a, b),
        "bgemm_fc1": lambda: torch.matmul(bx, bw.t()),
        "bgemm_fc1_wgrad": lambda: torch.matmul(bg.t(), bx),
        "add_large": lambda: torch.add(x, y),
        "softmax_4096": lambda: torch.softmax(s, dim=-1),
    }


def time_torch(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        t1 = time.perf_counter()
        del out  # free outside the timed region, like ops_weft
        ms.append((t1 - t0) * 1e3)
    return statistics.median(ms)


def run_weft(weft_bin, threads, warmup, reps, names):
    cmd = [weft_bin, "--threads", str(threads), "--warmup", str(warmup), "--reps", str(reps),
           "--only", ",".join(names)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    results = {}
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            results[r.get("workload")] = r
    if proc.returncode != 0:
        sys.stderr.write(f"ops_vs_torch: {weft_bin} exited with {proc.returncode}\n{proc.stderr}")
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft-bin", required=True, help="path to the ops_weft binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both (default: cores)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--rounds", type=int, default=1, help="weft and torch take turns this many times")
    args = ap.parse_args()

    names = [w[0] for w in WORKLOADS]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]

    # weft first, in its own process, so the two never compete for cores.
    rounds = max(1, args.rounds)
    weft_rounds = [run_weft(args.weft_bin, args.threads, args.warmup, args.reps, names)]

    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch  # after OMP_NUM_THREADS, so its pools start at the right size

    torch.set_num_threads(args.threads)
    runs = torch_runs(torch)
    blas = ""
    try:
        cfg = torch.__config__.show()
        m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
        blas = f"BLAS={m.group(1)}" if m else ""
    except Exception:  # noqa: BLE001 (informational only)
        pass
    print(f"torch {torch.__version__} ({os.path.dirname(os.path.dirname(torch.__file__))}) {blas}; "
          f"threads={args.threads} (torch.get_num_threads()={torch.get_num_threads()}) on "
          f"{platform.machine()} with {os.cpu_count()} cores; median of {args.reps} after {args.warmup} warm-up"
          + (f"; {rounds} rounds, weft and torch in turn" if rounds > 1 else ""))

    torch_rounds = []
    with torch.no_grad():
        for r in range(rounds):
            if r > 0:
                weft_rounds.append(run_weft(args.weft_bin, args.threads, args.warmup, args.reps, names))
            torch_rounds.append({name: work * 1e-9 / (time_torch(runs[name], args.warmup, args.reps) * 1e-3)
                                 for name, unit, work in WORKLOADS if name in names})

    failed = False
    for name, unit, work in WORKLOADS:
        if name not in names:
            continue
        torch_vals = [t[name] for t in torch_rounds]
        torch_val = statistics.median(torch_vals)
        missing = [w.get(name, {}) for w in weft_rounds if "value" not in w.get(name, {})]
        if missing:
            failed = True
            why = missing[0].get("error", "no result from ops_weft")
            print(f"{name}: weft=n/a torch={torch_val:.2f} {unit} speedup=n/a ({why})")
            continue
        weft_vals = [float(w[name]["value"]) for w in weft_rounds]
        ratios = [wv / tv for wv, tv in zip(weft_vals, torch_vals)]
        spread = f" rounds={min(ratios):.2f}..{max(ratios):.2f}" if rounds > 1 else ""
        print(f"{name}: weft={statistics.median(weft_vals):.2f} torch={torch_val:.2f} {unit} "
              f"speedup={statistics.median(ratios):.2f}{spread}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""weft pipeline parallelism against torch.distributed.pipelining (gloo), CPU.

Both train the same deep MLP (L blocks of Linear HxH + ReLU, default L=16,
H=1024) split evenly over N ranks (default 2) with one thread each, a batch of
B rows (default 64) as M micro-batches (default 8), MSE loss on a fixed
synthetic batch, plain SGD, no activation checkpointing; each side times the
same number of steps after a warm-up. weft runs //bench:pipe_weft under
mpirun; torch runs PipelineStage + the same schedule under
torch.multiprocessing.spawn: ScheduleGPipe, Schedule1F1B,
ScheduleInterleaved1F1B and ScheduleInterleavedZeroBubble (2 looped stages
per rank) and ScheduleZBVZeroBubble (2 stages per rank in a V). Prints, per
schedule both have:
  pipe_mlp_<schedule>: weft=<steps/s> torch=<steps/s> steps/s speedup=<weft/torch>
and for weft's ZB-H1 (zb, one stage per rank: torch has no such schedule)
  pipe_mlp_<schedule>: weft=<steps/s> steps/s
then per schedule the peak resident memory of the largest rank on each side
and weft's measured step time against the simulator's prediction from the
last step's measured action times.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import free_port, last_json  # noqa: E402

TORCH_CHILD = r'''
import json, os, resource, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B,
                                          ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble)

# weft's schedule -> (torch's schedule class, stages per rank, placement)
KINDS = {"gpipe": (ScheduleGPipe, 1, "loop"), "1f1b": (Schedule1F1B, 1, "loop"),
         "interleaved": (ScheduleInterleaved1F1B, 2, "loop"),
         "interleaved-zb": (ScheduleInterleavedZeroBubble, 2, "loop"), "zbv": (ScheduleZBVZeroBubble, 2, "v")}

def worker(rank, world, port, schedule, steps, warmup, batch, hidden, layers, micro, q):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [nn.Linear(hidden, hidden), nn.ReLU()]
    kind, v, placement = KINDS[schedule]
    n_stages = world * v
    per = len(blocks) // n_stages
    # Stage ids of this rank: looped (r, r + p, ...) or V (r and 2p - 1 - r).
    ids = [rank, 2 * world - 1 - rank] if placement == "v" else [rank + k * world for k in range(v)]
    mods = [nn.Sequential(*blocks[i * per:(i + 1) * per]) for i in ids]
    stages = [PipelineStage(m, i, n_stages, torch.device("cpu")) for m, i in zip(mods, ids)]
    loss_fn = lambda out, t: nn.functional.mse_loss(out, t)
    sched = kind(stages[0] if v == 1 else stages, n_microbatches=micro, loss_fn=loss_fn)
    opt = torch.optim.SGD([p for m in mods for p in m.parameters()], lr=0.01)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, hidden, generator=g)
    y = torch.randn(batch, hidden, generator=g)
    first, last = 0 in ids, n_stages - 1 in ids
    def step():
        opt.zero_grad()
        losses = []
        sched.step(*([x] if first else []), **({"target": y, "losses": losses} if last else {}))
        opt.step()
        return sum(l.item() for l in losses) / max(len(losses), 1)
    for _ in range(warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    dist.barrier()
    secs = time.perf_counter() - t0
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0], dtype=torch.float64)
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if last:
        q.put({"steps_per_second": steps / secs, "final_loss": loss, "peak_rss_mib": rss.item(),
               "torch": torch.__version__})
    dist.destroy_process_group()

if __name__ == "__main__":
    a = sys.argv
    world, port = int(a[1]), int(a[2])
    schedule = a[3]
    steps, warmup, batch, hidden, layers, micro = (int(v) for v in a[4:10])
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(worker, args=(world, port, schedule, steps, warmup, batch, hidden, layers, micro, q), nprocs=world,
             join=True)
    print(json.dumps(q.get()))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft-bin", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--schedules", default="gpipe,1f1b,interleaved,zb,interleaved-zb,zbv")
    args = ap.parse_args()
    import torch
    print(f"peer: torch {torch.__version__} (gloo, torch.distributed.pipelining), ranks={args.np} x 1 thread, "
          f"MLP {args.layers} x (Linear {args.hidden}x{args.hidden} + ReLU), batch {args.batch} as "
          f"{args.microbatches} micro-batches, steps={args.steps}", flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup), "--batch", str(args.batch), "--hidden",
              str(args.hidden), "--layers", str(args.layers), "--microbatches", str(args.microbatches)]
    details = []
    with tempfile.TemporaryDirectory() as tmp:
        child = os.path.join(tmp, "pipe_torch_peer.py")  # spawn re-imports the main module: run from a file
        with open(child, "w") as f:
            f.write(TORCH_CHILD)
        for schedule in args.schedules.split(","):
            r = subprocess.run([args.mpirun, "-np", str(args.np), args.weft_bin, "--schedule", schedule, "--threads",
                                "1"] + common, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                lines = [l for l in r.stderr.splitlines() if "error:" in l] or r.stderr.strip().splitlines() or ["?"]
                err = lines[0]
                print(f"pipe_mlp_{schedule}: weft did not run: {err}", flush=True)
                continue
            w = last_json(r.stdout)
            if schedule in ("gpipe", "1f1b", "interleaved", "interleaved-zb", "zbv"):
                t = last_json(subprocess.run(
                    [sys.executable, child, str(args.np), str(free_port()), schedule, str(args.steps),
                     str(args.warmup), str(args.batch), str(args.hidden), str(args.layers), str(args.microbatches)],
                    check=True, capture_output=True, text=True, env=env).stdout)
                print(f"pipe_mlp_{schedule}: weft={w['steps_per_second']:.2f} torch={t['steps_per_second']:.2f} "
                      f"steps/s speedup={w['steps_per_second'] / t['steps_per_second']:.2f}", flush=True)
                mem = f"peak RSS weft {w['peak_rss_mib']:.0f} MiB, torch {t['peak_rss_mib']:.0f} MiB"
            else:
                print(f"pipe_mlp_{schedule}: weft={w['steps_per_second']:.2f} steps/s", flush=True)
                mem = f"peak RSS weft {w['peak_rss_mib']:.0f} MiB"
            details.append(f"  {w['schedule']}: {mem}; step {w['step_ms']:.1f} ms measured, "
                           f"{w['simulated_makespan_ms']:.1f} ms simulated from the last step's action times "
                           f"(measured/simulated {w['step_ms'] / w['simulated_makespan_ms']:.2f}, simulated bubble "
                           f"{100 * w['simulated_bubble']:.1f}%; trace span {w['trace_span_ms']:.1f} ms)")
    for line in details:
        print(line, flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""weft DDP against PyTorch DDP (gloo backend) on the CPU, in one run.

Both train an MLP 784-H-H-10 (default H=2048: about 23 MB of float32
gradients, several buckets at a 4 MB cap on both sides) with SGD momentum on a
fixed synthetic batch per rank, N ranks (default 2) with one thread each, and
time the same number of steps after a warm-up. weft runs //bench:ddp_weft
under mpirun; torch runs torch.multiprocessing.spawn with MASTER_ADDR=127.0.0.1.
Prints:
  ddp_mlp: weft=<steps/s> torch=<steps/s> steps/s speedup=<weft/torch>
  overlap=<fraction of weft's allreduce time hidden behind backward> ...
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import free_port, last_json  # noqa: E402

TORCH_CHILD = r'''
import json, os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

def worker(rank, world, port, steps, warmup, batch, hidden, cap, q):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(batch, 784, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    def step():
        loss = nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    for _ in range(warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        last = step()
    final = last.item()
    dist.barrier()
    secs = time.perf_counter() - t0
    if rank == 0:
        q.put({"steps_per_second": steps / secs, "final_loss": final, "torch": torch.__version__,
               "threads": torch.get_num_threads()})
    dist.destroy_process_group()

if __name__ == "__main__":
    world, port, steps, warmup, batch, hidden, cap = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                                      int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
                                                      float(sys.argv[7]))
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(worker, args=(world, port, steps, warmup, batch, hidden, cap, q), nprocs=world, join=True)
    print(json.dumps(q.get()))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft-bin", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="per-rank batch")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--bucket-cap-mb", type=float, default=4)
    args = ap.parse_args()
    import torch
    print(f"peer: torch {torch.__version__} (gloo), ranks={args.np} x 1 thread, MLP 784-{args.hidden}-"
          f"{args.hidden}-10, batch {args.batch}/rank, steps={args.steps}, bucket cap {args.bucket_cap_mb} MB",
          flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    w = last_json(subprocess.run(
        [args.mpirun, "-np", str(args.np), args.weft_bin, "--steps", str(args.steps), "--warmup", str(args.warmup),
         "--batch", str(args.batch), "--hidden", str(args.hidden), "--threads", "1",
         "--bucket-cap-mb", str(args.bucket_cap_mb)], check=True, capture_output=True, text=True, env=env).stdout)
    # spawn re-imports the main module, so the peer runs from a file, not -c.
    with tempfile.TemporaryDirectory() as tmp:
        child = os.path.join(tmp, "ddp_torch_peer.py")
        with open(child, "w") as f:
            f.write(TORCH_CHILD)
        t = last_json(subprocess.run(
            [sys.executable, child, str(args.np), str(free_port()), str(args.steps), str(args.warmup),
             str(args.batch), str(args.hidden), str(args.bucket_cap_mb)],
            check=True, capture_output=True, text=True, env=env).stdout)
    print(f"ddp_mlp: weft={w['steps_per_second']:.2f} torch={t['steps_per_second']:.2f} steps/s "
          f"speedup={w['steps_per_second'] / t['steps_per_second']:.2f}", flush=True)
    print(f"overlap={w['overlap']:.2f} (weft: {w['buckets']} buckets, allreduce window "
          f"{w['comm_window_ms']:.1f} ms/step, {w['blocked_ms']:.1f} ms/step waited after backward)", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""weftrun: run a weft program under mpirun and restart it from its latest
committed checkpoint when it fails or is preempted (torchrun's
--max-restarts, for mpirun jobs).

  weftrun --np 4 [--max-restarts 3] [--mpirun "mpirun --oversubscribe"] [--log FILE] \
      -- PROGRAM ARGS... --save DIR ...

Contract:
- Each attempt runs `MPIRUN -np N PROGRAM ARGS`. The checkpoint directory is
  the program's own `--save DIR`; when DIR holds a committed checkpoint
  (a step-<N> directory with its manifest.json, the commit mark of
  parallel/checkpoint), the attempt gets `--resume DIR` (replacing a
  `--resume` of the command line), so the program continues from the
  newest one. Without --save, a restart starts over (weftrun says so).
- Exit status 0: done, weftrun exits 0. Status 75 (train::kResumeExitCode,
  a preempted run that saved and asks to be resumed): resumed at once, not
  counted as a failure. Any other status is a failure: weftrun reports it
  (the status, the lines of the output that name a rank, a node or an
  error, the last step the output showed, the step it resumes from and the
  steps lost between them) and restarts while fewer than --max-restarts
  failures happened; then it exits with the last status.
- The program's standard output and error pass through unchanged; weftrun's
  own lines go to standard error, each starting "weftrun: ".
- --log FILE appends one JSON object per attempt: attempt, status, outcome
  ("finished", "preempted", "failed"), resumed_from (step or null),
  last_step (the largest "step N" the output showed, or null),
  checkpoint_after (the newest committed step after the attempt), lost
  (last_step - checkpoint_after when positive: a lower bound, the output
  shows only some steps), reasons (the reported lines), seconds.
- Interrupted itself (SIGINT, SIGTERM), weftrun passes the signal on to the
  running attempt and stops restarting.
"""
import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

RESUME_EXIT = 75
STEP_RE = re.compile(r"\bstep (\d+)\b")
STEP_DIR_RE = re.compile(r"^step-(\d+)$")
REASON_RE = re.compile(r"error|rank \d|ranks \[|node |signal|stopped responding|killed|exited on", re.IGNORECASE)


def say(msg):
    print(f"weftrun: {msg}", file=sys.stderr, flush=True)


def save_dir_of(args):
    for i, a in enumerate(args):
        if a == "--save" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--save="):
            return a[len("--save="):]
    return None


def latest_committed(root):
    """(step, path) of the newest step-<N> directory with a manifest.json, or None."""
    if not root or not os.path.isdir(root):
        return None
    best = None
    for name in os.listdir(root):
        m = STEP_DIR_RE.match(name)
        path = os.path.join(root, name)
        if m and os.path.isfile(os.path.join(path, "manifest.json")):
            step = int(m.group(1))
            if best is None or step > best[0]:
                best = (step, path)
    return best


def with_resume(args, root):
    """args with --resume ROOT (any --resume given is replaced)."""
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "--resume":
            skip = True
            continue
        if a.startswith("--resume="):
            continue
        out.append(a)
    return out + ["--resume", root]


class Attempt:
    """One mpirun; passes its output through and keeps what the report needs."""

    def __init__(self, cmd):
        self.last_step = None
        self.reasons = []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        self.threads = [threading.Thread(target=self.pump, args=(self.proc.stdout, sys.stdout.buffer)),
                        threading.Thread(target=self.pump, args=(self.proc.stderr, sys.stderr.buffer))]
        for t in self.threads:
            t.start()

    def pump(self, src, dst):
        for raw in iter(src.readline, b""):
            dst.write(raw)
            dst.flush()
            line = raw.decode("utf-8", "replace").strip()
            for piece in line.split("\r"):
                for m in STEP_RE.finditer(piece):
                    s = int(m.group(1))
                    self.last_step = s if self.last_step is None else max(self.last_step, s)
            if REASON_RE.search(line) and len(self.reasons) < 6 and line not in self.reasons:
                self.reasons.append(line[:300])

    def wait(self):
        status = self.proc.wait()
        for t in self.threads:
            t.join()
        return status


def main():
    ap = argparse.ArgumentParser(
        prog="weftrun", description="run a weft program under mpirun, restarting it from its checkpoints")
    ap.add_argument("--np", type=int, required=True, help="ranks")
    ap.add_argument("--max-restarts", type=int, default=3, help="failures to restart after (default 3)")
    ap.add_argument("--mpirun", default="mpirun", help="the mpirun command, with its own options (default mpirun)")
    ap.add_argument("--log", help="append one JSON line per attempt to this file")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no program given (weftrun ... -- PROGRAM ARGS...)")
    if a.np < 1:
        ap.error(f"--np must be positive (got {a.np})")
    if a.max_restarts < 0:
        ap.error(f"--max-restarts must be >= 0 (got {a.max_restarts})")
    root = save_dir_of(cmd)
    if root is None:
        say("the program has no --save DIR: a restart starts over")
    mpirun = shlex.split(a.mpirun)

    current = {"attempt": None}
    stopping = {"signal": None}

    def forward(sig, _frame):
        stopping["signal"] = sig
        at = current["attempt"]
        if at and at.proc.poll() is None:
            at.proc.send_signal(sig)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)

    failures, attempt_no, status = 0, 0, 1
    while True:
        attempt_no += 1
        resume = latest_committed(root)
        args = with_resume(cmd[1:], root) if resume else cmd[1:]
        say(f"attempt {attempt_no}: {' '.join(mpirun)} -np {a.np} {cmd[0]}"
            + (f" (resuming from {resume[1]}, step {resume[0]})" if resume else ""))
        start = time.monotonic()
        at = Attempt(mpirun + ["-np", str(a.np), cmd[0]] + args)
        current["attempt"] = at
        status = at.wait()
        seconds = time.monotonic() - start
        outcome = "finished" if status == 0 else "preempted" if status == RESUME_EXIT else "failed"
        after = latest_committed(root)
        lost = None
        if at.last_step is not None:
            lost = max(0, at.last_step - (after[0] if after else 0))
        record = {"attempt": attempt_no, "status": status, "outcome": outcome,
                  "resumed_from": resume[0] if resume else None, "last_step": at.last_step,
                  "checkpoint_after": after[0] if after else None, "lost": lost, "reasons": at.reasons,
                  "seconds": round(seconds, 3)}
        if a.log:
            with open(a.log, "a") as f:
                f.write(json.dumps(record) + "\n")
        if outcome == "finished":
            say(f"attempt {attempt_no} finished ({failures} failure{'s' if failures != 1 else ''} restarted)")
            return 0
        if stopping["signal"] is not None:
            say(f"stopped by signal {stopping['signal']}; not restarting (exit status {status})")
            return status
        if outcome == "preempted":
            say(f"attempt {attempt_no} was preempted and saved at step "
                f"{after[0] if after else '?'}: resuming")
            continue
        failures += 1
        say(f"attempt {attempt_no} failed with exit status {status} after {seconds:.1f} s"
            + (f"; its output last showed step {at.last_step}" if at.last_step is not None else ""))
        for line in at.reasons:
            say(f"  {line}")
        if after:
            shown = (f"{lost} steps past it lost" if lost else "no step past it shown in the output")
            say(f"  the newest committed checkpoint is step {after[0]} ({after[1]}): {shown}")
        else:
            say("  no committed checkpoint: a restart starts over")
        if failures > a.max_restarts:
            say(f"giving up after {failures} failures (--max-restarts {a.max_restarts}); exit status {status}")
            return status if status > 0 else 1
        say(f"restarting ({failures} of {a.max_restarts} restarts)")


if __name__ == "__main__":
    sys.exit(main())

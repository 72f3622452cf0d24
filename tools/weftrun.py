#!/usr/bin/env python3
"""weftrun: run a weft program under mpirun and restart it from its latest
committed checkpoint when it fails or is preempted (torchrun's
--max-restarts, for mpirun jobs).

  weftrun --np 4 [--max-restarts 3] [--mpirun "mpirun --oversubscribe"] [--log FILE] \
      [--hostfile FILE [--min-ranks K] [--probe-timeout S]] -- PROGRAM ARGS... --save DIR ...

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
- --hostfile FILE (Open MPI's syntax: "HOST [slots=N]" per line, N 1 when
  left out, # comments): weftrun keeps the list of hosts itself and hands
  each attempt a hostfile of the hosts still in it (`--hostfile`, so the
  --mpirun options must not name one).
- --min-ranks K (with --hostfile): after a failure weftrun probes every host
  of the list (`MPIRUN --host HOST:1 -np 1 true`, at most --probe-timeout
  seconds, default 20) and drops those that do not answer, reporting each
  with the first line its probe printed. When the hosts left have fewer slots than the
  run has ranks, it restarts smaller, on every slot left (never more ranks
  than --np) and with a layout that fits (choose_layout: the program's
  --pp kept and --dp reduced, or one pipeline over every rank left when
  not even one fits), rewriting the program's --pp and --dp; fewer than K
  ranks left, it gives up. Checkpoints are layout-free: the restart loads
  the newest one whatever its layout. Without --min-ranks a failure
  restarts on the same hosts and ranks.
- Each attempt's log line also has np, pp and dp (null when the program
  has no such flag), hosts (the list it ran on) and lost_hosts (those the
  probes after it dropped).
"""
import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

RESUME_EXIT = 75
STEP_RE = re.compile(r"\bstep (\d+)\b")
STEP_DIR_RE = re.compile(r"^step-(\d+)$")
REASON_RE = re.compile(r"error|rank \d|ranks \[|node |signal|stopped responding|killed|exited on|daemon",
                       re.IGNORECASE)


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


def read_hostfile(path):
    """[(host, slots)] from an Open MPI hostfile."""
    hosts = []
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            slots = 1
            for p in parts[1:]:
                m = re.fullmatch(r"slots=(\d+)", p)
                if not m or int(m.group(1)) < 1:
                    raise ValueError(f"{path} line {n}: expected 'HOST [slots=N]' with N >= 1, got {line!r}")
                slots = int(m.group(1))
            hosts.append((parts[0], slots))
    if not hosts:
        raise ValueError(f"{path}: no hosts")
    return hosts


def flag_value(args, name):
    """The int value of --name in args (--name V or --name=V), or None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith(name + "="):
            return int(a[len(name) + 1:])
    return None


def with_flag(args, name, value):
    """args with --name set to value (replaced where given, else appended)."""
    out, skip, done = [], False, False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == name and i + 1 < len(args):
            out += [name, str(value)]
            skip, done = True, True
        elif a.startswith(name + "="):
            out += [name, str(value)]
            done = True
        else:
            out.append(a)
    return out if done else out + [name, str(value)]


def choose_layout(np_max, pp, slots):
    """(ranks, pp, dp) for a restart on `slots` free slots of a run of at most np_max ranks with
    pipeline depth pp (None: no pipeline). The pipeline is kept and data parallelism reduced: dp =
    min(np_max, slots) // pp; when not even one pipeline fits, one pipeline over every rank left
    (pp = that many, dp = 1: checkpoints are layout-free). Without --pp, every rank left."""
    n = min(np_max, slots)
    if pp is None:
        return n, None, None
    if n >= pp:
        dp = n // pp
        return pp * dp, pp, dp
    return n, n, 1


def probe_hosts(mpirun, hosts, timeout):
    """The hosts that do not run `true` within `timeout` seconds, as [(host, slots)]; each is
    reported with the first line its probe printed."""
    lost = []
    for h, n in hosts:
        try:
            r = subprocess.run(mpirun + ["--host", f"{h}:1", "-np", "1", "true"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout)
            if r.returncode == 0:
                continue
            lines = [l.strip() for l in r.stdout.decode("utf-8", "replace").splitlines() if l.strip("- \t")]
            why = f"exit status {r.returncode}" + (f": {lines[0][:200]}" if lines else "")  # mpirun's headline
        except subprocess.TimeoutExpired:
            why = f"no answer within {timeout:g} s"
        say(f"host {h} ({n} slot{'s' if n != 1 else ''}) is lost: the probe gave {why}")
        lost.append((h, n))
    return lost


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
    ap.add_argument("--hostfile", help="the hosts (Open MPI hostfile); weftrun hands mpirun those still up")
    ap.add_argument("--min-ranks", type=int, default=0,
                    help="with --hostfile: after a failure drop the hosts that do not answer and restart on "
                         "those left, with a layout that fits, while they hold at least this many ranks")
    ap.add_argument("--probe-timeout", type=float, default=20, help="seconds a host has to answer (default 20)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no program given (weftrun ... -- PROGRAM ARGS...)")
    if a.np < 1:
        ap.error(f"--np must be positive (got {a.np})")
    if a.max_restarts < 0:
        ap.error(f"--max-restarts must be >= 0 (got {a.max_restarts})")
    if a.min_ranks < 0 or a.min_ranks > a.np:
        ap.error(f"--min-ranks must be between 0 and --np {a.np} (got {a.min_ranks})")
    if a.min_ranks and not a.hostfile:
        ap.error("--min-ranks needs --hostfile (the hosts to restart on)")
    hosts = None
    if a.hostfile:
        try:
            hosts = read_hostfile(a.hostfile)
        except (OSError, ValueError) as e:
            ap.error(f"--hostfile: {e}")
    try:
        pp, dp = flag_value(cmd[1:], "--pp"), flag_value(cmd[1:], "--dp")
    except ValueError:
        ap.error("the program's --pp and --dp must be integers")
    np_now = a.np
    root = save_dir_of(cmd)
    if root is None:
        say("the program has no --save DIR: a restart starts over")
    mpirun = shlex.split(a.mpirun)
    hostfile = None
    if hosts is not None:
        hostfile = os.path.join(tempfile.mkdtemp(prefix="weftrun-"), "hostfile")

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
        if pp is not None:  # as given, or as a restart on fewer hosts chose
            args = with_flag(args, "--pp", pp)
        if dp is not None:
            args = with_flag(args, "--dp", dp)
        launch = list(mpirun)
        if hostfile:
            with open(hostfile, "w") as f:
                f.writelines(f"{h} slots={n}\n" for h, n in hosts)
            launch += ["--hostfile", hostfile]
        say(f"attempt {attempt_no}: {' '.join(launch)} -np {np_now} {cmd[0]}"
            + (f" (resuming from {resume[1]}, step {resume[0]})" if resume else ""))
        start = time.monotonic()
        at = Attempt(launch + ["-np", str(np_now), cmd[0]] + args)
        current["attempt"] = at
        status = at.wait()
        seconds = time.monotonic() - start
        outcome = "finished" if status == 0 else "preempted" if status == RESUME_EXIT else "failed"
        after = latest_committed(root)
        lost = None
        if at.last_step is not None:
            lost = max(0, at.last_step - (after[0] if after else 0))
        lost_hosts = []
        if outcome == "failed" and a.min_ranks and stopping["signal"] is None:
            lost_hosts = probe_hosts(mpirun, hosts, a.probe_timeout)
        record = {"attempt": attempt_no, "status": status, "outcome": outcome,
                  "resumed_from": resume[0] if resume else None, "last_step": at.last_step,
                  "checkpoint_after": after[0] if after else None, "lost": lost, "reasons": at.reasons,
                  "seconds": round(seconds, 3), "np": np_now, "pp": pp, "dp": dp,
                  "hosts": [h for h, _ in hosts] if hosts else None, "lost_hosts": [h for h, _ in lost_hosts]}
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
        if lost_hosts:
            gone = {h for h, _ in lost_hosts}
            before = (np_now, pp, dp if dp is not None else (np_now // pp if pp else None), len(hosts))
            hosts = [(h, n) for h, n in hosts if h not in gone]
            slots = sum(n for _, n in hosts)
            if slots < np_now:
                np_new, pp_new, dp_new = choose_layout(a.np, pp, slots) if hosts else (0, pp, dp)
                if np_new < max(a.min_ranks, 1):
                    say(f"giving up: {slots} slots left on {len(hosts)} hosts, fewer than --min-ranks "
                        f"{a.min_ranks}; exit status {status}")
                    return status if status > 0 else 1
                np_now, pp, dp = np_new, pp_new, dp_new
            say(f"restarting on {len(hosts)} host{'s' if len(hosts) != 1 else ''} "
                f"({', '.join(f'{h}: {n} slots' for h, n in hosts)}) with {np_now} ranks"
                + (f", --pp {pp} --dp {dp}" if pp is not None else "")
                + f" (was {before[0]} ranks" + (f", --pp {before[1]} --dp {before[2]}" if before[1] is not None else "")
                + f" on {before[3]} hosts)")
        say(f"restarting ({failures} of {a.max_restarts} restarts)")


if __name__ == "__main__":
    sys.exit(main())

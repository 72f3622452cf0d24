#!/usr/bin/env bash
# weftrun's restart logic against a stand-in for mpirun: a script that plays
# one outcome per attempt and records the command line it got. Checks: exit 75
# resumes without counting a failure; a failure is reported (status, the
# line naming the rank) and restarted with --resume DIR once DIR holds a
# committed checkpoint (a --resume of the command line is replaced); the log
# has one JSON line per attempt; --max-restarts 0 gives up with the status;
# a program without --save restarts from scratch, saying so; with --hostfile
# and --min-ranks a host that fails its probe is dropped and the run restarts
# on the hosts left with a layout that fits (or gives up below --min-ranks);
# bad flags exit 2.
# Usage: weftrun_test.sh WEFTRUN
set -uo pipefail
weftrun="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

# The stand-in: "fake_mpirun -np N PROGRAM ARGS..." appends its arguments to
# $tmp/calls and plays the next outcome from $tmp/plan (one per line:
# "STATUS [STEP]"; STEP: a committed checkpoint step-STEP it leaves under
# the --save directory first).
cat > "$tmp/fake_mpirun" <<'FAKE'
#!/usr/bin/env bash
tmp="$(dirname "$0")"
echo "$*" >> "$tmp/calls"
n=$(wc -l < "$tmp/calls")
read -r status step < <(sed -n "${n}p" "$tmp/plan")
save=""; prev=""
for a in "$@"; do [ "$prev" = "--save" ] && save="$a"; prev="$a"; done
if [ -n "${step:-}" ] && [ -n "$save" ]; then
  mkdir -p "$save/step-$(printf %08d "$step")" && echo '{}' > "$save/step-$(printf %08d "$step")/manifest.json"
  echo "step $((step + 7))/100: train_loss=1.0"
fi
[ "$status" = 1 ] && echo "prog: error: allreduce on world failed: missing ranks: [2] stopped responding" >&2
exit "$status"
FAKE
chmod +x "$tmp/fake_mpirun"

# 1. preempted (saves step 10), then a failure (saves step 20), then done.
printf '75 10\n1 20\n0\n' > "$tmp/plan"; : > "$tmp/calls"
"$weftrun" --np 2 --max-restarts 1 --mpirun "$tmp/fake_mpirun" --log "$tmp/log1" -- prog --steps 100 \
  --save "$tmp/ck" --resume old > "$tmp/out1" 2> "$tmp/err1"
rc=$?
cat "$tmp/err1"
check test "$rc" -eq 0
check test "$(sed -n 1p "$tmp/calls")" = "-np 2 prog --steps 100 --save $tmp/ck --resume old"
check test "$(sed -n 2p "$tmp/calls")" = "-np 2 prog --steps 100 --save $tmp/ck --resume $tmp/ck"
check test "$(sed -n 3p "$tmp/calls")" = "-np 2 prog --steps 100 --save $tmp/ck --resume $tmp/ck"
check grep -q "^weftrun: attempt 1 was preempted and saved at step 10: resuming" "$tmp/err1"
check grep -q "^weftrun: attempt 2 failed with exit status 1 after .* s; its output last showed step 27" "$tmp/err1"
check grep -q "^weftrun:   prog: error: allreduce on world failed: missing ranks: \[2\] stopped responding" "$tmp/err1"
check grep -q "^weftrun:   the newest committed checkpoint is step 20 (.*step-00000020): 7 steps past it lost" "$tmp/err1"
check grep -q "^weftrun: attempt 3 finished (1 failure restarted)" "$tmp/err1"
check test "$(wc -l < "$tmp/log1")" -eq 3
check python3 -c "import json, sys; r = [json.loads(l) for l in open(sys.argv[1])]; \
sys.exit(0 if [x['outcome'] for x in r] == ['preempted', 'failed', 'finished'] and r[1]['resumed_from'] == 10 \
and r[1]['lost'] == 7 and r[2]['resumed_from'] == 20 else 1)" "$tmp/log1"
check grep -q "^step 27/100" "$tmp/out1"  # the program's output passes through

# 2. --max-restarts 0: the first failure ends it with its status.
printf '1\n0\n' > "$tmp/plan"; : > "$tmp/calls"
"$weftrun" --np 2 --max-restarts 0 --mpirun "$tmp/fake_mpirun" -- prog --save "$tmp/ck2" > /dev/null 2> "$tmp/err2"
check test $? -eq 1
check grep -q "^weftrun: giving up after 1 failures (--max-restarts 0); exit status 1" "$tmp/err2"
check test "$(wc -l < "$tmp/calls")" -eq 1

# 3. No --save: restarts start over, and weftrun says so.
printf '1\n0\n' > "$tmp/plan"; : > "$tmp/calls"
"$weftrun" --np 1 --mpirun "$tmp/fake_mpirun" -- prog --steps 3 > /dev/null 2> "$tmp/err3"
check test $? -eq 0
check grep -q "^weftrun: the program has no --save DIR: a restart starts over" "$tmp/err3"
check test "$(sed -n 2p "$tmp/calls")" = "-np 1 prog --steps 3"

# 5. Hosts: a host lost in attempt 1 does not answer its probe; weftrun drops it and restarts on the
# host left with the pipeline kept and data parallelism halved; the log names the layouts. The
# stand-in answers a probe ("--host H:1 -np 1 true") with failure for the hosts listed in $tmp/dead
# and records each attempt's hostfile.
cat > "$tmp/hosts_mpirun" <<'FAKE'
#!/usr/bin/env bash
tmp="$(dirname "$0")"
if [ "$1" = --host ]; then
  echo "${2%:1}" >> "$tmp/probes"
  if grep -qx "${2%:1}" "$tmp/dead"; then echo "ORTE was unable to reliably start one or more daemons." >&2; exit 1; fi
  exit 0
fi
[ "$1" = --hostfile ] && { tr '\n' ';' < "$2" >> "$tmp/hostfiles"; echo >> "$tmp/hostfiles"; shift 2; }
exec "$tmp/fake_mpirun" "$@"
FAKE
chmod +x "$tmp/hosts_mpirun"
printf 'hostA slots=2\n# a comment\nhostB slots=2\n' > "$tmp/hosts"
echo hostB > "$tmp/dead"
printf '1 10\n0\n' > "$tmp/plan"; : > "$tmp/calls"; : > "$tmp/probes"; : > "$tmp/hostfiles"
"$weftrun" --np 4 --hostfile "$tmp/hosts" --min-ranks 2 --probe-timeout 5 --mpirun "$tmp/hosts_mpirun" \
  --log "$tmp/log6" -- prog --pp 2 --dp 2 --save "$tmp/ck6" > /dev/null 2> "$tmp/err6"
rc=$?
cat "$tmp/err6"
check test "$rc" -eq 0
check test "$(sed -n 1p "$tmp/calls")" = "-np 4 prog --pp 2 --dp 2 --save $tmp/ck6"
check test "$(sed -n 2p "$tmp/calls")" = "-np 2 prog --pp 2 --dp 1 --save $tmp/ck6 --resume $tmp/ck6"
check test "$(sed -n 1p "$tmp/hostfiles")" = "hostA slots=2;hostB slots=2;"
check test "$(sed -n 2p "$tmp/hostfiles")" = "hostA slots=2;"
check test "$(tr '\n' ' ' < "$tmp/probes")" = "hostA hostB "
check grep -q "^weftrun: host hostB (2 slots) is lost: the probe gave exit status 1: ORTE was unable" "$tmp/err6"
check grep -q "^weftrun: restarting on 1 host (hostA: 2 slots) with 2 ranks, --pp 2 --dp 1 (was 4 ranks, --pp 2 --dp 2 on 2 hosts)" "$tmp/err6"
check python3 -c "import json, sys; r = [json.loads(l) for l in open(sys.argv[1])]; \
sys.exit(0 if [(x['np'], x['pp'], x['dp'], x['hosts'], x['lost_hosts']) for x in r] == \
[(4, 2, 2, ['hostA', 'hostB'], ['hostB']), (2, 2, 1, ['hostA'], [])] else 1)" "$tmp/log6"
# Too few slots left for --min-ranks: it gives up with the failure's status.
printf '1 10\n0\n' > "$tmp/plan"; : > "$tmp/calls"
"$weftrun" --np 4 --hostfile "$tmp/hosts" --min-ranks 3 --probe-timeout 5 --mpirun "$tmp/hosts_mpirun" \
  -- prog --pp 2 --save "$tmp/ck7" > /dev/null 2> "$tmp/err7"
check test $? -eq 1
check grep -q "^weftrun: giving up: 2 slots left on 1 hosts, fewer than --min-ranks 3; exit status 1" "$tmp/err7"
check test "$(wc -l < "$tmp/calls")" -eq 1
# Not even one pipeline fits: one pipeline over the ranks left, --pp and --dp rewritten.
printf 'hostA slots=1\nhostB slots=3\n' > "$tmp/hosts8"
printf '1 10\n0\n' > "$tmp/plan"; : > "$tmp/calls"
"$weftrun" --np 4 --hostfile "$tmp/hosts8" --min-ranks 1 --probe-timeout 5 --mpirun "$tmp/hosts_mpirun" \
  -- prog --pp 4 --save "$tmp/ck8" > /dev/null 2> "$tmp/err8"
check test $? -eq 0
check test "$(sed -n 2p "$tmp/calls")" = "-np 1 prog --pp 1 --save $tmp/ck8 --resume $tmp/ck8 --dp 1"

# 4. Bad flags.
"$weftrun" --np 0 -- prog > /dev/null 2> "$tmp/err4"
check test $? -eq 2
check grep -q -- "--np must be positive (got 0)" "$tmp/err4"
"$weftrun" --np 2 > /dev/null 2> "$tmp/err5"
check test $? -eq 2
check grep -q "no program given" "$tmp/err5"
"$weftrun" --np 2 --min-ranks 1 -- prog > /dev/null 2> "$tmp/err9"
check test $? -eq 2
check grep -q -- "--min-ranks needs --hostfile" "$tmp/err9"
printf 'hostA slots=0\n' > "$tmp/badhosts"
"$weftrun" --np 2 --hostfile "$tmp/badhosts" -- prog > /dev/null 2> "$tmp/err10"
check test $? -eq 2
check grep -q -- "--hostfile: .*badhosts line 1: expected 'HOST \[slots=N\]' with N >= 1, got 'hostA slots=0'" "$tmp/err10"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

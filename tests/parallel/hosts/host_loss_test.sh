#!/usr/bin/env bash
# A whole host lost: fashion_mnist_hybrid at pp 2 x dp 2 on 2 hosts x 2 ranks
# (tools/hosts/netns_hosts.sh) under weftrun (tools/weftrun.py --hostfile
# --min-ranks 2). Once the first epoch's checkpoint is committed, the second
# host fails as a machine does ($WEFT_LOSE_HOST: its link goes down, its
# processes die). weftrun reports the failure, finds the host gone (its
# probe does not answer), and restarts on the host left at pp 2 x dp 1 from
# that checkpoint (checkpoints are layout-free); the run completes.
# Against an uninterrupted run on both hosts: the steps before the loss are
# bitwise equal, the restart's first step equals the same step within 1e-5
# (the same global batch, summed over one replica instead of two), and the
# final test accuracy is within 0.5 points. Only committed checkpoints are
# left on disk. Where network namespaces cannot be made, the test says so
# and skips.
# Usage: host_loss_test.sh HYBRID MPIRUN_SH NETNS_HOSTS WEFTRUN
set -uo pipefail
hybrid="$(readlink -f "$1")" mpirun_sh="$(readlink -f "$2")" hosts_sh="$(readlink -f "$3")" weftrun="$(readlink -f "$4")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
source "$(dirname "${BASH_SOURCE[0]}")/skip_without_hosts.sh"
skip_without_hosts host_loss "$hosts_sh" "$tmp"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
common=(--pp 2 --dp 2 --epochs 3 --limit-train 4096 --limit-test 1000 --threads 1 --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

# Inside host 0 ($WEFT_* from netns_hosts.sh): the uninterrupted run, then the one that loses host 1.
cat > "$tmp/inside.sh" <<INSIDE
#!/usr/bin/env bash
timeout 300 $mpirun_sh \$WEFT_MPIRUN_HOSTS -np 4 $hybrid ${common[*]} --step-log $tmp/ref.steps \
  --metrics $tmp/ref.jsonl --plot $tmp/ref.svg > $tmp/ref.out 2> $tmp/ref.err
echo "reference: rc=\$?"
timeout 400 $weftrun --np 4 --hostfile \$WEFT_HOSTFILE --min-ranks 2 --max-restarts 2 --probe-timeout 20 \
  --mpirun "$mpirun_sh \$WEFT_MPIRUN_AGENT" --log $tmp/restarts.jsonl -- $hybrid ${common[*]} --save $tmp/ck \
  --step-log $tmp/chaos.steps --metrics $tmp/chaos.jsonl --plot $tmp/chaos.svg > $tmp/chaos.out 2> $tmp/chaos.err &
launcher=\$!
for _ in \$(seq 1 2400); do  # the first epoch's checkpoint is committed
  ls $tmp/ck/step-*/manifest.json > /dev/null 2>&1 && break
  sleep 0.05
done
sleep 0.5
echo "=== losing host 10.77.0.2 at \$(date +%T.%N)"
\$WEFT_LOSE_HOST 10.77.0.2
wait \$launcher
echo "weftrun: rc=\$?"
INSIDE
chmod +x "$tmp/inside.sh"
timeout 700 "$hosts_sh" 2 2 0 -- "$tmp/inside.sh" > "$tmp/inside.out" 2>&1
cat "$tmp/inside.out"
echo "=== weftrun"; grep -a '^weftrun: ' "$tmp/chaos.err"
echo "=== restart log"; cat "$tmp/restarts.jsonl"
check grep -q '^reference: rc=0$' "$tmp/inside.out"
check grep -q '^weftrun: rc=0$' "$tmp/inside.out"
check grep -q "^weftrun: host 10.77.0.2 (2 slots) is lost: the probe gave " "$tmp/chaos.err"
check grep -q "^weftrun: restarting on 1 host (10.77.0.1: 2 slots) with 2 ranks, --pp 2 --dp 1 (was 4 ranks, --pp 2 --dp 2 on 2 hosts)" "$tmp/chaos.err"
check grep -q "^weftrun: attempt 2 finished (1 failure restarted)" "$tmp/chaos.err"
check python3 - "$tmp/restarts.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
got = [(x["outcome"], x["np"], x["pp"], x["dp"], x["lost_hosts"]) for x in r]
want = [("failed", 4, 2, 2, ["10.77.0.2"]), ("finished", 2, 2, 1, [])]
print("attempts:", got)
sys.exit(0 if got == want and r[1]["resumed_from"] == r[0]["checkpoint_after"] else 1)
PY
# Step by step against the uninterrupted run.
check python3 - "$tmp/ref.steps" "$tmp/chaos.steps" "$tmp/restarts.jsonl" <<'PY'
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
resumed = [json.loads(l) for l in open(sys.argv[3])][1]["resumed_from"]
ok = len(ref) == len(got) == 96 and [r["step"] for r in got] == list(range(1, 97))
ok = ok and all(a["loss"] == b["loss"] for a, b in zip(ref[:resumed], got[:resumed]))
first = abs(ref[resumed]["loss"] - got[resumed]["loss"])
print(f"steps 1..{resumed} bitwise equal: {ok}; step {resumed + 1}: {got[resumed]['loss']!r} against "
      f"{ref[resumed]['loss']!r} (difference {first:.3g})")
sys.exit(0 if ok and first <= 1e-5 else 1)
PY
acc() { sed -n 's/^test_accuracy=//p' "$1"; }
echo "test accuracy: uninterrupted $(acc "$tmp/ref.out"), after losing a host $(acc "$tmp/chaos.out")"
check python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 0.005 else 1)" \
  "$(acc "$tmp/ref.out")" "$(acc "$tmp/chaos.out")"
shopt -s dotglob
for d in "$tmp"/ck/*; do check test -f "$d/manifest.json"; done
shopt -u dotglob

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# fashion_mnist_pipe under mpirun is the single-process example's training
# with each batch split into micro-batches: on the same images, seed and
# settings, every epoch's train loss and test accuracy must match
# fashion_mnist's (to float summation order), for 1f1b on 2 ranks, interleaved
# (2 stages per rank) with checkpointing always on 2 ranks, zb (ZB-H1: split
# backward, B and W actions) on 2 ranks, zbv (ZB-V: 2 stages per rank in a
# V, measured and planned by --balance auto) on 2 ranks, and gpipe on 4
# ranks. It must print
# test_accuracy=, write metrics, the schedule chart with the simulator's
# prediction and a Chrome trace (zb's with its W actions); bad pipeline flags
# are named. Without --balance (auto, the default) rank 0 measures the layers
# and prints the partition table once, before the epochs; interleaved (2
# stages per rank) is given its balance. The 1f1b run shows the progress
# bar: rank 0 holds stage 0 and never sees an output, yet its bar shows the
# true running accuracy, ending at the epoch's train_acc (bar_accuracy.py).
# A checkpoint saved after epoch 1 resumes on 2 ranks (the uninterrupted
# epoch 2 line exactly) and in one process.
# Usage: fashion_mnist_pipe_test.sh FASHION_MNIST FASHION_MNIST_PIPE MPIRUN_SH BAR_ACCURACY_PY
set -uo pipefail
single="$1" pipe="$2" mpirun_sh="$3" bar_accuracy="$4"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
with_bar=(--limit-train 1024 --limit-test 512 --epochs 2 --batch-size 64 --threads 1)
common=("${with_bar[@]}" --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

"$single" "${common[@]}" --metrics "$tmp/single.jsonl" --plot "$tmp/single.svg" > "$tmp/single.out" || { echo "fashion_mnist failed"; exit 1; }
echo "single process:"; grep '^epoch' "$tmp/single.out"

# Each epoch line's train_loss and test_acc agree within tolerances.
same_training() {
  python3 - "$tmp/single.out" "$1" <<'PY'
import re, sys
def epochs(path):
    rows = []
    for line in open(path):
        m = re.match(r"epoch (\d+)/\d+: train_loss=([\d.]+) train_acc=([\d.]+) test_loss=([\d.]+) test_acc=([\d.]+)", line)
        if m: rows.append(tuple(float(x) for x in m.groups()))
    return rows
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
ok = len(a) == len(b) == 2
for x, y in zip(a, b):
    ok = ok and abs(x[1] - y[1]) < 2e-3 and abs(x[2] - y[2]) < 0.01 and abs(x[4] - y[4]) < 0.01
    print("single %s vs pipe %s" % (x, y))
sys.exit(0 if ok else 1)
PY
}

run_pipe() {  # name np flags... (the run named one_f_one_b shows the progress bar)
  local name="$1" np="$2"; shift 2
  local args=("${common[@]}"); [ "$name" = one_f_one_b ] && args=("${with_bar[@]}")
  timeout 300 "$mpirun_sh" -np "$np" "$pipe" "${args[@]}" --metrics "$tmp/$name.jsonl" --plot "$tmp/$name.svg" \
    --chart "$tmp/$name.txt" --trace "$tmp/$name.json" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  echo "=== $name (np=$np $*): rc=$rc"; grep '^epoch' "$tmp/$name.out"
  check test "$rc" -eq 0 || cat "$tmp/$name.err"
  check same_training "$tmp/$name.out"
  check grep -q '^test_accuracy=0\.[0-9]\{4\}$' "$tmp/$name.out"
  check test "$(wc -l < "$tmp/$name.jsonl")" -eq 2
  check grep -q 'measured step .* ms (optimizer included); simulated from the measured F, B and W times' "$tmp/$name.txt"
  check grep -q '"traceEvents"' "$tmp/$name.json"
  check grep -q '"name": "B0\.' "$tmp/$name.json"
}

run_pipe one_f_one_b 2 --schedule 1f1b --chunks 4
check test "$(grep -c '^partition: 10 layers over 2 stages, 1f1b with 4 micro-batches' "$tmp/one_f_one_b.out")" -eq 1
check grep -q '^predicted step time' "$tmp/one_f_one_b.out"
# The chart averages the measured bubble over the last steps (at most 20, the
# run's steps here; fashion_mnist_hybrid_test checks the plan's beside it).
check grep -q '^measured bubble over the last [0-9]* steps: mean [0-9.]*% ([0-9.]*% to [0-9.]*%)$' "$tmp/one_f_one_b.txt"
check python3 "$bar_accuracy" "$tmp/one_f_one_b.out" "$tmp/one_f_one_b.err"
run_pipe interleaved 2 --schedule interleaved --chunks 4 --checkpoint always --balance 3,3,2,2
check grep -q '^measured bubble over the last [0-9]* steps: mean [0-9.]*% ([0-9.]*% to [0-9.]*%)$' "$tmp/interleaved.txt"
run_pipe zb 2 --schedule zb --chunks 4
# The W actions ran, were traced, and the chart simulates them.
check grep -q '"name": "W0\.' "$tmp/zb.json"
check grep -q '"name": "W1\.' "$tmp/zb.json"
check grep -q '^zb-h1: 2 ranks, 4 micro-batches' "$tmp/zb.txt"
check grep -q 'W weight gradient' "$tmp/zb.txt"
# zbv: --balance auto plans 4 stages on 2 ranks (rank 0 holds the first and
# the last, and scores); the chart and the trace are zbv's, with W actions.
run_pipe zbv 2 --schedule zbv --chunks 4
check grep -q '^partition: 10 layers over 4 stages on 2 ranks (2 per rank), zbv with 4 micro-batches' "$tmp/zbv.out"
check grep -q '^zbv: 2 ranks, 4 micro-batches' "$tmp/zbv.txt"
check grep -q '"name": "W3\.' "$tmp/zbv.json"
run_pipe gpipe4 4 --schedule gpipe --chunks 2 --balance 3,3,2,2

# Checkpoints: the 1f1b run saved after epoch 1 (--save, --stop-after-epoch 1)
# and resumed on the same 2 ranks prints the uninterrupted run's epoch 2
# exactly; resumed in one process (1 stage) it trains on within tolerance.
timeout 300 "$mpirun_sh" -np 2 "$pipe" "${common[@]}" --schedule 1f1b --chunks 4 --save "$tmp/ck" \
  --stop-after-epoch 1 --metrics "$tmp/ck1.jsonl" --plot "$tmp/ck1.svg" --chart "$tmp/ck1.txt" \
  --trace "$tmp/ck1.json" > "$tmp/ck1.out" 2> "$tmp/ck1.err"
check test $? -eq 0
check test -f "$tmp/ck/step-00000016/manifest.json"
check grep -q 'stopping after epoch 1 (--stop-after-epoch)' "$tmp/ck1.err"
for np in 2 1; do
  timeout 300 "$mpirun_sh" -np "$np" "$pipe" "${common[@]}" --schedule 1f1b --chunks 4 --resume "$tmp/ck" \
    --metrics "$tmp/r$np.jsonl" --plot "$tmp/r$np.svg" --chart "$tmp/r$np.txt" --trace "$tmp/r$np.json" \
    > "$tmp/r$np.out" 2> "$tmp/r$np.err"
  check test $? -eq 0 || cat "$tmp/r$np.err"
  check grep -qF "resumed from partitioned checkpoint directory $tmp/ck/step-00000016 (step 16, epoch 1)" "$tmp/r$np.err"
  check test "$(grep -c '^epoch' "$tmp/r$np.out")" -eq 1
done
check test "$(grep '^epoch 2/2' "$tmp/r2.out" | cut -d'(' -f1)" = \
  "$(grep '^epoch 2/2' "$tmp/one_f_one_b.out" | cut -d'(' -f1)"
check grep -q '^test_accuracy=0\.[0-9]\{4\}$' "$tmp/r1.out"

# Bad pipeline flags are named (every rank exits 1).
timeout 120 "$mpirun_sh" -np 2 "$pipe" "${common[@]}" --balance 4,4 > "$tmp/bad.out" 2> "$tmp/bad.err"
check test $? -ne 0
check grep -q 'the module and the sum of balance have different lengths (module: 10, sum of balance: 8)' "$tmp/bad.err"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

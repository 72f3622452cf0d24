#!/usr/bin/env bash
# fashion_mnist_hybrid under mpirun trains the same model on the same global
# batches whatever the grid (GlobalBatchSampler: batch k of the
# single-process example's (seed, epoch) shuffle, dealt to the replicas), so
# on a short run (2 epochs of 1024 images, 512 test images) every grid —
# pp 1 x dp 1 (-np 1), pp 2 x dp 2 (-np 4), pp 2 x dp 1 with zb (-np 2),
# pp 1 x dp 2 (-np 2), pp 1 x dp 4 (-np 4) — prints the per-epoch lines of the
# single-process example (examples/fashion_mnist.cc) with these settings:
# test_acc to its printed 4 digits, train_loss within 1e-5. Why 1e-5 and not
# the printed 6 digits: the grids sum in different orders (micro-batches of
# 32 or 16 rows, the replicas' gradients averaged by allreduce), which moves
# the float32 weights by rounding only; the epoch loss then differs by about
# 1e-6 and its 6th printed digit can flip (measured: 0.965451 vs 0.965452 after
# 32 steps), while any difference in data or gradient semantics (a batch
# missed or dealt twice, a wrong average) moves it by 1e-3 or more. The
# partition table is printed once, by rank 0, before anything else on stdout,
# on the runs with a pipeline (none with pp 1); metrics have a line per
# epoch; the output ends with test_accuracy=. --help lists the flags; a grid
# that does not tile the world and a batch that does not divide among the
# replicas are errors naming the values.
# Checkpoints (parallel/checkpoint/): a run at pp 2 x dp 2 with --zero saves
# after epoch 1 and stops (--stop-after-epoch 1, --keep-last 1); resumed at
# 1 x 1 (-np 1) and at 4 x 1 (-np 4) without ZeRO, epoch 1's line (saving
# run) and epoch 2's (resumed run) are the single-process example's within
# the same tolerance; so is a full checkpoint written in the background
# (--full-checkpoint --async-save) resumed at 2 x 1. A resume from a
# checkpoint with a corrupted, truncated or missing shard fails naming the
# shard's file.
# The 2 x 2 run shows the progress bar: rank 0 holds stage 0 of replica 0
# and never sees an output, yet its bar shows the true running accuracy of
# the global batches, ending at the epoch's train_acc (bar_accuracy.py).
# Usage: fashion_mnist_hybrid_test.sh FASHION_MNIST FASHION_MNIST_HYBRID MPIRUN_SH BAR_ACCURACY_PY
set -uo pipefail
single="$1" hybrid="$2" mpirun_sh="$3" bar_accuracy="$4"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
with_bar=(--limit-train 1024 --limit-test 512 --epochs 2 --threads 1)
common=("${with_bar[@]}" --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
# fails_with MESSAGE CMD...: CMD exits non-zero and prints MESSAGE.
fails_with() {
  local want="$1"; shift
  if timeout 120 "$@" > "$tmp/fail.out" 2>&1; then echo "expected failure: $*"; return 1; fi
  grep -qF -- "$want" "$tmp/fail.out" || { echo "no '$want' in:"; cat "$tmp/fail.out"; return 1; }
}

# --help: the shared flags, the grid's and the checkpoints'.
check "$hybrid" --help > "$tmp/help"
for flag in "--data DIR" --model --epochs --batch-size --lr --momentum --weight-decay --seed --threads --workers \
            --metrics --plot --limit-train --limit-test --no-progress "--pp N" "--dp N" "--chunks N" \
            "--schedule gpipe|1f1b|interleaved|zb|zbv|interleaved-zb" "--virtual N" "--balance auto|A,B,..." \
            "(default fashion_mnist_hybrid_metrics.jsonl)" "global batch size, split across the --dp replicas (default 128)" \
            "(default world size / --pp)" "(default auto)" --zero "--save DIR" "--resume DIR" "--keep-last N" \
            --async-save --full-checkpoint "--stop-after-epoch K"; do
  check grep -qF -- "$flag" "$tmp/help"
done

"$single" "${common[@]}" --metrics "$tmp/single.jsonl" --plot "$tmp/single.svg" > "$tmp/single.out" \
  || { echo "fashion_mnist failed"; exit 1; }
echo "single process:"; grep '^epoch' "$tmp/single.out"

# Each epoch line agrees with the single-process example's: test_acc as printed, train_loss within 1e-5.
same_training() {  # FILE...: the epoch lines of the files, in order
  python3 - "$tmp/single.out" "$@" <<'PY'
import re, sys
def epochs(path):
    rows = []
    for line in open(path):
        m = re.match(r"epoch (\d+)/\d+: train_loss=([\d.]+) train_acc=([\d.]+) test_loss=([\d.]+) test_acc=([\d.]+)", line)
        if m: rows.append(m.groups())
    return rows
a, b = epochs(sys.argv[1]), sum((epochs(p) for p in sys.argv[2:]), [])
ok = len(a) == len(b) == 2
for x, y in zip(a, b):
    ok = ok and abs(float(x[1]) - float(y[1])) <= 1e-5 and x[4] == y[4]
    print("single %s vs hybrid %s" % (x, y))
sys.exit(0 if ok else 1)
PY
}

run_grid() {  # name np pp flags... (the run named 2x2 shows the progress bar)
  local name="$1" np="$2" pp="$3"; shift 3
  local args=("${common[@]}"); [ "$name" = 2x2 ] && args=("${with_bar[@]}")
  timeout 120 "$mpirun_sh" -np "$np" "$hybrid" "${args[@]}" --metrics "$tmp/$name.jsonl" --plot "$tmp/$name.svg" \
    --pp "$pp" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  echo "=== $name (np=$np --pp $pp $*): rc=$rc"; cat "$tmp/$name.out"
  check test "$rc" -eq 0 || cat "$tmp/$name.err"
  check same_training "$tmp/$name.out"
  check grep -q '^test_accuracy=0\.[0-9]\{4\}$' <(tail -n 1 "$tmp/$name.out")
  check test "$(wc -l < "$tmp/$name.jsonl")" -eq 2
  if [ "$pp" -gt 1 ]; then
    # Once, by rank 0, first: the table's header, a row per stage, the prediction.
    check test "$(grep -c '^partition: ' "$tmp/$name.out")" -eq 1
    check grep -q "^partition: 10 layers over $pp stages, " <(head -n 1 "$tmp/$name.out")
    check test "$(grep -c '^stage  layers' "$tmp/$name.out")" -eq 1
    check test "$(grep -c '^predicted step time' "$tmp/$name.out")" -eq 1
    check grep -q "balance [0-9]*,[0-9]* (measured)" "$tmp/$name.err"
  else
    check test "$(grep -c '^partition: ' "$tmp/$name.out")" -eq 0
  fi
}

run_grid 1x1 1 1
run_grid 2x2 4 2 --dp 2
check python3 "$bar_accuracy" "$tmp/2x2.out" "$tmp/2x2.err"
run_grid 2x1_zb 2 2 --schedule zb --chart "$tmp/2x1_zb.txt"
# The chart's mean measured bubble sits beside the partition plan's
# prediction, the very figure the table printed.
check grep -q '^measured bubble over the last [0-9]* steps: mean [0-9.]*% ([0-9.]*% to [0-9.]*%); the partition plan predicted [0-9.]*%$' "$tmp/2x1_zb.txt"
planned=$(sed -n 's/^predicted step time .* ms, bubble \([0-9.]*%\).*/\1/p' "$tmp/2x1_zb.out")
check grep -qF "the partition plan predicted $planned" "$tmp/2x1_zb.txt"
run_grid 1x2 2 1 --dp 2
run_grid 1x4 4 1

# Checkpoints: saved at 2 x 2 with ZeRO after epoch 1, resumed at 1 x 1 and 4 x 1.
run_ck() {  # name np outfile flags...
  local name="$1" np="$2" out="$3"; shift 3
  timeout 120 "$mpirun_sh" -np "$np" "$hybrid" "${common[@]}" --metrics "$tmp/$name.jsonl" --plot "$tmp/$name.svg" \
    "$@" > "$out" 2> "$tmp/$name.err"
  local rc=$?
  echo "=== $name (np=$np $*): rc=$rc"; grep -E '^epoch|^test_acc' "$out"; grep checkpoint "$tmp/$name.err"
  check test "$rc" -eq 0 || cat "$tmp/$name.err"
}
run_ck save22z 4 "$tmp/save22z.out" --pp 2 --dp 2 --zero --save "$tmp/ck" --keep-last 1 --stop-after-epoch 1
check test "$(grep -c '^epoch' "$tmp/save22z.out")" -eq 1
check test -f "$tmp/ck/step-00000008/manifest.json"
# The lead names the checkpoint and how long saving it held up training.
check grep -qE "checkpoint $tmp/ck/step-00000008 \(step 8, held up training [0-9]+\.[0-9]{3} s\)" "$tmp/save22z.err"
check test "$(ls "$tmp/ck" | wc -l)" -eq 1
run_ck resume11 1 "$tmp/resume11.out" --pp 1 --resume "$tmp/ck"
check same_training "$tmp/save22z.out" "$tmp/resume11.out"
check grep -qF "resumed from partitioned checkpoint directory $tmp/ck/step-00000008 (step 8, epoch 1)" \
  "$tmp/resume11.err"
run_ck resume41 4 "$tmp/resume41.out" --pp 4 --resume "$tmp/ck"
check same_training "$tmp/save22z.out" "$tmp/resume41.out"
check grep -q '^test_accuracy=0\.[0-9]\{4\}$' <(tail -n 1 "$tmp/resume41.out")
# A full checkpoint, written in the background, resumed at 2 x 1.
run_ck savefull 4 "$tmp/savefull.out" --pp 2 --dp 2 --zero --save "$tmp/ckf" --full-checkpoint --async-save \
  --stop-after-epoch 1
check test -f "$tmp/ckf/step-00000008/model.safetensors"
check grep -q "written in the background" "$tmp/savefull.err"
run_ck resume21 2 "$tmp/resume21.out" --pp 2 --resume "$tmp/ckf"
check same_training "$tmp/savefull.out" "$tmp/resume21.out"
# Damaged checkpoints: the error names the shard's file.
damaged() {  # name: a copy of the 2 x 2 checkpoint
  rm -rf "$tmp/$1"; cp -r "$tmp/ck" "$tmp/$1"; echo "$tmp/$1/step-00000008"
}
d="$(damaged ck_corrupt)"
python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-5] ^= 0x5a; open(p, 'wb').write(b)" \
  "$d/model-00002-of-00002.safetensors"
check fails_with "shard '$d/model-00002-of-00002.safetensors' is corrupted: checksum mismatch in tensor" \
  "$mpirun_sh" -np 2 "$hybrid" "${common[@]}" --pp 2 --resume "$tmp/ck_corrupt"
d="$(damaged ck_short)"
truncate -s -100 "$d/optimizer-00003-of-00004.safetensors"
check fails_with "shard '$d/optimizer-00003-of-00004.safetensors' is truncated" \
  "$mpirun_sh" -np 1 "$hybrid" "${common[@]}" --resume "$tmp/ck_short"
d="$(damaged ck_missing)"
rm "$d/model-00001-of-00002.safetensors"
check fails_with "shard '$d/model-00001-of-00002.safetensors' is missing" \
  "$mpirun_sh" -np 4 "$hybrid" "${common[@]}" --pp 4 --resume "$tmp/ck_missing"

# Grids that do not tile the world, a batch that does not divide among the replicas.
check fails_with "--pp 3 does not divide the world size 4, so --dp (by default world size / --pp) cannot make --pp x --dp = 4 ranks" \
  "$mpirun_sh" -np 4 "$hybrid" "${common[@]}" --pp 3
check fails_with "--pp 3 x --dp 2 = 6 ranks, but the world size is 4: --pp x --dp must equal the world size" \
  "$mpirun_sh" -np 4 "$hybrid" "${common[@]}" --pp 3 --dp 2
check fails_with "--batch-size 130 does not divide among --dp 4 replicas" \
  "$mpirun_sh" -np 4 "$hybrid" "${common[@]}" --pp 1 --batch-size 130

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

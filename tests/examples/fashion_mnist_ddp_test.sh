#!/usr/bin/env bash
# fashion_mnist_ddp under mpirun -np 2 on a short run (2 epochs of 1024
# images, 512 test images), on the library's training loop:
# - the progress bar (rank 0) shows the true running accuracy, ending at the
#   epoch's train_acc (bar_accuracy.py); metrics have a line per epoch; the
#   output ends with test_accuracy=;
# - --stop-after-epoch 1 --save DIR stops after epoch 1 (its line is the
#   uninterrupted run's) with a partitioned checkpoint DIR/step-00000008 and
#   no test_accuracy; --resume DIR says what it took and prints the
#   uninterrupted run's epoch 2 line and test_accuracy exactly (the data order
#   is seeded by (seed, epoch), the checkpoint holds model, optimizer,
#   schedule and history), and its metrics file has both epochs;
# - --amp bf16 trains under bfloat16 autocast: epoch 1's loss near the
#   float32 run's (within 0.05) but not equal to it;
# - --device cuda:N is checked before training (here without a GPU, or
#   without CUDA support, an error saying so).
# Usage: fashion_mnist_ddp_test.sh FASHION_MNIST_DDP MPIRUN_SH BAR_ACCURACY_PY
set -uo pipefail
ddp="$1" mpirun_sh="$2" bar_accuracy="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
common=(--limit-train 1024 --limit-test 512 --epochs 2 --threads 1)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
run() {  # name flags...
  local name="$1"; shift
  timeout 120 "$mpirun_sh" -np 2 "$ddp" "${common[@]}" --metrics "$tmp/$name.jsonl" --plot "$tmp/$name.svg" "$@" \
    > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  echo "=== $name ($*): rc=$rc"; cat "$tmp/$name.out"; grep -E "resumed|stopping|autocast" "$tmp/$name.err"
  check test "$rc" -eq 0 || cat "$tmp/$name.err"
}
# The epoch line of epoch $1 in file $2, without the timing in parentheses.
epoch_line() { grep "^epoch $1/" "$2" | sed 's/ (.*//'; }

run full
check python3 "$bar_accuracy" "$tmp/full.out" "$tmp/full.err"
check test "$(wc -l < "$tmp/full.jsonl")" -eq 2
check grep -q '^test_accuracy=0\.[0-9]\{4\}$' <(tail -n 1 "$tmp/full.out")
# Each epoch says how much of DDP's reductions backward hid (one line per epoch, from rank 0).
check test "$(grep -c '^ddp: epoch [12]: overlap [01]\.[0-9][0-9] ' "$tmp/full.out")" -eq 2

run stopped --no-progress --stop-after-epoch 1 --save "$tmp/ck"
check test "$(grep -c '^epoch' "$tmp/stopped.out")" -eq 1
check test "$(epoch_line 1 "$tmp/stopped.out")" = "$(epoch_line 1 "$tmp/full.out")"
check test "$(grep -c '^test_accuracy' "$tmp/stopped.out")" -eq 0
check grep -qF "stopping after epoch 1 (--stop-after-epoch)" "$tmp/stopped.err"
check test -f "$tmp/ck/step-00000008/manifest.json"

run resumed --no-progress --resume "$tmp/ck"
check grep -qF "resumed from partitioned checkpoint directory $tmp/ck/step-00000008 (step 8, epoch 1)" \
  "$tmp/resumed.err"
check test "$(grep -c '^epoch' "$tmp/resumed.out")" -eq 1
check test -n "$(epoch_line 2 "$tmp/full.out")"
check test "$(epoch_line 2 "$tmp/resumed.out")" = "$(epoch_line 2 "$tmp/full.out")"
check test "$(grep '^test_accuracy' "$tmp/resumed.out")" = "$(grep '^test_accuracy' "$tmp/full.out")"
check test "$(wc -l < "$tmp/resumed.jsonl")" -eq 2

run bf16 --no-progress --epochs 1 --amp bf16
check grep -qF "autocast bf16" "$tmp/bf16.err"
check grep -q '^test_accuracy=0\.[0-9]\{4\}$' <(tail -n 1 "$tmp/bf16.out")
loss() { grep -o "^epoch 1/[0-9]*: train_loss=[0-9.]*" "$1" | cut -d= -f2; }
f32="$(loss "$tmp/full.out")" b16="$(loss "$tmp/bf16.out")"
echo "epoch 1 train_loss: float32 $f32, bf16 autocast $b16"
check python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a != b and abs(a - b) < 0.05 else 1)" \
  "$f32" "$b16"

timeout 120 "$ddp" "${common[@]}" --device cuda:0 > "$tmp/cuda.out" 2>&1
check test $? -ne 0
check grep -qE "no CUDA GPU is visible|built without CUDA support|cuda:0" "$tmp/cuda.out"

echo "$pass passed, $fail failed"
test "$fail" -eq 0

#!/usr/bin/env bash
# The GPT example with --amp bf16 on the CPU (bfloat16 autocast for forward
# passes and the loss; float32 weights, gradients and AdamW state) against the
# same run in float32: 300 steps of a small model (3 blocks of width 96,
# context 64, 16 sequences per step, lr 1e-3) on Debian's fortunes. The final
# validation loss stays within 2% of the float32 run's, in one process and
# pipelined (pp 2 under mpirun: each stage's forward under autocast, its
# boundary messages in whatever dtype the stage returns). A bf16 run that
# did not really run in bfloat16 would match float32 to 1e-5: the losses must
# also differ (above 1e-6), and the float32 grid run must equal the
# one-process float32 run within 1e-5 (the arithmetic the check relies on).
# Usage: amp_test.sh GPT MPIRUN_SH
set -uo pipefail
gpt="$1" mpirun_sh="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
[ -d /usr/share/games/fortunes ] || { echo "Debian's fortunes are not installed (./bazelw installs them)"; exit 1; }
common=(--dim 96 --heads 4 --layers 3 --context 64 --batch-size 16 --steps 300 --eval-interval 100 --warmup 20
        --eval-batches 4 --lr 1e-3 --final-sample 0 --threads 1 --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
val() { python3 -c "import json, sys; print(repr(json.loads(open(sys.argv[1]).read().splitlines()[-1])['val_loss']))" \
  "$1"; }  # the last evaluation's, all its digits
run() {  # name np flags...
  local name="$1" np="$2"; shift 2
  if [ "$np" = 1 ]; then
    timeout 300 "$gpt" "${common[@]}" "$@" --metrics "$tmp/$name.jsonl" --plot "$tmp/$name.svg" > "$tmp/$name.out" 2>&1
  else
    timeout 300 "$mpirun_sh" -np "$np" "$gpt" "${common[@]}" "$@" --metrics "$tmp/$name.jsonl" \
      --plot "$tmp/$name.svg" > "$tmp/$name.out" 2>&1
  fi
  local rc=$?
  echo "=== $name: rc=$rc"; grep -a '^step \|^val_loss=' "$tmp/$name.out"
  check test "$rc" -eq 0 || tail -n 20 "$tmp/$name.out"
}
# |a - b| / b <= tol and |a - b| > floor
rel() { python3 -c "import sys; a, b, tol, floor = map(float, sys.argv[1:]); d = abs(a - b); \
print(f'  {a} against {b}: relative difference {d / b:.2e}'); sys.exit(0 if d / b <= tol and d > floor else 1)" "$@"; }

run fp32 1
run bf16 1 --amp bf16
run fp32_pp2 2 --pp 2
run bf16_pp2 2 --pp 2 --amp bf16
check rel "$(val "$tmp/bf16.jsonl")" "$(val "$tmp/fp32.jsonl")" 0.02 1e-6
check rel "$(val "$tmp/bf16_pp2.jsonl")" "$(val "$tmp/fp32.jsonl")" 0.02 1e-6
check rel "$(val "$tmp/fp32_pp2.jsonl")" "$(val "$tmp/fp32.jsonl")" 1e-5 -1
check grep -q -- "--amp none|bf16" <("$gpt" --help)

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

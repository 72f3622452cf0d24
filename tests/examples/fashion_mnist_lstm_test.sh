#!/usr/bin/env bash
# fashion_mnist --model lstm (the row-by-row LSTM of examples/models.h) trains:
# one epoch on 12,800 images lifts test accuracy well above chance (10%) and
# the loss below its starting value; the run is the same with 1 and 2 threads.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--model lstm --limit-train 12800 --limit-test 1000 --epochs 1 --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

"$bin" "${common[@]}" --threads 2 --step-log "$tmp/steps2.jsonl" --metrics "$tmp/m.jsonl" --plot "$tmp/p.svg" \
  > "$tmp/out2" 2> "$tmp/err2"
"$bin" "${common[@]}" --threads 1 --step-log "$tmp/steps1.jsonl" --metrics "$tmp/m1.jsonl" --plot "$tmp/p1.svg" \
  > "$tmp/out1" 2> /dev/null
cat "$tmp/out2"
check grep -q "lstm with 82186 parameters" "$tmp/err2"  # 4 * 128 * (28 + 128 + 2) + 128 * 10 + 10
acc=$(sed -n 's/^test_accuracy=//p' "$tmp/out2")
check awk -v a="$acc" 'BEGIN { exit !(a >= 0.5) }'
first=$(head -1 "$tmp/steps2.jsonl" | sed 's/.*"loss": *\([0-9.e+-]*\).*/\1/')
last=$(tail -1 "$tmp/steps2.jsonl" | sed 's/.*"loss": *\([0-9.e+-]*\).*/\1/')
check awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.75 * f) }'
check diff "$tmp/steps1.jsonl" "$tmp/steps2.jsonl"

echo "$pass passed, $fail failed"
test "$fail" -eq 0

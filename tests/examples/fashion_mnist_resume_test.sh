#!/usr/bin/env bash
# A short Fashion-MNIST run interrupted after epoch 1 and resumed from its
# checkpoint must print exactly the same per-epoch losses and accuracies as the
# uninterrupted run; the plot and metrics must exist; a corrupted checkpoint and
# a missing dataset must be refused with clear messages.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--limit-train 1024 --limit-test 512 --epochs 3 --batch-size 64 --threads 2 --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

"$bin" "${common[@]}" --metrics "$tmp/full.jsonl" --plot "$tmp/full.svg" > "$tmp/full.out"
"$bin" "${common[@]}" --stop-after-epoch 1 --save "$tmp/ck" --metrics "$tmp/a.jsonl" --plot "$tmp/a.svg" > "$tmp/part1.out"
# resumed: runs epochs 2 and 3 only
"$bin" "${common[@]}" --resume "$tmp/ck" --save "$tmp/ck" --metrics "$tmp/a.jsonl" --plot "$tmp/a.svg" > "$tmp/part2.out"

# per-epoch lines without the timing suffix "(12.3s, 4000 img/s)"
grep '^epoch' "$tmp/full.out" | sed 's/ (.*//' > "$tmp/full.epochs"
cat "$tmp/part1.out" "$tmp/part2.out" | grep '^epoch' | sed 's/ (.*//' > "$tmp/resumed.epochs"
echo "uninterrupted:"; cat "$tmp/full.epochs"
echo "interrupted + resumed:"; cat "$tmp/resumed.epochs"
check test "$(wc -l < "$tmp/full.epochs")" -eq 3
check diff "$tmp/full.epochs" "$tmp/resumed.epochs"
check grep -q '^test_accuracy=0\.[0-9]\{4\}$' "$tmp/full.out"
check grep -q '<svg' "$tmp/full.svg"
check test "$(wc -l < "$tmp/full.jsonl")" -eq 3
check test "$(grep -c '"test_accuracy"' "$tmp/a.jsonl")" -eq 3

# a corrupted checkpoint is refused
cp "$tmp/ck" "$tmp/bad"
printf '\x55' | dd of="$tmp/bad" bs=1 seek=$(( $(stat -c %s "$tmp/bad") - 10 )) conv=notrunc status=none
if "$bin" "${common[@]}" --resume "$tmp/bad" > "$tmp/bad.out" 2>&1; then check false; else
  check grep -q "corrupted" "$tmp/bad.out"; fi
# a missing dataset is a clear error, not a crash
if "$bin" --data "$tmp/nowhere" --epochs 1 > "$tmp/nodata.out" 2>&1; then check false; else
  check grep -q "nowhere" "$tmp/nodata.out"; fi

echo "$pass passed, $fail failed"
test "$fail" -eq 0

#!/usr/bin/env bash
# A short Fashion-MNIST run interrupted after epoch 1 and resumed from its
# checkpoint must print exactly the same per-epoch losses and accuracies as the
# uninterrupted run; --save writes partitioned checkpoints (DIR/step-<N> with a
# manifest) and --resume takes the root or one step directory; the plot and
# metrics must exist; a corrupted checkpoint, a missing path, a directory
# without a checkpoint, a file that is not one and a missing dataset must be
# refused with clear messages naming the path.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--limit-train 1024 --limit-test 512 --epochs 3 --batch-size 64 --threads 2 --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

"$bin" "${common[@]}" --metrics "$tmp/full.jsonl" --plot "$tmp/full.svg" > "$tmp/full.out"
"$bin" "${common[@]}" --stop-after-epoch 1 --save "$tmp/ck" --metrics "$tmp/a.jsonl" --plot "$tmp/a.svg" > "$tmp/part1.out"
cp -r "$tmp/ck/step-00000016" "$tmp/epoch1"  # --keep-last 2 (the default) prunes it below
# resumed: runs epochs 2 and 3 only
"$bin" "${common[@]}" --resume "$tmp/ck" --save "$tmp/ck" --metrics "$tmp/a.jsonl" --plot "$tmp/a.svg" > "$tmp/part2.out" 2> "$tmp/part2.err"

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
# a step directory per epoch (16 steps each), committed; the newest two kept (--keep-last 2)
check test -f "$tmp/epoch1/manifest.json"
check test ! -e "$tmp/ck/step-00000016"
check test -f "$tmp/ck/step-00000032/manifest.json"
check test -f "$tmp/ck/step-00000048/manifest.json"
check grep -q "resumed from partitioned checkpoint directory $tmp/ck/step-00000016 (step 16, epoch 1)" "$tmp/part2.err"
# resuming from one step directory gives the same last two epochs
"$bin" "${common[@]}" --resume "$tmp/epoch1" --metrics "$tmp/b.jsonl" --plot "$tmp/b.svg" 2> /dev/null \
  | grep '^epoch' | sed 's/ (.*//' > "$tmp/step_dir.epochs"
check diff <(tail -n 2 "$tmp/full.epochs") "$tmp/step_dir.epochs"

# a corrupted checkpoint is refused, naming the shard
cp -r "$tmp/epoch1" "$tmp/bad"
shard="$tmp/bad/model-00001-of-00001.safetensors"
printf '\x55' | dd of="$shard" bs=1 seek=$(( $(stat -c %s "$shard") - 10 )) conv=notrunc status=none
if "$bin" "${common[@]}" --resume "$tmp/bad" > "$tmp/bad.out" 2>&1; then check false; else
  check grep -q "corrupted" "$tmp/bad.out"; check grep -qF "$shard" "$tmp/bad.out"; fi
# a missing path, an empty directory (before: "truncated: 0 bytes") and a file that is not a checkpoint
fails_with() {
  local want="$1"; shift
  if "$bin" "${common[@]}" "$@" > "$tmp/fail.out" 2>&1; then echo "expected failure: $*"; return 1; fi
  grep -qF -- "$want" "$tmp/fail.out" || { echo "no '$want' in:"; cat "$tmp/fail.out"; return 1; }
}
mkdir -p "$tmp/empty"
echo "not a checkpoint" > "$tmp/text"
check fails_with "no such file or directory" --resume "$tmp/nothing"
check grep -qF "$tmp/nothing" "$tmp/fail.out"
check fails_with "resume: '$tmp/empty' is a directory with no committed checkpoint" --resume "$tmp/empty"
check fails_with "resume: '$tmp/text' is not a checkpoint" --resume "$tmp/text"
# a missing dataset is a clear error, not a crash
if "$bin" --data "$tmp/nowhere" --epochs 1 > "$tmp/nodata.out" 2>&1; then check false; else
  check grep -q "nowhere" "$tmp/nodata.out"; fi

echo "$pass passed, $fail failed"
test "$fail" -eq 0

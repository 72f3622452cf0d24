#!/usr/bin/env bash
# Chaos: the GPT example at pp 2 x dp 2 under weftrun (tools/weftrun.py), one
# of its ranks killed with SIGKILL at a random moment of each of its first
# three attempts. weftrun restarts each time from the newest committed
# checkpoint (one per evaluation), reports each failure, and the run
# completes; its last evaluation, final validation loss and sample equal an
# uninterrupted run's, bit for bit (every restart kept the layout), and the
# checkpoint directory holds only committed checkpoints.
# Usage: chaos_test.sh GPT MPIRUN_SH WEFTRUN
set -uo pipefail
gpt="$1" mpirun_sh="$2" weftrun="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
[ -d /usr/share/games/fortunes ] || { echo "Debian's fortunes are not installed (./bazelw installs them)"; exit 1; }
common=(--dim 32 --heads 2 --layers 2 --context 32 --batch-size 8 --steps 1200 --eval-interval 100 --warmup 2
        --eval-batches 2 --final-sample 40 --threads 1 --no-progress --pp 2 --dp 2)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
ranks_of() {  # the example's own processes of the run saving into $1
  for p in $(pgrep -f -- "--save $1"); do
    [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$gpt")" ] && echo "$p"
  done
}

timeout 300 "$mpirun_sh" -np 4 "$gpt" "${common[@]}" --metrics "$tmp/ref.jsonl" --plot "$tmp/ref.svg" \
  > "$tmp/ref.out" 2> "$tmp/ref.err"
check test $? -eq 0

timeout 600 "$weftrun" --np 4 --max-restarts 5 --mpirun "$mpirun_sh" --log "$tmp/restarts.jsonl" -- \
  "$gpt" "${common[@]}" --save "$tmp/ck" --metrics "$tmp/chaos.jsonl" --plot "$tmp/chaos.svg" \
  > "$tmp/chaos.out" 2> "$tmp/chaos.err" &
launcher=$!
for k in 1 2 3; do
  for _ in $(seq 1 1200); do  # this attempt's four ranks are up
    grep -q "^weftrun: attempt $k:" "$tmp/chaos.err" && [ "$(ranks_of "$tmp/ck" | wc -l)" -eq 4 ] && break
    sleep 0.05
  done
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.5 + 2.5 * r / 32767 }')"
  victim=$(ranks_of "$tmp/ck" | shuf -n 1)
  echo "=== attempt $k: SIGKILL to pid ${victim:-none} at $(date +%T.%N)"
  [ -n "$victim" ] && kill -KILL "$victim"
done
wait "$launcher"
rc=$?
echo "=== weftrun: rc=$rc"; grep -a '^weftrun: ' "$tmp/chaos.err"
echo "=== restart log"; cat "$tmp/restarts.jsonl"
check test "$rc" -eq 0
check test "$(grep -c '"outcome": "failed"' "$tmp/restarts.jsonl")" -eq 3
check test "$(grep -c '"outcome": "finished"' "$tmp/restarts.jsonl")" -eq 1
check grep -q '^weftrun: attempt 4 finished (3 failures restarted)' "$tmp/chaos.err"
check grep -q 'exited on signal 9' "$tmp/chaos.err"

last() { grep -ao '^step 1200/1200: train_loss=[0-9.]* val_loss=[0-9.]*' "$1"; }
check test -n "$(last "$tmp/ref.out")"
check test "$(last "$tmp/ref.out")" = "$(last "$tmp/chaos.out")"
check test "$(tail -n 1 "$tmp/ref.out")" = "$(tail -n 1 "$tmp/chaos.out")"  # val_loss=...
check test "$(sed -n '/^sample:$/,/^val_loss=/p' "$tmp/ref.out" | md5sum)" = \
  "$(sed -n '/^sample:$/,/^val_loss=/p' "$tmp/chaos.out" | sed -n '/^sample:$/,/^val_loss=/p' | md5sum)"
# Only committed checkpoints are left: a save cut short leaves a hidden .tmp- directory, which the next
# save removes (the last attempt saved), and nothing that looks like a checkpoint.
shopt -s dotglob
for d in "$tmp"/ck/*; do
  check test -f "$d/manifest.json"
done
shopt -u dotglob

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# Preemption end to end (train/preemption.h) on the GPT example at pp 2 under
# mpirun: SIGUSR1 sent to one rank's process, as a scheduler warns a job,
# stops both ranks at the same step; the run saves a checkpoint there and
# exits 75 (resume me), naming the rank and the step. Resumed with --resume,
# the run's remaining evaluation lines, final validation loss and sample
# equal those of a run never interrupted, bit for bit.
# Usage: preemption_test.sh GPT MPIRUN_SH
set -uo pipefail
gpt="$1" mpirun_sh="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
[ -d /usr/share/games/fortunes ] || { echo "Debian's fortunes are not installed (./bazelw installs them)"; exit 1; }
common=(--dim 32 --heads 2 --layers 2 --context 32 --batch-size 8 --steps 1500 --eval-interval 500 --warmup 2
        --eval-batches 2 --final-sample 40 --threads 1 --no-progress --pp 2)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

# The reference: never interrupted.
timeout 300 "$mpirun_sh" -np 2 "$gpt" "${common[@]}" --metrics "$tmp/ref.jsonl" --plot "$tmp/ref.svg" \
  > "$tmp/ref.out" 2> "$tmp/ref.err"
check test $? -eq 0

# Preempted: once the first evaluation is out, SIGUSR1 to one rank (not to mpirun).
timeout 300 "$mpirun_sh" -np 2 "$gpt" "${common[@]}" --save "$tmp/ck" --metrics "$tmp/cut.jsonl" \
  --plot "$tmp/cut.svg" > "$tmp/cut.out" 2> "$tmp/cut.err" &
launcher=$!
for _ in $(seq 1 600); do grep -aq '^step 500/' "$tmp/cut.out" 2>/dev/null && break; sleep 0.05; done
rank_pid=""
for p in $(pgrep -f -- "--save $tmp/ck"); do  # the ranks: processes running the example binary itself
  [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$gpt")" ] && rank_pid=$p
done
check test -n "$rank_pid"
[ -n "$rank_pid" ] && kill -USR1 "$rank_pid"
wait "$launcher"
rc=$?
echo "=== preempted run: rc=$rc"; grep -a 'stopping\|preempted' "$tmp/cut.err"
check test "$rc" -eq 75
check grep -aq '^gpt: stopping at step [0-9]* on signal 10 (User defined signal 1) received by rank [01], after saving' \
  "$tmp/cut.err"
stop=$(grep -ao 'preempted at step [0-9]*' "$tmp/cut.err" | grep -o '[0-9]*$')
check test -n "$stop"
check test "${stop:-0}" -lt 1500
check test -f "$tmp/ck/step-$(printf %08d "${stop:-0}")/manifest.json"
check grep -aq "^gpt: preempted at step $stop; resume with --resume $tmp/ck (exit status 75)" "$tmp/cut.err"

# Resumed: the rest of the run is the reference's.
timeout 300 "$mpirun_sh" -np 2 "$gpt" "${common[@]}" --resume "$tmp/ck" --metrics "$tmp/res.jsonl" \
  --plot "$tmp/res.svg" > "$tmp/res.out" 2> "$tmp/res.err"
check test $? -eq 0
check grep -aq "resumed from partitioned checkpoint directory .*step-$(printf %08d "${stop:-0}") (step $stop" \
  "$tmp/res.err"
losses() { grep -ao '^step [0-9]*/1500: train_loss=[0-9.]* val_loss=[0-9.]*' "$1" | awk -v first="$2" \
  '{split($2, s, "/"); if (s[1] + 0 > first) print}'; }
check test -n "$(losses "$tmp/ref.out" "${stop:-0}")"
check test "$(losses "$tmp/ref.out" "${stop:-0}")" = "$(losses "$tmp/res.out" "${stop:-0}")"
check test "$(sed -n '/^sample:$/,/^val_loss=/p' "$tmp/ref.out" | md5sum)" = \
  "$(sed -n '/^sample:$/,/^val_loss=/p' "$tmp/res.out" | md5sum)"
check grep -aq '^val_loss=[0-9]\.[0-9]\{4\}$' <(tail -n 1 "$tmp/res.out")

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# fashion_mnist --optimizer: each optimizer trains the MLP (one epoch on 6,400
# images lifts test accuracy well above chance, 10%), a checkpoint saves its
# state and --resume continues with it, and a bad choice is refused naming
# the flag. --ema: the weights' moving average is evaluated and checkpointed.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--model mlp --limit-train 6400 --limit-test 1000 --no-progress --threads 2)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

for spec in "adam 0.001" "adamw 0.001" "rmsprop 0.001" "adagrad 0.05"; do
  set -- $spec
  opt=$1 lr=$2
  "$bin" "${common[@]}" --optimizer "$opt" --lr "$lr" --epochs 1 --metrics "$tmp/$opt.jsonl" --plot "$tmp/$opt.svg" \
    > "$tmp/$opt.out" 2> "$tmp/$opt.err"
  acc=$(sed -n 's/^test_accuracy=//p' "$tmp/$opt.out")
  echo "$opt --lr $lr: test_accuracy=$acc"
  check awk -v a="$acc" 'BEGIN { exit !(a >= 0.6) }'
done

# Two epochs straight, and one epoch saved then resumed for the second: the same weights give the same accuracy.
"$bin" "${common[@]}" --optimizer rmsprop --lr 0.001 --epochs 2 --metrics "$tmp/full.jsonl" --plot "$tmp/full.svg" \
  > "$tmp/full.out" 2> /dev/null
"$bin" "${common[@]}" --optimizer rmsprop --lr 0.001 --epochs 2 --stop-after-epoch 1 --save "$tmp/ck" \
  --metrics "$tmp/a.jsonl" --plot "$tmp/a.svg" > /dev/null 2>&1
"$bin" "${common[@]}" --optimizer rmsprop --lr 0.001 --epochs 2 --resume "$tmp/ck" \
  --metrics "$tmp/b.jsonl" --plot "$tmp/b.svg" > "$tmp/resumed.out" 2> /dev/null
check diff <(grep test_accuracy "$tmp/full.out") <(grep test_accuracy "$tmp/resumed.out")

# --ema: the test accuracy is the average's, above chance; saved and resumed, the average comes back with the
# checkpoint and the accuracy is the straight run's.
"$bin" "${common[@]}" --ema 0.9 --epochs 2 --metrics "$tmp/ema.jsonl" --plot "$tmp/ema.svg" > "$tmp/ema.out" 2> /dev/null
acc=$(sed -n 's/^test_accuracy=//p' "$tmp/ema.out")
echo "sgd --ema 0.9: test_accuracy=$acc"
check awk -v a="$acc" 'BEGIN { exit !(a >= 0.6) }'
"$bin" "${common[@]}" --ema 0.9 --epochs 2 --stop-after-epoch 1 --save "$tmp/ck_ema" \
  --metrics "$tmp/c.jsonl" --plot "$tmp/c.svg" > /dev/null 2>&1
"$bin" "${common[@]}" --ema 0.9 --epochs 2 --resume "$tmp/ck_ema" \
  --metrics "$tmp/d.jsonl" --plot "$tmp/d.svg" > "$tmp/ema_resumed.out" 2> /dev/null
check diff <(grep test_accuracy "$tmp/ema.out") <(grep test_accuracy "$tmp/ema_resumed.out")
# Without the average the straight run ends elsewhere (the model is the average, not the last weights).
"$bin" "${common[@]}" --epochs 2 --metrics "$tmp/plain.jsonl" --plot "$tmp/plain.svg" > "$tmp/plain.out" 2> /dev/null
check test "$(grep test_accuracy "$tmp/plain.out")" != "$(grep test_accuracy "$tmp/ema.out")"
if "$bin" --ema 1 > /dev/null 2> "$tmp/bad_ema.err"; then echo "FAILED: --ema 1 was accepted"; fail=$((fail+1)); fi
check grep -q -- "--ema must be in \[0, 1)" "$tmp/bad_ema.err"

if "$bin" --optimizer lamb > /dev/null 2> "$tmp/bad.err"; then echo "FAILED: --optimizer lamb was accepted"; fail=$((fail+1)); fi
check grep -q -- "--optimizer" "$tmp/bad.err"

echo "$pass passed, $fail failed"
test "$fail" -eq 0

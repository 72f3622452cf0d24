#!/usr/bin/env bash
# The examples' command lines (examples/flags.h): --help lists every flag the
# README documents and exits 0; a bad number, a missing value and an unknown
# flag fail with an error naming the flag, before any training (or MPI) starts.
# Usage: example_flags_test.sh FASHION_MNIST FASHION_MNIST_DDP
set -uo pipefail
single="$1" ddp="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
# fails_with MESSAGE BIN ARGS...: BIN exits non-zero and prints MESSAGE.
fails_with() {
  local want="$1"; shift
  if "$@" > "$tmp/out" 2>&1; then echo "expected failure: $*"; return 1; fi
  grep -qF -- "$want" "$tmp/out" || { echo "no '$want' in:"; cat "$tmp/out"; return 1; }
}

common=(--data DIR --model --epochs --batch-size --lr --momentum --weight-decay --seed --threads --workers
        --save --resume --metrics --plot --limit-train --limit-test --no-progress)
for bin in "$single" "$ddp"; do
  check "$bin" --help > "$tmp/help"
  for flag in "${common[@]}"; do check grep -qF -- "$flag" "$tmp/help"; done
  check grep -qF -- "(default 128)" "$tmp/help"
  fails_with "flag --epochs: 'two' is not an integer" "$bin" --epochs two && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "flag --lr: '0.1x' is not a number" "$bin" --lr=0.1x && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "flag --save needs a value" "$bin" --save && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "unknown flag '--epoch'" "$bin" --epoch 2 && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "flag --model must be one of cnn|mlp" "$bin" --model resnet && pass=$((pass+1)) || fail=$((fail+1))
done
check grep -qF -- "--stop-after-epoch K" <("$single" --help)
check grep -qF -- "--amp none|bf16" <("$single" --help)
check grep -qF -- "--bucket-cap-mb X" <("$ddp" --help)

echo "$pass passed, $fail failed"
test "$fail" -eq 0

#!/usr/bin/env bash
# The examples' command lines (examples/flags.h): --help lists every flag the
# README documents and exits 0; a bad number, a missing value and an unknown
# flag fail with an error naming the flag, before any training (or MPI) starts.
# The training flags come from one registration (examples/train_flags.h):
# each example's help shows them with its own defaults and wording. A check
# after parsing names the one flag at fault and its value; --data must be a
# directory and --resume must exist, checked before anything starts. Flag
# errors exit 2.
# Usage: example_flags_test.sh FASHION_MNIST FASHION_MNIST_DDP FASHION_MNIST_PIPE
set -uo pipefail
single="$1" ddp="$2" pipe="$3"
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
        --metrics --plot --limit-train --limit-test --no-progress)
for bin in "$single" "$ddp" "$pipe"; do
  check "$bin" --help > "$tmp/help"
  for flag in "${common[@]}"; do check grep -qF -- "$flag" "$tmp/help"; done
  check grep -qF -- "--save PATH" "$tmp/help"
  check grep -qF -- "--resume PATH" "$tmp/help"
  check grep -qF -- "--keep-last N" "$tmp/help"
  check grep -qF -- "(default 2)" "$tmp/help"
  check grep -qF -- "(default 128)" "$tmp/help"
  fails_with "flag --epochs: 'two' is not an integer" "$bin" --epochs two && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "flag --lr: '0.1x' is not a number" "$bin" --lr=0.1x && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "flag --metrics needs a value" "$bin" --metrics && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "--batch-size must be positive (got 0)" "$bin" --batch-size 0 && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "--epochs must be positive (got 0)" "$bin" --epochs 0 --batch-size 8 && pass=$((pass+1)) || fail=$((fail+1))
  "$bin" --epochs 0 > /dev/null 2>&1; check test $? -eq 2
  fails_with "--data $tmp/help is a file; expected a directory of the four Fashion-MNIST IDX files (train-images-idx3-ubyte.gz" \
    "$bin" --data "$tmp/help" && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "--data $tmp/nowhere: no such directory; expected a directory of the four" "$bin" --data "$tmp/nowhere" \
    && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "--lr must be positive (got -0.1)" "$bin" --lr=-0.1 && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "unknown flag '--epoch'" "$bin" --epoch 2 && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "flag --model must be one of cnn|mlp" "$bin" --model resnet && pass=$((pass+1)) || fail=$((fail+1))
done
for bin in "$single" "$ddp" "$pipe"; do
  fails_with "flag --save needs a value" "$bin" --save && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "--resume $tmp/none.weft: no such file or directory" "$bin" --resume "$tmp/none.weft" \
    && pass=$((pass+1)) || fail=$((fail+1))
  fails_with "--keep-last must be >= 0 (0: keep all; got -1)" "$bin" --keep-last -1 \
    && pass=$((pass+1)) || fail=$((fail+1))
done
check grep -qF -- "--stop-after-epoch K" <("$pipe" --help)
# Each example's defaults and wording.
check grep -qF -- "(default fashion_mnist_metrics.jsonl)" <("$single" --help)
check grep -qF -- "(default fashion_mnist_ddp.svg)" <("$ddp" --help)
check grep -qF -- "(default fashion_mnist_pipe_metrics.jsonl)" <("$pipe" --help)
check grep -qF -- "CPU threads (default all cores)" <("$single" --help)
check grep -qF -- "global batch size, split across ranks (default 128)" <("$ddp" --help)
check grep -qF -- "CPU threads per rank (default cores / ranks on this node, at least 1)" <("$ddp" --help)
check grep -qF -- "batch size (one pipeline step) (default 128)" <("$pipe" --help)
check grep -qF -- "--stop-after-epoch K" <("$single" --help)
check grep -qF -- "--amp none|bf16" <("$single" --help)
check grep -qF -- "--bucket-cap-mb X" <("$ddp" --help)
check grep -qF -- "--device D" <("$ddp" --help)
check grep -qF -- "--amp none|bf16" <("$ddp" --help)
check grep -qF -- "--stop-after-epoch K" <("$ddp" --help)
for flag in "--chunks N" "--balance auto|A,B,..." "--schedule gpipe|1f1b|interleaved|zb|zbv|interleaved-zb" "--virtual N" \
            "--checkpoint always|except_last|never" "--chart PATH" "--trace PATH"; do
  check grep -qF -- "$flag" <("$pipe" --help)
done
fails_with "flag --schedule must be one of gpipe|1f1b|interleaved|zb|zbv|interleaved-zb, got 'zb2'" "$pipe" --schedule zb2 \
  && pass=$((pass+1)) || fail=$((fail+1))
# --balance: auto (measured and planned, a rank's stages together) is the default, as in
# fashion_mnist_hybrid and gpt; --virtual 2 with a one-stage schedule is named.
check grep -qF -- "a rank's stages together when it holds several (default auto)" <("$pipe" --help)
check grep -qF -- "(default 2 for interleaved, interleaved-zb and zbv, else 1)" <("$pipe" --help)
fails_with "--schedule 1f1b runs one stage per rank, but --virtual gives 2" \
  "$pipe" --schedule 1f1b --virtual 2 && pass=$((pass+1)) || fail=$((fail+1))
fails_with "--balance: 'x' in '5,x' is not a whole number" "$pipe" --balance 5,x && pass=$((pass+1)) || fail=$((fail+1))

echo "$pass passed, $fail failed"
test "$fail" -eq 0

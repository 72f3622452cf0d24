#!/usr/bin/env bash
# Under mpirun every rank parses the same command line; --help and flag errors
# must be printed once (by launcher rank 0), not once per rank, and every rank
# must end as one process would: 0 after --help, non-zero after a flag error.
# Checked at -np 2 for each multi-process example, with errors found by the
# parser (a bad number), by the checks after it (--epochs 0, --virtual 2
# with 1f1b, --virtual 3 with zbv) and after MPI is up (a grid that does not
# tile the world).
# Usage: example_flags_mpirun_test.sh FASHION_MNIST_DDP FASHION_MNIST_PIPE FASHION_MNIST_HYBRID GPT MPIRUN_SH
set -uo pipefail
ddp="$1" pipe="$2" hybrid="$3" gpt="$4" mpirun_sh="$5"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }

# once WANT_RC LINE CMD...: CMD under mpirun -np 2 exits with WANT_RC ("nonzero":
# any but 0) and prints LINE (a fixed string, stdout and stderr together) exactly once.
once() {
  local want_rc="$1" line="$2"; shift 2
  timeout 120 "$mpirun_sh" -np 2 "$@" > "$tmp/out" 2>&1
  local rc=$? n
  n="$(grep -cF -- "$line" "$tmp/out")"
  if [ "$want_rc" = nonzero ] && [ "$rc" -eq 0 ] || { [ "$want_rc" != nonzero ] && [ "$rc" -ne "$want_rc" ]; }; then
    echo "rc $rc (want $want_rc): $*"; cat "$tmp/out"; return 1
  fi
  [ "$n" -eq 1 ] || { echo "'$line' printed $n times (want 1): $*"; cat "$tmp/out"; return 1; }
}

for bin in "$ddp" "$pipe" "$hybrid"; do
  name="$(basename "$bin")"
  check once 0 "usage: mpirun" "$bin" --help
  check once 0 "  --epochs N" "$bin" -h --epochs 3
  check once nonzero "$name: error: flag --epochs: 'two' is not an integer" "$bin" --epochs two
  check once nonzero "$name: error: --epochs must be positive (got 0)" "$bin" --epochs 0
  check once nonzero "$name: error: unknown flag '--bogus'" "$bin" --bogus
done
check once nonzero "fashion_mnist_pipe: error: --schedule 1f1b runs one stage per rank, but --virtual gives 2" \
  "$pipe" --schedule 1f1b --virtual 2
check once nonzero "fashion_mnist_hybrid: error: --schedule zbv places two stages per rank in a V" \
  "$hybrid" --schedule zbv --virtual 3
# Found after MPI is initialised, by every rank alike: still printed once.
check once nonzero "fashion_mnist_hybrid: error: --pp 3 does not divide the world size 2" "$hybrid" --pp 3
check once 0 "usage: gpt [flags]" "$gpt" --help
check once nonzero "gpt: error: --val-fraction must be in (0, 0.5], got 0.7" "$gpt" --val-fraction 0.7
check once nonzero "gpt: error: --pp 3 does not divide the world size 2" "$gpt" --pp 3 --steps 2 --warmup 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# Lays out a GPU bundle as tools/gpu_bundle.sh does (scripts, tests/, bin/, bench/,
# data/, an empty lib/: the binaries find their libraries as built here), runs
# all.sh --dry-run on it, and checks its summary: six step lines, none failed,
# every test binary loading and listing its cases. Then a bundle with a test
# binary that cannot load must fail step 2, naming it.
#   all_dry_run_test.sh TEST_BINARY...
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
DATA=/usr/share/datasets/fashion-mnist
B=$TEST_TMPDIR/bundle
mkdir -p "$B"/{tests,bin,bench,data,lib}
cp tools/gpu/all.sh tools/gpu/run.sh tools/gpu/bench.sh tools/gpu/env.sh "$B/"
cp bench/cnn_gpu_torch.py bench/gpt2_torch.py "$B/bench/"
for b in examples/fashion_mnist bench/cnn_gpu_weft bench/gpt2_weft bench/sgemm_mkl_ab bench/gemm_shapes; do ln -s "$PWD/$b" "$B/bin/"; done
n=0
for t in "$@"; do ln -s "$PWD/$t" "$B/tests/"; n=$((n + 1)); done
[ "$n" -ge 10 ] || fail "expected the GPU test binaries as arguments, got $n"
for f in "$DATA"/*.gz; do ln -s "$f" "$B/data/"; done

RESULTS=$TEST_TMPDIR/r1 bash "$B/all.sh" --dry-run >"$TEST_TMPDIR/out1" 2>&1
rc=$?
cat "$TEST_TMPDIR/out1"
[ "$rc" -eq 0 ] || fail "all.sh --dry-run exited $rc"
S=$TEST_TMPDIR/r1/summary.txt
[ "$(grep -c '^step [1-6] ' "$S")" -eq 6 ] || fail "expected 6 step lines in $S"
grep -q '^step .*: FAILED' "$S" && fail "a step failed in the dry run"
# step 2 lists every binary but pipe_gpu_test, which step 4 lists
grep -q "^step 2 tests: skipped: dry run; $((n - 1)) binaries load and list [1-9][0-9]* cases" "$S" ||
  fail "step 2 does not say that all $((n - 1)) binaries but pipe_gpu_test load"
grep -q '^step 4 pipeline: skipped: dry run; pipe_gpu_test loads and lists 3 cases' "$S" || fail "step 4"
grep -q '^step 6 cpu: skipped: dry run .*sgemm_mkl_ab and gemm_shapes load' "$S" || fail "step 6"
grep -q '^all.sh: 0 steps failed' "$S" || fail "the last line"
[ -s "$TEST_TMPDIR/r1/logs.tgz" ] || fail "no logs.tgz"

# A test binary that cannot start (a missing shared library) fails step 2 by name.
printf '#!/bin/sh\necho "error while loading shared libraries: libmissing.so" >&2\nexit 127\n' >"$B/tests/broken_gpu_test"
chmod +x "$B/tests/broken_gpu_test"
RESULTS=$TEST_TMPDIR/r2 bash "$B/all.sh" --dry-run >"$TEST_TMPDIR/out2" 2>&1 && fail "all.sh passed with a broken binary"
grep -q '^step 2 tests: FAILED: .*broken_gpu_test: error while loading shared libraries' "$TEST_TMPDIR/r2/summary.txt" ||
  { cat "$TEST_TMPDIR/r2/summary.txt"; fail "step 2 does not name the broken binary"; }
grep -q '^all.sh: 1 steps failed' "$TEST_TMPDIR/r2/summary.txt" || fail "the broken run's last line"
echo "PASS"

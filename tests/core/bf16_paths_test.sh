#!/usr/bin/env bash
# The bfloat16 matmul tests (matmul_test, autocast_test) once more on every
# bfloat16 GEMM path this CPU has besides its default (WEFT_CPU_BF16,
# core/cpu/gemm_bf16.h), so a machine checks all of them whichever it is:
# amx_emulated everywhere, avx512_bf16 where the CPU has it and it is not
# the default (AMX, or an Intel CPU's float32), avx512_emulated where it has
# AVX-512, float32 where the default is a tile or pair path. Prints the paths
# it ran.
# Usage: bf16_paths_test.sh GEMM_BF16_TEST MATMUL_TEST AUTOCAST_TEST
set -uo pipefail
probe="$1"; shift
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
default=$("$probe" --gtest_filter='*Chosen*' | sed -n 's/^bfloat16 matmuls take the \(.*\) path$/\1/p')
grep -q avx512f /proc/cpuinfo && has_avx512=1 || has_avx512=0
grep -q avx512_bf16 /proc/cpuinfo && has_avx512_bf16=1 || has_avx512_bf16=0
pass=0 fail=0
for path in amx_emulated avx512_bf16 avx512_emulated float32; do
  [ "$path" = "$default" ] && continue
  [ "$path" = avx512_bf16 ] && [ "$has_avx512_bf16" = 0 ] && continue
  [ "$path" = avx512_emulated ] && [ "$has_avx512" = 0 ] && continue
  for t in "$@"; do
    if WEFT_CPU_BF16=$path "$t" > "${TEST_TMPDIR:-/tmp}/out" 2>&1; then
      pass=$((pass+1)); echo "WEFT_CPU_BF16=$path $(basename "$t"): $(grep -c '^\[       OK \]' "${TEST_TMPDIR:-/tmp}/out") cases pass"
    else
      fail=$((fail+1)); echo "FAILED: WEFT_CPU_BF16=$path $(basename "$t")"; tail -n 30 "${TEST_TMPDIR:-/tmp}/out"
    fi
  done
done
echo "default path: $default; $pass passed, $fail failed"
[ "$fail" -eq 0 ]

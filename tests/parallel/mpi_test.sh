#!/usr/bin/env bash
# Runs a multi-process gtest binary under mpirun with 2 and then 4 ranks.
# Usage: mpi_test.sh BINARY [gtest args...]. Fails if any rank fails.
set -uo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
# Tests in other packages run this script through a symlink named after them:
# find mpirun.sh in the runfiles then.
mpirun_sh="$here/mpirun.sh"
if [ ! -x "$mpirun_sh" ] && [ -n "${TEST_SRCDIR:-}" ]; then
  mpirun_sh="$TEST_SRCDIR/${TEST_WORKSPACE:-weft}/tests/parallel/mpirun.sh"
fi
bin="$1"; shift
export WEFT_COLLECTIVE_TIMEOUT_S="${WEFT_COLLECTIVE_TIMEOUT_S:-30}"
# Every rank would create and remove the same premature-exit file; the second
# removal fails and gtest then exits without MPI_Finalize.
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
for np in 2 4; do
  echo "=== mpirun -np $np $bin $*"
  start=$(date +%s.%N)
  timeout 120 "$mpirun_sh" -np "$np" "$bin" "$@"
  rc=$?
  echo "=== np=$np rc=$rc in $(awk "BEGIN{print $(date +%s.%N) - $start}") s"
  if [ "$rc" -ne 0 ]; then exit 1; fi
done

#!/usr/bin/env bash
# A rank SIGKILLed in the middle of a checkpoint save under mpirun
# (checkpoint_kill_driver.cc): pp 2 x dp (np/2) with ZeRO commits step 2,
# then in step 4's save rank 1 dies right after writing its first file
# (-np 2 and 4), or rank 0 dies with every shard written, just before it
# would write the manifest (-np 4).
# Asserts: the victim's status is 137; every survivor exits 1 naming the
# missing rank ("checkpoint save to 'ROOT/step-00000004' failed: ...
# missing ranks: [1] ...": the save's agreement cannot complete); then, in a fresh
# job (-np 2), the latest committed checkpoint is still step 2, intact
# (every CRC), no step-00000004 exists, only its .tmp- directory (which the
# next save removes), and training resumes from step 2 equal to one process.
# Usage: checkpoint_kill_test.sh DRIVER
set -uo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
mpirun_sh="$here/../mpirun.sh"  # //tests/parallel:mpirun.sh
if [ ! -x "$mpirun_sh" ] && [ -n "${TEST_SRCDIR:-}" ]; then
  mpirun_sh="$TEST_SRCDIR/${TEST_WORKSPACE:-weft}/tests/parallel/mpirun.sh"
fi
driver="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
export WEFT_COLLECTIVE_TIMEOUT_S=5
unset GTEST_OUTPUT XML_OUTPUT_FILE WEFT_HEARTBEAT_TIMEOUT_S WEFT_DEBUG_COLLECTIVES TEST_PREMATURE_EXIT_FILE
fail=0
for scenario in "2 1 wrote" "4 1 wrote" "4 0 manifest"; do
  read -r np victim event <<<"$scenario"
  dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/weft_ck_kill.XXXXXX")"
  root="$dir/ck"
  WEFT_DIR="$dir" timeout 90 "$mpirun_sh" --enable-recovery -x WEFT_DIR -x WEFT_COLLECTIVE_TIMEOUT_S -np "$np" \
    sh -c '"$0" "$@" 2>"$WEFT_DIR/err.$OMPI_COMM_WORLD_RANK"; echo $? >"$WEFT_DIR/rc.$OMPI_COMM_WORLD_RANK"' \
    "$driver" save "$root" "$victim" "$event" >/dev/null 2>"$dir/mpirun.err"
  mrc=$?
  echo "=== np=$np, rank $victim killed at '$event': mpirun rc=$mrc"
  [ "$mrc" = 124 ] && { echo "FAIL: mpirun hung (killed by timeout)"; fail=1; }
  vrc="$(cat "$dir/rc.$victim" 2>/dev/null || echo none)"
  echo "--- victim rank $victim rc=$vrc:"; cat "$dir/err.$victim"
  [ "$vrc" = 137 ] || { echo "FAIL: victim rc=$vrc, expected 137"; fail=1; }
  grep -q "^rank $victim: killing itself after '$event" "$dir/err.$victim" ||
    { echo "FAIL: the victim did not die in the middle of the save"; fail=1; }
  for ((r = 0; r < np; r++)); do
    [ "$r" -eq "$victim" ] && continue
    rc="$(cat "$dir/rc.$r" 2>/dev/null || echo none)"
    echo "--- rank $r rc=$rc:"; cat "$dir/err.$r"
    [ "$rc" = 1 ] || { echo "FAIL: rank $r rc=$rc, expected 1"; fail=1; }
    grep -q "^rank $r: step 2 committed" "$dir/err.$r" || { echo "FAIL: rank $r did not commit step 2"; fail=1; }
    grep -qE "^rank $r: error: checkpoint save to '$root/step-00000004' failed: .*missing ranks: \[$victim\]" "$dir/err.$r" ||
      { echo "FAIL: rank $r does not name the missing rank $victim"; fail=1; }
  done
  echo "--- the checkpoints after the failed save:"; ls -a "$root"
  timeout 90 "$mpirun_sh" -np 2 "$driver" verify "$root" 2>"$dir/verify.err" >/dev/null
  vrc=$?
  cat "$dir/verify.err"
  [ "$vrc" = 0 ] || { echo "FAIL: verify rc=$vrc"; fail=1; }
  grep -q "^rank 0: verified (step 2," "$dir/verify.err" || { echo "FAIL: step 2 was not loaded and resumed"; fail=1; }
  [ $fail -ne 0 ] && { echo "mpirun stderr:"; cat "$dir/mpirun.err"; }
done
[ $fail -eq 0 ] && echo "checkpoint kill test: 3 passed, 0 failed"
exit $fail

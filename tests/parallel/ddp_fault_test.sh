#!/usr/bin/env bash
# A rank killed mid-training: DDP over MPI with 2 and 4 ranks, rank 1 SIGKILLs
# itself in step 3 (ddp_fault_driver.cc). Usage: ddp_fault_test.sh DRIVER MODE,
# MODE between (before step 3's forward), backward (inside step 3's backward,
# after it announced its first bucket's allreduce) or backward_at_timeout (the
# same with the heartbeat threshold raised past the timeout, so the survivors
# find out at the collective timeout instead).
#
# Asserts, per survivor: exit status 1; stderr names the collective, its
# sequence number and the dead rank:
#   allreduce(float32, N elements, avg) (sequence S) on world failed:
#   missing ranks: [1] stopped responding (no heartbeat for ...
# (backward_at_timeout: "... timed out after 5 s: missing ranks: [1]" then
# "stopped responding" or, where the survivor got past the victim's last
# collective, "did not arrive"), with S the first collective of step 3
# (between) or one of step 3's collectives or step 4's first (backward: a
# survivor may complete a bucket the victim contributed to before dying); and
# that it failed less than the collective timeout (5 s) after the victim died
# (backward_at_timeout: at the timeout, less than 3 s after it). The victim's
# status is 137.
# Open MPI tears the job down when a process dies unless --enable-recovery is
# given, so each rank runs under a wrapper recording its status and stderr
# (as in fault_test.sh).
set -uo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
driver="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
mode="$2"
victim=1
step=3
timeout_s=5
export WEFT_COLLECTIVE_TIMEOUT_S=$timeout_s
unset GTEST_OUTPUT XML_OUTPUT_FILE WEFT_HEARTBEAT_TIMEOUT_S WEFT_DEBUG_COLLECTIVES
driver_mode="$mode"
failure="failed: missing ranks: \[$victim\] stopped responding \(no heartbeat for [0-9.]+ s: the process died or is stuck\)"
if [ "$mode" = backward_at_timeout ]; then
  driver_mode=backward
  export WEFT_HEARTBEAT_TIMEOUT_S=100
  failure="timed out after $timeout_s s: missing ranks: \[$victim\] (stopped responding \(no heartbeat for [0-9.]+ s: the process died or is stuck\)|did not arrive)"
fi
fail=0
for np in 2 4; do
  dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/weft_ddp_fault.XXXXXX")"
  start=$(date +%s.%N)
  WEFT_DIR="$dir" timeout 90 "$here/mpirun.sh" --enable-recovery \
    -x WEFT_DIR -x WEFT_COLLECTIVE_TIMEOUT_S ${WEFT_HEARTBEAT_TIMEOUT_S:+-x WEFT_HEARTBEAT_TIMEOUT_S} -np "$np" \
    sh -c '"$0" "$@" 2>"$WEFT_DIR/err.$OMPI_COMM_WORLD_RANK"; echo $? >"$WEFT_DIR/rc.$OMPI_COMM_WORLD_RANK"' \
    "$driver" "$driver_mode" "$victim" "$step" >/dev/null 2>"$dir/mpirun.err" &
  wait $!
  mrc=$?
  elapsed=$(awk "BEGIN{print $(date +%s.%N) - $start}")
  echo "=== np=$np mode=$mode: mpirun rc=$mrc, $elapsed s"
  verr="$(cat "$dir/err.$victim" 2>/dev/null)"
  killed_at="$(sed -n "s/^rank $victim: killing itself at \([0-9.]*\)$/\1/p" <<<"$verr")"
  vrc="$(cat "$dir/rc.$victim" 2>/dev/null || echo none)"
  echo "--- victim rank $victim rc=$vrc, killed at ${killed_at:-?}"
  [ "$vrc" = 137 ] || { echo "FAIL: victim rc=$vrc, expected 137"; fail=1; }
  [ -n "$killed_at" ] || { echo "FAIL: the victim did not report its death"; fail=1; }
  for ((r = 0; r < np; r++)); do
    [ "$r" -eq "$victim" ] && continue
    rc="$(cat "$dir/rc.$r" 2>/dev/null || echo none)"
    err="$(cat "$dir/err.$r" 2>/dev/null)"
    echo "--- rank $r rc=$rc:"
    grep -v "begins at sequence" <<<"$err"
    [ "$rc" = 1 ] || { echo "FAIL: rank $r rc=$rc, expected 1"; fail=1; }
    s3="$(sed -n "s/^rank $r: step $step begins at sequence \([0-9]*\)$/\1/p" <<<"$err")"
    s2="$(sed -n "s/^rank $r: step $((step - 1)) begins at sequence \([0-9]*\)$/\1/p" <<<"$err")"
    line="$(grep "^rank $r: error at " <<<"$err")"
    re="^rank $r: error at ([0-9.]+): .*allreduce\(float32, [0-9]+ elements, avg\) \(sequence ([0-9]+)\) on world $failure"
    if [[ -z "$s3" || -z "$s2" ]]; then
      echo "FAIL: rank $r did not reach step $step"; fail=1; continue
    fi
    if [[ ! "$line" =~ $re ]]; then
      echo "FAIL: rank $r stderr lacks the error naming the collective, sequence and missing rank [$victim]"
      fail=1; continue
    fi
    at="${BASH_REMATCH[1]}"; seq="${BASH_REMATCH[2]}"
    per_step=$((s3 - s2))
    if [ "$mode" = between ]; then lo=$s3; hi=$s3; else lo=$s3; hi=$((s3 + per_step)); fi
    if [ "$seq" -lt "$lo" ] || [ "$seq" -gt "$hi" ]; then
      echo "FAIL: rank $r failed at sequence $seq, expected [$lo, $hi] (step $step starts at $s3)"; fail=1
    fi
    if [ -n "$killed_at" ]; then
      after=$(awk "BEGIN{print $at - $killed_at}")
      echo "    rank $r failed at sequence $seq (step $step: $s3..$((s3 + per_step - 1))), $after s after the kill"
      if [ "$mode" = backward_at_timeout ]; then
        if awk "BEGIN{exit !($after < $timeout_s - 1 || $after > $timeout_s + 3)}"; then
          echo "FAIL: rank $r failed $after s after the kill, not at the ${timeout_s} s timeout"; fail=1
        fi
      elif awk "BEGIN{exit !($after >= $timeout_s)}"; then
        echo "FAIL: rank $r took $after s after the kill, not within the ${timeout_s} s timeout"; fail=1
      fi
    fi
  done
  if awk "BEGIN{exit !($elapsed > 60)}"; then echo "FAIL: took $elapsed s"; fail=1; fi
  if [ $fail -ne 0 ]; then echo "mpirun stderr:"; cat "$dir/mpirun.err"; fi
done
exit $fail

#!/usr/bin/env bash
# Fault and desync scenarios under mpirun with 2 and 4 ranks.
# Usage: fault_test.sh DRIVER SCENARIO, SCENARIO one of kill, exit, op, count.
#
# Open MPI (4.1) tears the whole job down when one process dies: mpirun kills
# the others at once, before they can report anything. `--enable-recovery`
# keeps the survivors running (mpirun then exits 0 itself), so each rank runs
# under a small shell wrapper that records its own exit status and stderr; the
# test asserts on those: the victim is gone, every other rank exits 1 within
# the collective timeout with the error naming the missing rank (kill, exit)
# or every rank names the desync (op, count, with WEFT_DEBUG_COLLECTIVES=1).
set -uo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
driver="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
scenario="$2"
victim=1
step=3
timeout_s=5
export WEFT_COLLECTIVE_TIMEOUT_S=$timeout_s
unset GTEST_OUTPUT XML_OUTPUT_FILE
case "$scenario" in
  op|count) export WEFT_DEBUG_COLLECTIVES=1 ;;
esac
fail=0
for np in 2 4; do
  dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/weft_fault.XXXXXX")"
  start=$(date +%s.%N)
  WEFT_DIR="$dir" timeout 60 "$here/mpirun.sh" --enable-recovery \
    -x WEFT_DIR -np "$np" \
    sh -c '"$0" "$@" 2>"$WEFT_DIR/err.$OMPI_COMM_WORLD_RANK"; echo $? >"$WEFT_DIR/rc.$OMPI_COMM_WORLD_RANK"' \
    "$driver" "$scenario" "$victim" "$step" >/dev/null 2>"$dir/mpirun.err" &
  wait $!
  mrc=$?
  elapsed=$(awk "BEGIN{print $(date +%s.%N) - $start}")
  echo "=== np=$np scenario=$scenario: mpirun rc=$mrc, $elapsed s"
  for ((r = 0; r < np; r++)); do
    rc="$(cat "$dir/rc.$r" 2>/dev/null || echo none)"
    err="$(cat "$dir/err.$r" 2>/dev/null)"
    echo "--- rank $r rc=$rc: $err"
    case "$scenario" in
      kill|exit)
        if [ "$r" -eq "$victim" ]; then
          want_rc=$([ "$scenario" = kill ] && echo 137 || echo 0)
          [ "$rc" = "$want_rc" ] || { echo "FAIL: victim rank $r rc=$rc, expected $want_rc"; fail=1; }
          continue
        fi
        # The victim's heartbeats stop with it (Note [liveness]): the survivors
        # fail after liveness_threshold (2.5 s), before the timeout.
        want="allreduce(float32, 8 elements, sum) (sequence $step) on world failed: missing ranks: [$victim] stopped responding (no heartbeat for"
        ;;
      op)
        if [ "$np" -eq 2 ]; then others="[0]"; else others="[0, 2, 3]"; fi
        want="collective desync on world at sequence $step (first divergence: collective): ranks $others issue allreduce(float32, 8 elements, sum) as collective $step; ranks [$victim] issue broadcast(float32, 8 elements, root 0) as collective $step"
        ;;
      count)
        if [ "$np" -eq 2 ]; then others="[0]"; else others="[0, 2, 3]"; fi
        want="collective desync on world at sequence $step (first divergence: element count): ranks $others issue allreduce(float32, 8 elements, sum) as collective $step; ranks [$victim] issue allreduce(float32, 9 elements, sum)"
        ;;
    esac
    [ "$rc" = 1 ] || { echo "FAIL: rank $r rc=$rc, expected 1"; fail=1; }
    case "$err" in
      *"rank $r: error: $want"*) ;;
      *) echo "FAIL: rank $r stderr lacks: rank $r: error: $want"; fail=1 ;;
    esac
  done
  # Well within the timeout: the survivors give up 2.5 s after the death
  # (kill, exit) or at once (op, count); allow for mpirun start-up on a loaded
  # 2-core machine.
  if awk "BEGIN{exit !($elapsed > 20)}"; then echo "FAIL: took $elapsed s"; fail=1; fi
  if [ $fail -ne 0 ]; then echo "mpirun stderr:"; cat "$dir/mpirun.err"; fi
done
exit $fail

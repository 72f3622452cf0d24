#!/usr/bin/env bash
# A pipeline stage failing mid-step under mpirun -np 2 and 4 (Pipe, 1f1b, 4
# micro-batches; pipe_fault_driver.cc): rank 1 fails in step 3 from its stage's
# forward on micro-batch 2, in the middle of its action list. Usage:
# pipe_fault_test.sh DRIVER MODE, MODE
#   kill  : rank 1 SIGKILLs itself (status 137);
#   throw : rank 1's stage throws a weft::Error; rank 1 reports it, naming its
#           stage, micro-batch and action, "PipelineRunner (schedule 1f1b) on
#           rank 1: action I of N (F1.2, micro-batch 2) failed: stage 1 of
#           rank 1 fails on purpose on micro-batch 2 of step 3", and exits 1.
#
# Asserts, per survivor: exit status 1; stderr names where it stands in its
# action list and the rank it waits for:
#   PipelineRunner (schedule 1f1b) on rank R: action I of N (RecvGrad0.2<-s1@r1,
#   micro-batch 2, waiting for stage 1 on rank 1) failed: batch_isend_irecv(1
#   ops) on world failed: missing ranks: [1] stopped responding (no heartbeat
#   for 2.5 s: the process died or is stuck), ...
# or "... timed out after 5 s: missing ranks: [P] (the peer did not post the
# matching operation)", where the action's micro-batch, stage and rank agree
# with the rest, and P = 1 (the victim) for the victim's neighbours (ranks 0
# and 2); a rank further away (rank 3) waits for a neighbour that failed and
# exited before it. An exited rank (throw) looks to the MPI backend like a
# killed one: its heartbeats stop (Note [liveness] in
# parallel/comm/mpi/liveness.cc). Every survivor must have reached step 3, not step
# 4, and failed less than the collective timeout (5 s) plus 3 s after the
# victim died (a rank two hops away learns of it through its neighbour's exit,
# or its own receive's timeout, about 5 s after), and the whole run is under
# `timeout`: never a hang.
# Open MPI tears the job down when a process dies unless --enable-recovery is
# given, so each rank runs under a wrapper recording its status and stderr (as
# in ddp_fault_test.sh).
set -uo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
mpirun_sh="$here/../mpirun.sh"  # //tests/parallel:mpirun.sh
driver="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
mode="$2"
victim=1
step=3
mb=2
timeout_s=5
slack_s=3
export WEFT_COLLECTIVE_TIMEOUT_S=$timeout_s
unset GTEST_OUTPUT XML_OUTPUT_FILE WEFT_HEARTBEAT_TIMEOUT_S WEFT_DEBUG_COLLECTIVES
case "$mode" in
  kill) want_vrc=137 ;;
  throw) want_vrc=1 ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
fail=0
for np in 2 4; do
  dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/weft_pipe_fault.XXXXXX")"
  start=$(date +%s.%N)
  WEFT_DIR="$dir" timeout 60 "$mpirun_sh" --enable-recovery \
    -x WEFT_DIR -x WEFT_COLLECTIVE_TIMEOUT_S -np "$np" \
    sh -c '"$0" "$@" 2>"$WEFT_DIR/err.$OMPI_COMM_WORLD_RANK"; echo $? >"$WEFT_DIR/rc.$OMPI_COMM_WORLD_RANK"' \
    "$driver" "$mode" "$victim" "$step" "$mb" >/dev/null 2>"$dir/mpirun.err" &
  wait $!
  mrc=$?
  elapsed=$(awk "BEGIN{print $(date +%s.%N) - $start}")
  echo "=== np=$np mode=$mode: mpirun rc=$mrc, $elapsed s"
  [ "$mrc" = 124 ] && { echo "FAIL: mpirun hung (killed by timeout)"; fail=1; }
  verr="$(cat "$dir/err.$victim" 2>/dev/null)"
  vrc="$(cat "$dir/rc.$victim" 2>/dev/null || echo none)"
  echo "--- victim rank $victim rc=$vrc:"
  grep -v "begins at" <<<"$verr"
  [ "$vrc" = "$want_vrc" ] || { echo "FAIL: victim rc=$vrc, expected $want_vrc"; fail=1; }
  if [ "$mode" = kill ]; then
    died_at="$(sed -n "s/^rank $victim: killing itself at \([0-9.]*\)$/\1/p" <<<"$verr")"
    [ -n "$died_at" ] || { echo "FAIL: the victim did not report its death"; fail=1; }
  else
    vre="^rank $victim: error at ([0-9.]+): .*PipelineRunner \(schedule 1f1b\) on rank $victim: action [0-9]+ of [0-9]+ \(F$victim\.$mb, micro-batch $mb\) failed: .*stage $victim of rank $victim fails on purpose on micro-batch $mb of step $step"
    died_at=""
    if [[ "$(grep "^rank $victim: error at " <<<"$verr")" =~ $vre ]]; then
      died_at="${BASH_REMATCH[1]}"
    else
      echo "FAIL: the victim's error does not name its stage, micro-batch and action (F$victim.$mb, micro-batch $mb)"
      fail=1
    fi
  fi
  for ((r = 0; r < np; r++)); do
    [ "$r" -eq "$victim" ] && continue
    rc="$(cat "$dir/rc.$r" 2>/dev/null || echo none)"
    err="$(cat "$dir/err.$r" 2>/dev/null)"
    echo "--- rank $r rc=$rc:"
    grep -v "begins at" <<<"$err"
    [ "$rc" = 1 ] || { echo "FAIL: rank $r rc=$rc, expected 1"; fail=1; }
    if ! grep -q "^rank $r: step $step begins at " <<<"$err"; then
      echo "FAIL: rank $r did not reach step $step"; fail=1; continue
    fi
    if grep -q "^rank $r: step $((step + 1)) begins at " <<<"$err"; then
      echo "FAIL: rank $r got past step $step"; fail=1
    fi
    # The peer it waits for: the victim for its neighbours, any other rank
    # (one that failed before it) further away.
    if [ $((r - victim)) -eq 1 ] || [ $((victim - r)) -eq 1 ]; then peer="$victim"; else peer="[0-9]+"; fi
    line="$(grep "^rank $r: error at " <<<"$err")"
    re="^rank $r: error at ([0-9.]+): .*PipelineRunner \(schedule 1f1b\) on rank $r: action [0-9]+ of [0-9]+ \((Recv(Act|Grad)$r\.([0-9]+)<-s([0-9]+)@r([0-9]+)), micro-batch ([0-9]+), waiting for stage ([0-9]+) on rank ($peer)\) failed: .*(failed: missing ranks: \[([0-9]+)\] stopped responding \(no heartbeat for [0-9.]+ s: the process died or is stuck\)|timed out after $timeout_s s: missing ranks: \[([0-9]+)\])"
    if [[ ! "$line" =~ $re ]]; then
      echo "FAIL: rank $r stderr lacks the error naming its action, micro-batch, the rank it waits for and the missing rank"
      fail=1; continue
    fi
    at="${BASH_REMATCH[1]}"; action="${BASH_REMATCH[2]}"; waits="${BASH_REMATCH[9]}"
    missing="${BASH_REMATCH[11]}${BASH_REMATCH[12]}"
    if [ "${BASH_REMATCH[4]}" != "${BASH_REMATCH[7]}" ] || [ "${BASH_REMATCH[5]}" != "${BASH_REMATCH[8]}" ] ||
      [ "${BASH_REMATCH[6]}" != "$waits" ] || [ "$missing" != "$waits" ] || [ "$waits" = "$r" ]; then
      echo "FAIL: rank $r: action $action, micro-batch ${BASH_REMATCH[7]}, waiting for stage ${BASH_REMATCH[8]} on rank $waits, missing [$missing]: they disagree"
      fail=1
    fi
    if [ -n "$died_at" ]; then
      after=$(awk "BEGIN{print $at - $died_at}")
      echo "    rank $r failed at $action waiting for rank $waits, $after s after rank $victim died"
      if awk "BEGIN{exit !($after < 0 || $after > $timeout_s + $slack_s)}"; then
        echo "FAIL: rank $r failed $after s after the victim died, not within the ${timeout_s} s timeout (+${slack_s} s)"
        fail=1
      fi
    fi
  done
  if awk "BEGIN{exit !($elapsed > 30)}"; then echo "FAIL: took $elapsed s"; fail=1; fi
  if [ $fail -ne 0 ]; then echo "mpirun stderr:"; cat "$dir/mpirun.err"; fi
done
exit $fail

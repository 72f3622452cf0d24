#!/usr/bin/env bash
# NCCL desync scenarios (WEFT_DEBUG_COLLECTIVES=1) under mpirun, one GPU per
# rank: fault_test.sh's op and count on a ProcessGroupNCCL, and sub (op on a
# reversed sub-group). Every rank must exit 1 at once, naming the divergence.
# Usage: nccl_desync_test.sh DRIVER SCENARIO (nccl_fault_driver.cc).
# NCCL takes one GPU per rank: with fewer than 2 visible GPUs (none here) the
# test prints SKIPPED and passes; it runs 4 ranks too when 4 GPUs are visible.
set -uo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
driver="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
scenario="$2"
victim=1
step=3
gpus="$("$driver" gpus)" || { echo "FAIL: $driver gpus"; exit 1; }
if [ "$gpus" -lt 2 ]; then
  echo "SKIPPED: $scenario needs 2 GPUs (one per rank), $gpus visible"
  exit 0
fi
nps="2"
if [ "$gpus" -ge 4 ]; then nps="2 4"; fi
export WEFT_COLLECTIVE_TIMEOUT_S=30 WEFT_DEBUG_COLLECTIVES=1
unset GTEST_OUTPUT XML_OUTPUT_FILE
fail=0
for np in $nps; do
  dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/weft_nccl_desync.XXXXXX")"
  start=$(date +%s.%N)
  # Each rank records its own status and stderr (see fault_test.sh).
  WEFT_DIR="$dir" timeout 120 "$here/mpirun.sh" --enable-recovery \
    -x WEFT_DIR -np "$np" \
    sh -c '"$0" "$@" 2>"$WEFT_DIR/err.$OMPI_COMM_WORLD_RANK"; echo $? >"$WEFT_DIR/rc.$OMPI_COMM_WORLD_RANK"' \
    "$driver" "$scenario" "$victim" "$step" >/dev/null 2>"$dir/mpirun.err"
  mrc=$?
  elapsed=$(awk "BEGIN{print $(date +%s.%N) - $start}")
  echo "=== np=$np scenario=$scenario: mpirun rc=$mrc, $elapsed s"
  if [ "$np" -eq 2 ]; then others="[0]"; else others="[0, 2, 3]"; fi
  allreduce="allreduce(float32, 8 elements, sum) as collective $step"
  broadcast="broadcast(float32, 8 elements, root 0) as collective $step"
  case "$scenario" in
    op) want="collective desync on nccl:world at sequence $step (first divergence: collective): ranks $others issue $allreduce; ranks [$victim] issue $broadcast" ;;
    count) want="collective desync on nccl:world at sequence $step (first divergence: element count): ranks $others issue $allreduce; ranks [$victim] issue allreduce(float32, 9 elements, sum) as collective $step" ;;
    # Group ranks in order: np=2 [1, 0] (the victim is group rank 0),
    # np=4 [3, 2, 1, 0] (the victim is group rank 2).
    sub)
      if [ "$np" -eq 2 ]; then
        want="collective desync on nccl:group[1, 0] at sequence $step (first divergence: collective): ranks [1] issue $broadcast; ranks [0] issue $allreduce"
      else
        want="collective desync on nccl:group[3, 2, 1, 0] at sequence $step (first divergence: collective): ranks [3, 2, 0] issue $allreduce; ranks [1] issue $broadcast"
      fi ;;
    *) echo "unknown scenario $scenario"; exit 2 ;;
  esac
  for ((r = 0; r < np; r++)); do
    rc="$(cat "$dir/rc.$r" 2>/dev/null || echo none)"
    err="$(cat "$dir/err.$r" 2>/dev/null)"
    echo "--- rank $r rc=$rc: $err"
    [ "$rc" = 1 ] || { echo "FAIL: rank $r rc=$rc, expected 1"; fail=1; }
    case "$err" in
      *"rank $r: error: $want"*) ;;
      *) echo "FAIL: rank $r stderr lacks: rank $r: error: $want"; fail=1 ;;
    esac
  done
  # The divergence is caught before NCCL runs it: no rank waits for a timeout.
  if awk "BEGIN{exit !($elapsed > 25)}"; then echo "FAIL: took $elapsed s"; fail=1; fi
  if [ $fail -ne 0 ]; then echo "mpirun stderr:"; cat "$dir/mpirun.err"; fi
done
exit $fail

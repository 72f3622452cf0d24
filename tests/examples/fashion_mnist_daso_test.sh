#!/usr/bin/env bash
# fashion_mnist_ddp --daso under mpirun -np 4 with --ranks-per-node 2 (two
# pretend nodes of two ranks), on a short run (3 epochs of 2048 images: 16
# steps each, one warm-up, one cycling and one cool-down epoch):
# - the schedule printed after each epoch: cycling with global_skip 8 and
#   batches_to_wait 2, then cool-down;
# - the counters as worked out by hand: 16 blocking averages, then in the
#   cycling epoch starts at steps 0 and 8 folded at 2 and 10 plus the blocking
#   last step (3), then 16: 35 averages, 33 blocking; each sends this rank's
#   bfloat16 slice (421642 parameters / 2 ranks x 2 bytes) to the other node
#   once (ring allgather over 2 nodes): 35 x 4 ranks x 421642 bytes;
# - heat's local skips (local_skip 2 in the cycling epoch): the node DDP
#   averages at its even steps and the last one, skipping 7 of its 16 steps,
#   so it sends 41 x 4 ranks x 421642 x 4 bytes (ring allreduce over the 2
#   ranks of a node); --no-local-skips averages at all 48 steps, with the
#   same averages between the nodes;
# - plain DDP over the world on the same run sends 48 steps x 4 ranks x
#   2 (4 - 1) / 4 x 421642 x 4 bytes (ring allreduce), and DASO at least 4x
#   fewer between the nodes;
# - with every epoch blocking (--warmup-epochs 3) and float32 on the wire,
#   DASO prints plain DDP's epoch lines (train_loss within 1e-5, test_acc to
#   the printed digits: SGD's update, momentum and weight decay included, is
#   linear in the gradients, so averaging the nodes' parameters after a step
#   equals averaging all gradients before). Both at --lr 0.005: at the default
#   0.05 the float32 rounding of the two orders (measured: identical epoch 1,
#   then 1e-4 apart in epoch 2's loss) grows as in any reordered sum, while at
#   0.005 all printed digits agree but the last of one loss;
# - checkpoints hold every rank's DASO state: stopped after epoch 1 (--save,
#   --stop-after-epoch) and resumed, the run prints the uninterrupted run's
#   epochs 2 and 3 and DASO's counters, and its last checkpoint holds bitwise rank
#   0's model and optimizer state of the uninterrupted run's; resumed on 2
#   ranks, or on 4 ranks split 4 x 1, it is refused naming both layouts;
#   plain DDP resumes it from rank 0's state; --daso refuses a plain DDP
#   checkpoint (no per-rank state);
# - flag errors: --ranks-per-node without --daso, one that does not divide the
#   world.
# Usage: fashion_mnist_daso_test.sh FASHION_MNIST_DDP MPIRUN_SH
set -uo pipefail
ddp="$1" mpirun_sh="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
common=(--limit-train 2048 --limit-test 512 --epochs 3 --threads 1 --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
fails_with() {
  local want="$1"; shift
  if timeout 120 "$@" > "$tmp/fail.out" 2>&1; then echo "expected failure: $*"; return 1; fi
  grep -qF -- "$want" "$tmp/fail.out" || { echo "no '$want' in:"; cat "$tmp/fail.out"; return 1; }
}
run() {  # name flags...
  local name="$1"; shift
  timeout 180 "$mpirun_sh" -np 4 "$ddp" "${common[@]}" --metrics "$tmp/$name.jsonl" --plot "$tmp/$name.svg" "$@" \
    > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  echo "=== $name ($*): rc=$rc"; cat "$tmp/$name.out"
  check test "$rc" -eq 0 || cat "$tmp/$name.err"
  check grep -q '^test_accuracy=0\.[0-9]\{4\}$' <(tail -n 1 "$tmp/$name.out")
}
value() { grep -o "$1=[0-9]*" "$2" | head -n 1 | cut -d= -f2; }
# The epoch line of epoch $1 in file $2, without the timing in parentheses.
epoch_line() { grep "^epoch $1/" "$2" | sed 's/ (.*//'; }
# DASO's counters line of file $1 (restored on resume) without the waiting (timing) and the
# node DDP's bytes (counted by this process's NodeDataParallel since it started).
counters() { grep "^daso: 2 nodes" "$1" | sed -e 's/ steps_waiting=[^)]*)//' -e 's/ node_ddp_bytes=[0-9]*//'; }
cycle=(--daso --ranks-per-node 2 --warmup-epochs 1 --cooldown-epochs 1)

run daso "${cycle[@]}" --save "$tmp/daso_ck" --keep-last 0
check grep -qF "daso: next epoch 2 (cycling): global_skip 8, batches_to_wait 2, local_skip 2" "$tmp/daso.out"
check grep -qF "daso: next epoch 3 (cool-down): global_skip 1, batches_to_wait 0, local_skip 1" "$tmp/daso.out"
check grep -qF "daso: 2 nodes x 2 ranks: [0, 1] [2, 3]; global_syncs=35 (blocking 33)" "$tmp/daso.out"
daso_bytes=$(value bytes_between_nodes "$tmp/daso.out")
check test "$daso_bytes" = $((35 * 4 * 421642))
check test "$(value node_ddp_bytes "$tmp/daso.out")" = $((41 * 4 * 421642 * 4))
check grep -qF "node_syncs_skipped=7 (rank 0)" "$tmp/daso.out"
check grep -q "DASO over 2 nodes x 2 ranks" "$tmp/daso.err"

run no_local_skips --daso --ranks-per-node 2 --warmup-epochs 1 --cooldown-epochs 1 --no-local-skips
check grep -qF "daso: next epoch 2 (cycling): global_skip 8, batches_to_wait 2, local_skip 1" "$tmp/no_local_skips.out"
check grep -qF "global_syncs=35 (blocking 33)" "$tmp/no_local_skips.out"
check test "$(value node_ddp_bytes "$tmp/no_local_skips.out")" = $((48 * 4 * 421642 * 4))
check grep -qF "node_syncs_skipped=0 (rank 0)" "$tmp/no_local_skips.out"

run ddp --lr 0.005 --save "$tmp/ddp_ck"
ddp_bytes=$(value bytes_between_nodes "$tmp/ddp.out")
check test "$ddp_bytes" = $((48 * 4 * 2 * 3 * 421642 * 4 / 4))
echo "bytes between nodes: daso $daso_bytes, ddp $ddp_bytes"
check test $((daso_bytes * 4)) -le "$ddp_bytes"

run blocking --daso --ranks-per-node 2 --warmup-epochs 3 --downcast fp32 --lr 0.005
python3 - "$tmp/ddp.out" "$tmp/blocking.out" <<'PY' && pass=$((pass+1)) || { echo "FAILED: blocking DASO != DDP"; fail=$((fail+1)); }
import re, sys
def epochs(path):
    return [m.groups() for m in (re.match(r"epoch (\d+)/\d+: train_loss=([\d.]+) train_acc=([\d.]+) "
                                          r"test_loss=([\d.]+) test_acc=([\d.]+)", l) for l in open(path)) if m]
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
ok = len(a) == len(b) == 3
for x, y in zip(a, b):
    ok = ok and abs(float(x[1]) - float(y[1])) <= 1e-5 and x[4] == y[4]
    print("ddp %s vs blocking daso %s" % (x, y))
sys.exit(0 if ok else 1)
PY

# Stopped after epoch 1, resumed: bitwise the uninterrupted run.
stop_ck="$tmp/stop_ck"
timeout 180 "$mpirun_sh" -np 4 "$ddp" "${common[@]}" --metrics "$tmp/stopped.jsonl" --plot "$tmp/stopped.svg" \
  "${cycle[@]}" --save "$stop_ck" --keep-last 0 --stop-after-epoch 1 > "$tmp/stopped.out" 2> "$tmp/stopped.err"
rc=$?
echo "=== stopped: rc=$rc"; cat "$tmp/stopped.out"
check test "$rc" -eq 0 || cat "$tmp/stopped.err"
check test "$(epoch_line 1 "$tmp/stopped.out")" = "$(epoch_line 1 "$tmp/daso.out")"
check test -f "$stop_ck/step-00000016/rank-state-00003-of-00004.safetensors"
run resumed "${cycle[@]}" --save "$stop_ck" --keep-last 0 --resume "$stop_ck"
check grep -qF "resumed from partitioned checkpoint directory $stop_ck/step-00000016 (step 16, epoch 1)" \
  "$tmp/resumed.err"
for e in 2 3; do
  check test -n "$(epoch_line $e "$tmp/daso.out")"
  check test "$(epoch_line $e "$tmp/resumed.out")" = "$(epoch_line $e "$tmp/daso.out")"
done
check test "$(tail -n 1 "$tmp/resumed.out")" = "$(tail -n 1 "$tmp/daso.out")"
check test "$(counters "$tmp/resumed.out")" = "$(counters "$tmp/daso.out")"
for f in model-00001-of-00001.safetensors optimizer-00001-of-00001.safetensors; do
  check cmp "$tmp/daso_ck/step-00000048/$f" "$stop_ck/step-00000048/$f"
done
check fails_with "holds the per-rank state of 4 ranks (daso: 2 nodes x 2 ranks: [0, 1] [2, 3]); this run has 2 ranks (daso: 2 nodes x 1 rank: [0] [1])" \
  timeout 120 "$mpirun_sh" -np 2 "$ddp" "${common[@]}" --daso --ranks-per-node 1 --resume "$stop_ck/step-00000016"
check fails_with "holds per-rank state 'daso' saved over 2 nodes x 2 ranks: [0, 1] [2, 3]; this run has 4 nodes x 1 rank: [0] [1] [2] [3]" \
  timeout 120 "$mpirun_sh" -np 4 "$ddp" "${common[@]}" --daso --ranks-per-node 1 --resume "$stop_ck/step-00000016"
run plain_from_daso --resume "$stop_ck/step-00000016"
check fails_with "holds no per-rank state, which this run's daso needs" \
  timeout 120 "$mpirun_sh" -np 4 "$ddp" "${common[@]}" "${cycle[@]}" --resume "$tmp/ddp_ck"

check fails_with "--ranks-per-node 2 needs --daso" "$ddp" --ranks-per-node 2
check fails_with "ranks_per_node 3 does not divide the world size 4" \
  timeout 120 "$mpirun_sh" -np 4 "$ddp" "${common[@]}" --daso --ranks-per-node 3

echo "$pass passed, $fail failed"
test "$fail" -eq 0

#!/usr/bin/env bash
# Plain data parallelism and a plain pipeline across hosts
# (tools/hosts/netns_hosts.sh), each against its one-host run:
# fashion_mnist_ddp with 4 ranks on 2 hosts x 2 (the gradient allreduce
# crosses the link) and fashion_mnist_pipe with its 2 stages on 2 hosts x 1
# (activations and their gradients cross it), over unshaped and 100 Mbit/s
# links. Every run's epoch line (losses, accuracies) and final test accuracy
# equal the one-host run's: the same arithmetic, whatever the network. The
# images per second of each run are printed beside. Where network namespaces
# cannot be made, the test says so and skips.
# Usage: layouts_test.sh FASHION_MNIST_DDP FASHION_MNIST_PIPE MPIRUN_SH NETNS_HOSTS
set -uo pipefail
ddp="$(readlink -f "$1")" pipe="$(readlink -f "$2")" mpirun_sh="$(readlink -f "$3")" hosts_sh="$(readlink -f "$4")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
source "$(dirname "${BASH_SOURCE[0]}")/skip_without_hosts.sh"
skip_without_hosts layouts "$hosts_sh" "$tmp"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
common=(--epochs 1 --limit-train 2048 --limit-test 512 --threads 1 --no-progress)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
# The epoch line without its timing, and the final accuracy.
result() { grep -a '^epoch 1/1:\|^test_accuracy=' "$1" | sed 's/ ([0-9.]*s, [0-9]* img\/s)$//'; }
speed() { grep -ao '[0-9]* img/s' "$1" | head -n 1; }

run() {  # name program np hosts slots rate flags...
  local name="$1" prog="$2" np="$3" hosts="$4" slots="$5" rate="$6"; shift 6
  if [ "$hosts" = 1 ]; then
    timeout 300 "$mpirun_sh" -np "$np" "$prog" "${common[@]}" "$@" --metrics "$tmp/$name.jsonl" \
      --plot "$tmp/$name.svg" > "$tmp/$name.out" 2> "$tmp/$name.err"
  else
    timeout 300 "$hosts_sh" "$hosts" "$slots" "$rate" -- sh -c "$mpirun_sh \$WEFT_MPIRUN_HOSTS -np $np $prog \
      ${common[*]} $* --metrics $tmp/$name.jsonl --plot $tmp/$name.svg > $tmp/$name.out 2> $tmp/$name.err"
  fi
  local rc=$?
  echo "=== $name: rc=$rc, $(speed "$tmp/$name.out")"
  check test "$rc" -eq 0 || tail -n 20 "$tmp/$name.err"
  check test "$(result "$tmp/$name.out" | wc -l)" -eq 2
}

run ddp_one "$ddp" 4 1 0 0
run pipe_one "$pipe" 2 1 0 0 --schedule 1f1b --chunks 4 --balance 4,6
for rate in 0 100mbit; do
  run "ddp_$rate" "$ddp" 4 2 2 "$rate"
  check test "$(result "$tmp/ddp_one.out")" = "$(result "$tmp/ddp_$rate.out")"
  run "pipe_$rate" "$pipe" 2 2 1 "$rate" --schedule 1f1b --chunks 4 --balance 4,6
  check test "$(result "$tmp/pipe_one.out")" = "$(result "$tmp/pipe_$rate.out")"
done
result "$tmp/ddp_one.out"; result "$tmp/pipe_one.out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

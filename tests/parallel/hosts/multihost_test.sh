#!/usr/bin/env bash
# Runs across hosts (tools/hosts/netns_hosts.sh: network namespaces joined by
# veth links, ranks over TCP between them): the GPT example at pp 2 x dp 2 on
# 2 hosts x 2 ranks, with the pipeline inside each host and data parallelism
# across them (mpirun --map-by slot) and the other way round (--map-by node),
# over unshaped and 100 Mbit/s links. Every run's evaluation lines and sample
# equal the one-host run's (the same arithmetic, whatever the network); the
# ranks really are on two hosts (each reports its own address). Where network
# namespaces cannot be made, the test says so and skips.
# The partition table then names the hosts and where the pipelines and the
# data-parallel groups sit. DASO (fashion_mnist_ddp --daso) finds the real host split from MPI's
# shared-memory split: 2 nodes of 2 ranks.
# Usage: multihost_test.sh GPT MPIRUN_SH NETNS_HOSTS FASHION_MNIST_DDP
set -uo pipefail
gpt="$(readlink -f "$1")" mpirun_sh="$(readlink -f "$2")" hosts_sh="$(readlink -f "$3")" ddp="$(readlink -f "$4")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
source "$(dirname "${BASH_SOURCE[0]}")/skip_without_hosts.sh"
skip_without_hosts multihost "$hosts_sh" "$tmp"
unset GTEST_OUTPUT XML_OUTPUT_FILE TEST_PREMATURE_EXIT_FILE
[ -d /usr/share/games/fortunes ] || { echo "Debian's fortunes are not installed (./bazelw installs them)"; exit 1; }
common=(--dim 32 --heads 2 --layers 2 --context 32 --batch-size 8 --steps 60 --eval-interval 20 --warmup 2
        --eval-batches 2 --final-sample 40 --threads 1 --no-progress --pp 2 --dp 2)
pass=0 fail=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
evals() { grep -ao '^step [0-9]*/60: train_loss=[0-9.]* val_loss=[0-9.]*\|^val_loss=.*' "$1"; }
sample() { sed -n '/^sample:$/,/^val_loss=/p' "$1" | md5sum; }

timeout 300 "$mpirun_sh" -np 4 "$gpt" "${common[@]}" > "$tmp/one.out" 2> "$tmp/one.err"
check test $? -eq 0
check test "$(evals "$tmp/one.out" | wc -l)" -eq 4
for rate in 0 100mbit; do
  for map in slot node; do
    name="$map-$rate"
    # $WEFT_MPIRUN_HOSTS is set by netns_hosts.sh inside host 0.
    timeout 300 "$hosts_sh" 2 2 "$rate" -- sh -c "$mpirun_sh \$WEFT_MPIRUN_HOSTS --map-by $map -np 4 $gpt \
      ${common[*]} > $tmp/$name.out 2> $tmp/$name.err"
    rc=$?
    echo "=== 2 hosts x 2 ranks, --map-by $map, links ${rate/#0/unshaped}: rc=$rc, $(grep -ao 'throughput: [0-9]* tokens/s' "$tmp/$name.out")"
    check test "$rc" -eq 0 || tail -n 20 "$tmp/$name.err"
    check test "$(evals "$tmp/one.out")" = "$(evals "$tmp/$name.out")"
    check test "$(sample "$tmp/one.out")" = "$(sample "$tmp/$name.out")"
    # The grid says which ranks share a host, and where its groups sit.
    if [ "$map" = slot ]; then
      want='^hosts: 2 hosts: [^ ]* \[0, 1\], [^ ]* \[2, 3\]; each pipeline within one host, data-parallel groups across hosts$'
    else
      want='^hosts: 2 hosts: [^ ]* \[0, 2\], [^ ]* \[1, 3\]; each pipeline across hosts, data-parallel groups within one host$'
    fi
    check grep -aq "$want" "$tmp/$name.out"
  done
done
check test "$(grep -ac '^hosts: ' "$tmp/one.out")" -eq 0  # one host: nothing to say
# Where the ranks ran: two addresses, two ranks each.
timeout 120 "$hosts_sh" 2 2 0 -- sh -c "$mpirun_sh \$WEFT_MPIRUN_HOSTS -np 4 sh -c \
  'ip -4 -o addr show | grep -o \"10\\.77\\.0\\.[0-9]*\"'" > "$tmp/where.out" 2>&1
check test "$(sort "$tmp/where.out" | uniq -c | awk '{print $1 " " $2}' | tr '\n' ' ')" = "2 10.77.0.1 2 10.77.0.2 "
cat "$tmp/where.out"
ip netns list | grep -q "^w$$" && { echo "namespaces left behind"; fail=$((fail+1)); }
# DASO's nodes are the hosts.
timeout 300 "$hosts_sh" 2 2 100mbit -- sh -c "$mpirun_sh \$WEFT_MPIRUN_HOSTS -np 4 $ddp --daso --epochs 1 \
  --limit-train 1024 --limit-test 512 --no-progress --metrics $tmp/daso.jsonl --plot $tmp/daso.svg" \
  > "$tmp/daso.out" 2> "$tmp/daso.err"
check test $? -eq 0 || tail -n 20 "$tmp/daso.err"
check grep -q '^fashion_mnist_ddp: DASO over 2 nodes x 2 ranks: \[0, 1\] \[2, 3\]' "$tmp/daso.err"
check grep -q '^test_accuracy=' "$tmp/daso.out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

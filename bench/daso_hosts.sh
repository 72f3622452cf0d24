#!/usr/bin/env bash
# daso_hosts: time to a test accuracy for DDP against DASO (heat's
# hierarchical data parallelism) on 2 hosts x 2 ranks of one machine
# (tools/hosts/netns_hosts.sh: network namespaces, tbf-shaped links), at each
# link rate: fashion_mnist_ddp's CNN on the whole Fashion-MNIST training set.
#   ./bazelw run //bench:daso_hosts [-- --epochs 4 --rates 100mbit,1gbit --target 0.90]
# DASO runs with --warmup-epochs 1 --cooldown-epochs 1 (heat's defaults, 4
# and 4, would keep every epoch of a 4-epoch run blocking). Prints, per rate
# and method, the training seconds (the epochs' "seconds", evaluation
# excluded) until the first epoch whose test accuracy reaches the target,
# and the final accuracy:
#   daso_hosts rate=100mbit ddp: 0.90 at epoch 3 after 612.3 s; final 0.9105 after 4 epochs (816.0 s)
# then per rate the ratio ddp / daso of those times.
# Needs root (network namespaces); says so and exits 1 otherwise.
set -uo pipefail
ddp="$(readlink -f "$1")" mpirun_sh="$(readlink -f "$2")" hosts_sh="$(readlink -f "$3")"
shift 3
epochs=4 rates=100mbit,1gbit target=0.90
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs="$2"; shift 2 ;;
    --rates) rates="$2"; shift 2 ;;
    --target) target="$2"; shift 2 ;;
    *) echo "daso_hosts: unknown flag $1 (--epochs N, --rates R1,R2, --target X)" >&2; exit 2 ;;
  esac
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$hosts_sh" 1 1 0 -- true || { echo "daso_hosts: cannot make hosts here (see above)" >&2; exit 1; }
echo "daso_hosts: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; 2 hosts x 2 ranks," \
  "1 thread each; fashion_mnist_ddp cnn, --epochs $epochs, target test accuracy $target"
summary() {  # metrics.jsonl target -> "0.90 at epoch K after S s; final A after E epochs (T s)"
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
target, total, hit = float(sys.argv[2]), 0.0, None
for r in rows:
    total += r["seconds"]
    if hit is None and r["test_accuracy"] >= target:
        hit = (r["epoch"], total)
reach = f"{target:.2f} at epoch {hit[0]} after {hit[1]:.1f} s" if hit else f"{target:.2f} not reached"
print(f"{reach}; final {rows[-1]['test_accuracy']:.4f} after {len(rows)} epochs ({total:.1f} s)")
print(f"{hit[1] if hit else 'nan'}", file=sys.stderr)
PY
}
for rate in ${rates//,/ }; do
  declare -A reach=()
  for method in ddp daso; do
    flags=(--epochs "$epochs" --no-progress --metrics "$tmp/$rate-$method.jsonl" --plot "$tmp/$rate-$method.svg")
    [ "$method" = daso ] && flags+=(--daso --warmup-epochs 1 --cooldown-epochs 1)
    if ! "$hosts_sh" 2 2 "$rate" -- sh -c "$mpirun_sh \$WEFT_MPIRUN_HOSTS -np 4 $ddp ${flags[*]}" \
        > "$tmp/$rate-$method.out" 2> "$tmp/$rate-$method.err"; then
      echo "daso_hosts rate=$rate $method: failed:"; tail -n 5 "$tmp/$rate-$method.err"
      continue
    fi
    line=$(summary "$tmp/$rate-$method.jsonl" "$target" 2> "$tmp/$rate-$method.reach")
    reach[$method]=$(cat "$tmp/$rate-$method.reach")
    echo "daso_hosts rate=$rate $method: $line"
  done
  python3 -c "import sys, math; d, s = float(sys.argv[1]), float(sys.argv[2]); \
print(f'daso_hosts rate=$rate: time to $target ddp/daso = {d / s:.2f}x' if not (math.isnan(d) or math.isnan(s)) \
else 'daso_hosts rate=$rate: time to $target not reached by both')" "${reach[ddp]:-nan}" "${reach[daso]:-nan}"
done

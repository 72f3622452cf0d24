#!/usr/bin/env bash
# bench.sh (GPU bundle, made by tools/gpu_bundle.sh): runs each GPU benchmark and
# its PyTorch peer (eager, same shapes) and prints
#   <workload>: weft=<v> torch=<v> <unit> speedup=<weft/torch>
#   gpt2_mfu: weft=<x> torch=<y>
# A side that fails prints "n/a" (its log is in $RESULTS/logs).
#   ./bench.sh [cnn|gpt2|all]   (default all: each workload can be its own command)
# Time: all of it fits in BENCH_BUDGET_S (default 570 s, under the device tool's
# 10 minutes a command); each of the (up to) four programs gets an equal share of
# what is left, at most BENCH_TIMEOUT (default 240 s).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/env.sh"
RESULTS=${RESULTS:-${OUT:-$HERE/results}}
mkdir -p "$RESULTS/logs"
PY=${PYTHON:-python3}
WHICH=${1:-all}
BUDGET=${BENCH_BUDGET_S:-570}
START=$SECONDS
runs_left=4
[ "$WHICH" = all ] || runs_left=2

# run LOG CMD...: CMD with an equal share of the time left (at most BENCH_TIMEOUT), output to LOG
run() {
  local log=$1
  shift
  local left=$((BUDGET - (SECONDS - START)))
  local share=$((left / runs_left))
  runs_left=$((runs_left - 1))
  ((share > ${BENCH_TIMEOUT:-240})) && share=${BENCH_TIMEOUT:-240}
  if ((share <= 0)); then
    echo "not run: the ${BUDGET} s budget is spent" >"$log"
    return 124
  fi
  timeout -k 10 "$share" "$@" >"$log" 2>&1
}

# field NAME LOG -> the value of NAME=<v> in the last line of LOG that has it, or n/a
field() { grep -o "$1=[0-9.eE+-]*" "$2" 2>/dev/null | tail -n 1 | cut -d= -f2 | grep . || echo n/a; }
ratio() { python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.2f}')" "$1" "$2" 2>/dev/null || echo n/a; }

if [ "$WHICH" = all ] || [ "$WHICH" = cnn ]; then
  run "$RESULTS/logs/cnn_gpu_weft.log" "$PAYLOAD/bin/cnn_gpu_weft"
  run "$RESULTS/logs/cnn_gpu_torch.log" "$PY" "$HERE/bench/cnn_gpu_torch.py"
  w=$(field images_per_s "$RESULTS/logs/cnn_gpu_weft.log")
  t=$(field images_per_s "$RESULTS/logs/cnn_gpu_torch.log")
  echo "cnn_gpu_train_b256: weft=$w torch=$t images/s speedup=$(ratio "$w" "$t")"
fi

if [ "$WHICH" = all ] || [ "$WHICH" = gpt2 ]; then
  run "$RESULTS/logs/gpt2_weft.log" "$PAYLOAD/bin/gpt2_weft" ${GPT2_ARGS:-}
  run "$RESULTS/logs/gpt2_torch.log" "$PY" "$HERE/bench/gpt2_torch.py" ${GPT2_ARGS:-}
  w=$(field tokens_per_s "$RESULTS/logs/gpt2_weft.log")
  t=$(field tokens_per_s "$RESULTS/logs/gpt2_torch.log")
  echo "gpt2_small_train_b8: weft=$w torch=$t tokens/s speedup=$(ratio "$w" "$t")"
  echo "gpt2_mfu: weft=$(field mfu "$RESULTS/logs/gpt2_weft.log") torch=$(field mfu "$RESULTS/logs/gpt2_torch.log")"
fi

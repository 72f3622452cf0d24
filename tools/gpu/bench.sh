#!/usr/bin/env bash
# bench.sh (GPU bundle, made by tools/gpu_bundle.sh): runs each GPU benchmark and
# its PyTorch peer (eager, same shapes) and prints
#   <workload>: weft=<v> torch=<v> <unit> speedup=<weft/torch>
#   gpt2_mfu: weft=<x> torch=<y>
# A side that fails prints "n/a" (its log is in $RESULTS/logs).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/env.sh"
RESULTS=${RESULTS:-${OUT:-$HERE/results}}
mkdir -p "$RESULTS/logs"
PY=${PYTHON:-python3}

# field NAME LOG -> the value of NAME=<v> in the last line of LOG that has it, or n/a
field() { grep -o "$1=[0-9.eE+-]*" "$2" 2>/dev/null | tail -n 1 | cut -d= -f2 | grep . || echo n/a; }
ratio() { python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.2f}')" "$1" "$2" 2>/dev/null || echo n/a; }

timeout -k 10 900 "$HERE/bin/cnn_gpu_weft" >"$RESULTS/logs/cnn_gpu_weft.log" 2>&1
timeout -k 10 900 "$PY" "$HERE/bench/cnn_gpu_torch.py" >"$RESULTS/logs/cnn_gpu_torch.log" 2>&1
w=$(field images_per_s "$RESULTS/logs/cnn_gpu_weft.log")
t=$(field images_per_s "$RESULTS/logs/cnn_gpu_torch.log")
echo "cnn_gpu_train_b256: weft=$w torch=$t images/s speedup=$(ratio "$w" "$t")"

timeout -k 10 900 "$HERE/bin/gpt2_weft" ${GPT2_ARGS:-} >"$RESULTS/logs/gpt2_weft.log" 2>&1
timeout -k 10 900 "$PY" "$HERE/bench/gpt2_torch.py" ${GPT2_ARGS:-} >"$RESULTS/logs/gpt2_torch.log" 2>&1
w=$(field tokens_per_s "$RESULTS/logs/gpt2_weft.log")
t=$(field tokens_per_s "$RESULTS/logs/gpt2_torch.log")
echo "gpt2_small_train_b8: weft=$w torch=$t tokens/s speedup=$(ratio "$w" "$t")"
echo "gpt2_mfu: weft=$(field mfu "$RESULTS/logs/gpt2_weft.log") torch=$(field mfu "$RESULTS/logs/gpt2_torch.log")"

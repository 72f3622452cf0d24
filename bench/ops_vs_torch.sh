#!/usr/bin/env bash
# ops_vs_torch: weft against PyTorch on the same CPU workloads, in one run.
#   ./bazelw run //bench:ops_vs_torch [-- --threads N --reps R]
# 1. Finds a Python with torch + numpy: $WEFT_TORCH_PYTHON if set, else the venv
#    ~/.cache/weft/torch-venv, created (python3 -m venv; pip install torch numpy
#    from PyPI) when missing. If pip fails, falls back to Debian's python3-torch
#    with libopenblas0-pthread (without it Debian's torch uses reference BLAS).
# 2. Runs bench/ops_vs_torch.py, which runs //bench:ops_weft and the torch peer
#    with the same thread count and prints one comparison line per workload.
set -euo pipefail
export WEFT_BENCH_NAME=ops_vs_torch

# Locate our runfiles (bazel run sets RUNFILES_DIR or leaves $0.runfiles).
if [[ -n "${RUNFILES_DIR:-}" && -d "${RUNFILES_DIR}/weft" ]]; then rf="${RUNFILES_DIR}"
elif [[ -d "$0.runfiles/weft" ]]; then rf="$0.runfiles"
elif [[ -d "${PWD%/weft}/weft/bench" && "$PWD" == */weft ]]; then rf="${PWD%/weft}"
else
  echo "ops_vs_torch: cannot find runfiles (run it with ./bazelw run //bench:ops_vs_torch)" >&2
  exit 1
fi
weft_bin="$rf/weft/bench/ops_weft"
script="$rf/weft/bench/ops_vs_torch.py"

source "$rf/weft/bench/torch_peer.sh"

py="$(find_python)"
exec "$py" "$script" --weft-bin "$weft_bin" "$@"

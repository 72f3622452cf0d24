#!/usr/bin/env bash
# gpt_vs_torch: weft against PyTorch training the same GPT on the CPU, in one run.
#   ./bazelw run //bench:gpt_vs_torch [-- --threads N --steps S]
# 1. Finds a Python with torch + numpy: $WEFT_TORCH_PYTHON if set, else the venv
#    ~/.cache/weft/torch-venv, created (python3 -m venv; pip install torch numpy
#    from PyPI) when missing. If pip fails, falls back to Debian's python3-torch
#    with libopenblas0-pthread (without it Debian's torch uses reference BLAS).
# 2. Runs bench/gpt_vs_torch.py, which runs //bench:gpt_weft and the torch peer
#    with the same thread count and prints one comparison line per workload.
set -euo pipefail
export WEFT_BENCH_NAME=gpt_vs_torch

# Locate our runfiles (bazel run sets RUNFILES_DIR or leaves $0.runfiles).
if [[ -n "${RUNFILES_DIR:-}" && -d "${RUNFILES_DIR}/weft" ]]; then rf="${RUNFILES_DIR}"
elif [[ -d "$0.runfiles/weft" ]]; then rf="$0.runfiles"
elif [[ -d "${PWD%/weft}/weft/bench" && "$PWD" == */weft ]]; then rf="${PWD%/weft}"
else
  echo "gpt_vs_torch: cannot find runfiles (run it with ./bazelw run //bench:gpt_vs_torch)" >&2
  exit 1
fi
weft_bin="$rf/weft/bench/gpt_weft"
script="$rf/weft/bench/gpt_vs_torch.py"

source "$rf/weft/bench/torch_peer.sh"

py="$(find_python)"
exec "$py" "$script" --weft-bin "$weft_bin" "$@"

#!/usr/bin/env bash
# sgemm_vs_mkl: weft's float32 GEMM against MKL's sgemm, alternated in one process.
#   ./bazelw run //bench:sgemm_vs_mkl [-- --threads N --rounds R --reps N]
# Finds a Python with torch (bench/torch_peer.sh), takes the MKL that PyTorch's
# x86 wheels link into torch/lib/libtorch_cpu.so, and runs //bench:sgemm_mkl_ab
# on it.
set -euo pipefail
export WEFT_BENCH_NAME=sgemm_vs_mkl

if [[ -n "${RUNFILES_DIR:-}" && -d "${RUNFILES_DIR}/weft" ]]; then rf="${RUNFILES_DIR}"
elif [[ -d "$0.runfiles/weft" ]]; then rf="$0.runfiles"
else
  echo "sgemm_vs_mkl: cannot find runfiles (run it with ./bazelw run //bench:sgemm_vs_mkl)" >&2
  exit 1
fi
source "$rf/weft/bench/torch_peer.sh"

py="$(find_python)"
lib="$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')"
if [[ ! -f "$lib" ]]; then
  echo "sgemm_vs_mkl: $lib not found (this PyTorch has no libtorch_cpu.so to take MKL from)" >&2
  exit 1
fi
echo "peer: MKL in $lib (torch $("$py" -c 'import torch; print(torch.__version__)'))"
exec "$rf/weft/bench/sgemm_mkl_ab" --mkl-lib "$lib" "$@"

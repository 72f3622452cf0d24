#!/usr/bin/env bash
# pipe_vs_torch: weft pipeline parallelism against torch.distributed.pipelining (gloo) on 2 ranks with one thread
# each, the same deep MLP, batch and micro-batches, in one run.
#   ./bazelw run //bench:pipe_vs_torch [-- --steps S --batch B --hidden H --layers L --microbatches M --np N]
# Finds a Python with torch (bench/torch_peer.sh: $WEFT_TORCH_PYTHON, else a
# venv it creates) and runs bench/pipe_vs_torch.py, which launches
# //bench:pipe_weft under mpirun and the torch peer with torch.multiprocessing.
set -euo pipefail
export WEFT_BENCH_NAME=pipe_vs_torch

if [[ -n "${RUNFILES_DIR:-}" && -d "${RUNFILES_DIR}/weft" ]]; then rf="${RUNFILES_DIR}"
elif [[ -d "$0.runfiles/weft" ]]; then rf="$0.runfiles"
elif [[ -d "${PWD%/weft}/weft/bench" && "$PWD" == */weft ]]; then rf="${PWD%/weft}"
else
  echo "pipe_vs_torch: cannot find runfiles (run it with ./bazelw run //bench:pipe_vs_torch)" >&2
  exit 1
fi
source "$rf/weft/bench/torch_peer.sh"
py="$(find_python)"
exec "$py" "$rf/weft/bench/pipe_vs_torch.py" --weft-bin "$rf/weft/bench/pipe_weft" \
  --mpirun "$rf/weft/tests/parallel/mpirun.sh" "$@"

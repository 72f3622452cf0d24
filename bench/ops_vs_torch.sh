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

have_torch() { "$1" -c 'import torch, numpy' >/dev/null 2>&1; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

apt_install() {
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >&2 || {
    as_root apt-get update -qq >&2 || true
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >&2
  }
}

find_python() {
  if [[ -n "${WEFT_TORCH_PYTHON:-}" ]]; then
    have_torch "$WEFT_TORCH_PYTHON" && { echo "$WEFT_TORCH_PYTHON"; return 0; }
    echo "ops_vs_torch: WEFT_TORCH_PYTHON=$WEFT_TORCH_PYTHON lacks torch/numpy" >&2
    return 1
  fi
  local venv="${HOME:-/root}/.cache/weft/torch-venv"
  local py="$venv/bin/python"
  if [[ -x "$py" ]] && have_torch "$py"; then echo "$py"; return 0; fi

  echo "ops_vs_torch: installing the PyTorch peer into $venv (pip install torch numpy; once)" >&2
  mkdir -p "$(dirname "$venv")"
  if [[ ! -x "$py" ]]; then
    if ! python3 -m venv "$venv" >&2 2>&1; then
      rm -rf "$venv"
      # Debian splits venv/ensurepip out of python3.
      apt_install python3-venv || true
      python3 -m venv "$venv" >&2 || rm -rf "$venv"
    fi
  fi
  if [[ -x "$py" ]]; then
    # shellcheck disable=SC2086  # WEFT_TORCH_PIP_ARGS may hold several words (e.g. an --index-url).
    if "$py" -m pip install -q --disable-pip-version-check ${WEFT_TORCH_PIP_ARGS:-} torch numpy >&2 \
        && have_torch "$py"; then
      echo "$py"; return 0
    fi
  fi

  echo "ops_vs_torch: pip failed; falling back to Debian's python3-torch + libopenblas0-pthread" >&2
  if apt_install python3-torch python3-numpy libopenblas0-pthread && have_torch /usr/bin/python3; then
    echo /usr/bin/python3; return 0
  fi
  echo "ops_vs_torch: could not get PyTorch (pip and apt both failed)" >&2
  return 1
}

py="$(find_python)"
exec "$py" "$script" --weft-bin "$weft_bin" "$@"

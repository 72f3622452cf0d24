# torch_peer.sh: sourced by the *_vs_torch wrappers. find_python prints a Python
# that has torch + numpy: $WEFT_TORCH_PYTHON if set, else the venv
# ~/.cache/weft/torch-venv (created with pip from PyPI when missing), else
# Debian's python3-torch with libopenblas0-pthread.
# shellcheck shell=bash
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
    echo "${WEFT_BENCH_NAME:-bench}: WEFT_TORCH_PYTHON=$WEFT_TORCH_PYTHON lacks torch/numpy" >&2
    return 1
  fi
  local venv="${HOME:-/root}/.cache/weft/torch-venv"
  local py="$venv/bin/python"
  if [[ -x "$py" ]] && have_torch "$py"; then echo "$py"; return 0; fi

  echo "${WEFT_BENCH_NAME:-bench}: installing the PyTorch peer into $venv (pip install torch numpy; once)" >&2
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

  echo "${WEFT_BENCH_NAME:-bench}: pip failed; falling back to Debian's python3-torch + libopenblas0-pthread" >&2
  if apt_install python3-torch python3-numpy libopenblas0-pthread && have_torch /usr/bin/python3; then
    echo /usr/bin/python3; return 0
  fi
  echo "${WEFT_BENCH_NAME:-bench}: could not get PyTorch (pip and apt both failed)" >&2
  return 1
}


# Sourced by run.sh and bench.sh of a GPU bundle (tools/gpu_bundle.sh): puts the
# CUDA libraries of the Python environment (site-packages/nvidia/*/lib, torch/lib;
# found without importing torch) and the bundle's own lib/ on LD_LIBRARY_PATH.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The binaries travel xz-compressed (their CUDA fatbins compress ~10x): unpack once,
# outside the bundle (so a local run does not double the folder carried with the
# checkout), into $PAYLOAD: WEFT_BUNDLE_UNPACK_DIR, else a directory under $TMPDIR
# named by the payload's checksum. A bundle unpacked in place (lib/ present) is used as is.
if [ -f "$HERE/payload.tar.xz" ] && [ ! -d "$HERE/lib" ]; then
  PAYLOAD=${WEFT_BUNDLE_UNPACK_DIR:-${TMPDIR:-/tmp}/weft-gpubundle-$(cksum <"$HERE/payload.tar.xz" | cut -d' ' -f1)}
  if [ ! -f "$PAYLOAD/.unpacked" ]; then
    mkdir -p "$PAYLOAD" && tar -C "$PAYLOAD" -xJf "$HERE/payload.tar.xz" && touch "$PAYLOAD/.unpacked" ||
      { echo "gpu bundle: cannot unpack $HERE/payload.tar.xz into $PAYLOAD" >&2; exit 1; }
  fi
else
  PAYLOAD=$HERE
fi
# gpus_present: whether the driver lists a GPU here (nvidia-smi, /proc/driver/nvidia,
# /dev/nvidia*), whether or not CUDA can use it.
gpus_present() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then return 0; fi
  ls /proc/driver/nvidia/gpus/* >/dev/null 2>&1 && return 0
  ls /dev/nvidia[0-9]* >/dev/null 2>&1
}
PY=${PYTHON:-python3}
PYLIBS=""
if command -v "$PY" >/dev/null 2>&1; then
  PYLIBS=$("$PY" - <<'PYEOF' 2>/dev/null || true
import glob, importlib.util, os
dirs = []
try:
    import nvidia
    for base in nvidia.__path__:
        dirs += sorted(d for d in glob.glob(os.path.join(base, "*", "lib")) if os.path.isdir(d))
except Exception:
    pass
try:
    spec = importlib.util.find_spec("torch")
    if spec and spec.origin:
        d = os.path.join(os.path.dirname(spec.origin), "lib")
        if os.path.isdir(d):
            dirs.append(d)
except Exception:
    pass
print(":".join(dirs))
PYEOF
)
fi
export LD_LIBRARY_PATH="${PYLIBS:+$PYLIBS:}$PAYLOAD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

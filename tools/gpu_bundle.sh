#!/usr/bin/env bash
# gpu_bundle.sh DIR: builds (here, with Bazel) everything the GPU machine runs and
# copies it into DIR, a self-contained folder that needs no Bazel there:
#   DIR/tests/   every gpu-tagged test binary + caching_allocator_test
#   DIR/bin/     examples/fashion_mnist, bench/cnn_gpu_weft, bench/gpt2_weft, and for the
#                host CPU's figures bench/sgemm_mkl_ab and bench/gemm_shapes
#   DIR/bench/   the PyTorch peers (cnn_gpu_torch.py, gpt2_torch.py)
#   DIR/data/    Fashion-MNIST .gz files (Debian's dataset-fashion-mnist)
#   DIR/lib/     shared libraries the binaries need that the GPU host may lack
#                (Bazel's own solibs, libgomp, ...). Never the large CUDA libraries
#                (cuBLAS, cuDNN, NCCL) nor the driver: env.sh finds those in the
#                GPU host's Python environment (site-packages/nvidia/*/lib, torch/lib).
#   DIR/run.sh   tests + 1-epoch example on cuda; last line `N passed, N failed`; all in
#                570 s (RUN_BUDGET_S), under the device tool's 10 minutes a command;
#                fails when the machine has a GPU but every GPU test skipped (naming
#                the CUDA driver's error)
#   DIR/bench.sh weft vs torch GPU benchmarks, also within 570 s (BENCH_BUDGET_S)
# tests/, bin/ and lib/ travel as DIR/payload.tar.xz (about 6 MB instead of 40: the
# CUDA fatbins compress well); env.sh unpacks it on first use outside DIR (under
# $TMPDIR), so running the bundle does not grow the folder carried with the checkout. The whole DIR stays
# under ~40 MB so it can be carried with the working tree (64 MiB limit).
# Binaries are built with --copt=-march=x86-64-v3 so they run on the GPU host's CPU.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
cd "$ROOT"
# GPU_BUNDLE_FLAGS overrides the extra build flags (e.g. empty to reuse a local build).
read -r -a FLAGS <<<"${GPU_BUNDLE_FLAGS---copt=-march=x86-64-v3}"
# GPU_BUNDLE_OUTPUT_BASE: a Bazel output base of the bundle's own, so that its flags
# do not replace the outputs of the everyday build (which then need no rebuild).
STARTUP=()
[ -n "${GPU_BUNDLE_OUTPUT_BASE:-}" ] && STARTUP=(--output_base="$GPU_BUNDLE_OUTPUT_BASE")
bazel_() { ./bazelw ${STARTUP[@]+"${STARTUP[@]}"} "$@"; }
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}

# gtest binaries only: run.sh calls each directly; gpu-tagged sh_tests (the
# multi-GPU mpirun ones in tests/parallel) need Bazel's runfiles and mpirun.
mapfile -t TESTS < <(bazel_ query 'kind(cc_test, attr(tags, gpu, tests(//tests/...)))' 2>/dev/null)
[ ${#TESTS[@]} -gt 0 ] || { echo "gpu_bundle: the query for gpu-tagged tests found none (no CUDA toolkit?)" >&2; exit 1; }
TESTS+=(//tests/cuda:caching_allocator_test)
BINS=(//examples:fashion_mnist //bench:cnn_gpu_weft //bench:gpt2_weft //bench:sgemm_mkl_ab //bench:gemm_shapes)
echo "gpu_bundle: building ${#TESTS[@]} tests and ${#BINS[@]} binaries" >&2
# (No bazel-* links: those of the everyday build stay as they are.)
bazel_ build --symlink_prefix=/ ${FLAGS[@]+"${FLAGS[@]}"} "${TESTS[@]}" "${BINS[@]}"
BIN=$(bazel_ info ${FLAGS[@]+"${FLAGS[@]}"} bazel-bin 2>/dev/null)

rm -rf "$DIR"/{tests,bin,bench,data,lib,run.sh,bench.sh,all.sh,env.sh,results,payload.tar.xz}
mkdir -p "$DIR"/{tests,bin,bench,data,lib}
path_of() { local l=${1#//}; echo "$BIN/${l%%:*}/${l##*:}"; }
for t in "${TESTS[@]}"; do install -m 755 "$(path_of "$t")" "$DIR/tests/"; done
for b in "${BINS[@]}"; do install -m 755 "$(path_of "$b")" "$DIR/bin/"; done
install -m 644 bench/cnn_gpu_torch.py bench/gpt2_torch.py "$DIR/bench/"
install -m 755 tools/gpu/run.sh tools/gpu/bench.sh tools/gpu/all.sh "$DIR/"
install -m 644 tools/gpu/env.sh "$DIR/"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  if [ -f "$DATA/$f.gz" ]; then install -m 644 "$DATA/$f.gz" "$DIR/data/"
  elif [ -f "$DATA/$f" ]; then gzip -c "$DATA/$f" >"$DIR/data/$f.gz"
  else echo "gpu_bundle: missing $DATA/$f[.gz] (install dataset-fashion-mnist)" >&2; exit 1; fi
done

# Shared libraries: everything ldd resolves except glibc/libstdc++/libgcc basics,
# the driver and the large CUDA libraries (present on the GPU host via pip).
SKIP='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libcudnn.*|libnccl|libnvrtc|libnvJitLink|libcufft|libcurand|libcusparse|libcusolver)\.so'
# ldd runs on the binaries in bazel-bin, where their RUNPATH ($ORIGIN/.../_solib_k8)
# resolves Bazel's per-library shared objects (tests link dynamically).
for t in "${TESTS[@]}" "${BINS[@]}"; do
  f=$(path_of "$t")
  { ldd "$f" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $SKIP ]] || [ -e "$DIR/lib/$name" ]; then continue; fi
  install -m 755 "$(readlink -f "$path")" "$DIR/lib/$name"
done
# Host code symbols only; device code (fatbins) is kept.
strip --strip-unneeded "$DIR"/tests/* "$DIR"/bin/* "$DIR"/lib/* 2>/dev/null || true

ls "$DIR/lib" >&2
nlibs=$(ls "$DIR/lib" | wc -l)
# The bundle must travel with a working tree under 64 MiB: ship the binaries
# xz-compressed (env.sh unpacks them on first use); the dataset is already gzipped.
rm -f "$DIR/payload.tar.xz"
tar -C "$DIR" -cf - lib tests bin | xz -T0 -6 >"$DIR/payload.tar.xz"
rm -rf "$DIR"/{lib,tests,bin}
echo "gpu_bundle: $DIR ($(du -sh "$DIR" | cut -f1)): ${#TESTS[@]} tests, $nlibs libs" >&2

#!/usr/bin/env bash
# all.sh (GPU bundle, made by tools/gpu_bundle.sh): the whole GPU verification
# in one command, each step with its own time budget, a summary line per step.
#   ./all.sh [--dry-run]
# Steps:
#   1 env       nvidia-smi; the driver, CUDA runtime, cuBLAS, cuDNN and NCCL versions
#               weft loads (its "weft: X loaded" lines, collected from step 2's logs)
#               and those of the machine's PyTorch
#   2 tests     every GPU test binary but pipe_gpu_test (run.sh; step 4 runs it); with a GPU present,
#               a skipped case is a failure
#   3 example   fashion_mnist --device cuda, 1 epoch in float32 and with --amp bf16;
#               each must reach test accuracy >= 0.85
#   4 pipeline  pipe_gpu_test: LocalPipe with two stages on cuda:0, DistributedModel and
#               DDP over a one-rank NCCL group, each against one CPU process (1e-4)
#   5 bench     bench.sh (CNN b256 and GPT-2-small step against PyTorch eager:
#               speedup= and mfu lines), then the top kernels of one weft GPT-2 step
#               under Nsight Compute (ncu), when it is there
#   6 cpu       not the GPU: the host's CPU (model, AVX-512 / AVX512-BF16 / AMX), its
#               measured FMA peak (gemm_shapes --peaks-only) and weft's float32 GEMM
#               against the MKL in the host PyTorch's libtorch_cpu.so (sgemm_mkl_ab, 1
#               then 2 threads), in the STEP_S_CPU (45) seconds steps 5 leaves it: the
#               CPU benchmarks' figures for whatever CPU the GPU machine has
# --dry-run (the CPU machine; a test runs it): every binary must load and list its
# cases or flags, the PyTorch peers must compile, and each GPU step is reported as
# skipped with the reason. Results: $OUT (else ./results beside this script):
# summary.txt (the step lines), all.log (everything printed) and logs.tgz (every
# log and gtest XML), rewritten after each step so a cut-off run still returns them.
# Time: ALL_BUDGET_S (default 540 s) split as STEP_S_<name> (defaults below); a step
# gets at most what is left. Exit status: 0 when no step failed.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DRY=0
case "${1:-}" in
  --dry-run) DRY=1 ;;
  "") ;;
  *) echo "usage: all.sh [--dry-run]" >&2; exit 2 ;;
esac
source "$HERE/env.sh"
OUTDIR=${RESULTS:-${OUT:-$HERE/results}}
mkdir -p "$OUTDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/weft-gpu-all.XXXXXX")
LOGS=$WORK/logs
mkdir -p "$LOGS"
SUMMARY=$OUTDIR/summary.txt
: >"$SUMMARY"
exec > >(tee "$OUTDIR/all.log") 2>&1
BUDGET=${ALL_BUDGET_S:-540}
CPU_S=${STEP_S_CPU:-45}  # kept for step 6 by step 5
START=$SECONDS
PY=${PYTHON:-python3}
failed_steps=0

left() { local l=$((BUDGET - (SECONDS - START))); echo $((l < 0 ? 0 : l)); }
# budget_for DEFAULT -> min(DEFAULT, seconds left)
budget_for() { local l; l=$(left); echo $(($1 < l ? $1 : l)); }
pack() { tar -C "$WORK" -czf "$OUTDIR/logs.tgz" logs 2>/dev/null || true; }
# report N NAME STATUS TEXT: one summary line (STATUS ok, FAILED or skipped)
report() {
  local line="step $1 $2: $3${4:+: $4} ($((SECONDS - STEP_START)) s)"
  echo "$line" | tee -a "$SUMMARY"
  [ "$3" = FAILED ] && failed_steps=$((failed_steps + 1))
  pack
}

NO_GPU_REASON="no NVIDIA GPU on this machine (nvidia-smi lists none, no /proc/driver/nvidia, no /dev/nvidia*)"
if gpus_present; then HAVE_GPU=1; else HAVE_GPU=0; fi
# A dry run never uses the GPU, even where there is one.
((DRY)) && HAVE_GPU=0 && NO_GPU_REASON="dry run"
echo "all.sh: $( ((DRY)) && echo dry run || echo GPU run), budget ${BUDGET} s, bundle $HERE, binaries $PAYLOAD"

# --- step 1: the machine and the libraries ----------------------------------
STEP_START=$SECONDS
if ((HAVE_GPU)); then
  timeout 20 nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
  gpu=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | head -n 1)
  torchv=$(timeout 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1 | tail -n 1)
  echo "$torchv" >"$LOGS/torch_versions.txt"
  report 1 env ok "${gpu:-nvidia-smi printed nothing}; PyTorch here: $torchv"
else
  report 1 env skipped "$NO_GPU_REASON"
fi

# --- step 2: every GPU test binary --------------------------------------------
STEP_START=$SECONDS
if ((HAVE_GPU)); then
  b=$(budget_for "${STEP_S_TESTS:-170}")
  RESULTS=$LOGS/tests RUN_STEPS=tests RUN_SKIP=pipe_gpu_test RUN_BUDGET_S=$b TEST_TIMEOUT=${TEST_TIMEOUT:-90} \
    bash "$HERE/run.sh" >"$LOGS/tests.txt" 2>&1
  rc=$?
  cat "$LOGS/tests.txt"
  counts=$(tail -n 1 "$LOGS/tests.txt")
  skipped=$(sed -n 's/^skipped: //p' "$LOGS/tests.txt" | tail -n 1)
  if [ "$rc" -ne 0 ]; then
    report 2 tests FAILED "$counts, ${skipped:-?} skipped; $(grep -m3 '^FAILED' "$LOGS/tests.txt" | tr '\n' ' ')"
  elif [ "${skipped:-1}" != 0 ]; then
    report 2 tests FAILED "$counts, but ${skipped:-?} cases skipped on a machine with a GPU"
  else
    report 2 tests ok "$counts, 0 skipped"
  fi
  # Step 1's other half: the library versions weft loaded, as it printed them.
  versions=$(grep -h '^weft: .* loaded' "$LOGS"/tests/logs/*.log 2>/dev/null | sort -u)
  echo "$versions" >"$LOGS/weft_versions.txt"
  while read -r v; do [ -n "$v" ] && echo "  $v" | tee -a "$SUMMARY"; done <<<"$versions"
else
  # Each binary must load (its shared libraries resolve) and list its cases.
  n=0 cases=0 bad=()
  for t in "$PAYLOAD"/tests/*; do
    [ -x "$t" ] || continue
    [ "$(basename "$t")" = pipe_gpu_test ] && continue  # step 4's
    n=$((n + 1))
    if out=$(timeout 60 "$t" --gtest_list_tests 2>&1); then
      cases=$((cases + $(grep -c '^  ' <<<"$out")))
    else
      bad+=("$(basename "$t"): $(tail -n 1 <<<"$out")")
    fi
  done
  if ((${#bad[@]})) || ((n == 0)); then
    report 2 tests FAILED "$n binaries, ${#bad[@]} do not load: ${bad[*]:-no test binaries in the bundle}"
  else
    report 2 tests skipped "$NO_GPU_REASON; $n binaries load and list $cases cases"
  fi
fi

# --- step 3: the example, float32 and bf16 ------------------------------------
STEP_START=$SECONDS
if ((HAVE_GPU)); then
  each=$(($(budget_for "${STEP_S_EXAMPLE:-130}") / 2))
  texts=() bad=0
  for amp in none bf16; do
    log=$LOGS/fashion_mnist_$amp.log
    timeout -k 5 "$each" "$PAYLOAD/bin/fashion_mnist" --device cuda --epochs 1 --amp "$amp" --data "$HERE/data" \
      --no-progress >"$log" 2>&1
    rc=$?
    acc=$(sed -n 's/^test_accuracy=//p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }'; then
      texts+=("amp $amp test_accuracy=$acc")
    else
      bad=1
      texts+=("amp $amp exit $rc test_accuracy=${acc:-none}: $(grep -m1 -i error "$log" || tail -n 1 "$log")")
    fi
  done
  report 3 example "$( ((bad)) && echo FAILED || echo ok)" "${texts[*]}"
else
  if "$PAYLOAD/bin/fashion_mnist" --help >"$LOGS/fashion_mnist_help.txt" 2>&1 && ls "$HERE"/data/*.gz >/dev/null 2>&1; then
    report 3 example skipped "$NO_GPU_REASON; fashion_mnist loads, data present"
  else
    report 3 example FAILED "fashion_mnist --help failed or $HERE/data has no .gz files"
  fi
fi

# --- step 4: the pipeline on one GPU ------------------------------------------
STEP_START=$SECONDS
t=$PAYLOAD/tests/pipe_gpu_test
if [ ! -x "$t" ]; then
  report 4 pipeline FAILED "no pipe_gpu_test in the bundle"
elif ((HAVE_GPU)); then
  xml=$LOGS/pipe_gpu_test.xml
  timeout -k 5 "$(budget_for "${STEP_S_PIPELINE:-40}")" "$t" --gtest_output="xml:$xml" >"$LOGS/pipe_gpu_test.log" 2>&1
  rc=$?
  cat "$LOGS/pipe_gpu_test.log"
  ok=$(grep -c '^\[       OK \]' "$LOGS/pipe_gpu_test.log")
  sk=$(grep -c '^\[  SKIPPED \] PipeOnOneGpu\.' "$LOGS/pipe_gpu_test.log")
  if [ "$rc" -eq 0 ] && [ "$sk" -eq 0 ] && [ "$ok" -gt 0 ]; then
    report 4 pipeline ok "$ok cases passed (LocalPipe 2 stages on cuda:0, DistributedModel and DDP over NCCL world 1; 1e-4 of the CPU)"
  else
    report 4 pipeline FAILED "exit $rc, $ok passed, $sk skipped: $(grep -m2 -E 'Failure|error|what\(\)' "$LOGS/pipe_gpu_test.log" | tr '\n' ' ')"
  fi
else
  if out=$(timeout 60 "$t" --gtest_list_tests 2>&1); then
    report 4 pipeline skipped "$NO_GPU_REASON; pipe_gpu_test loads and lists $(grep -c '^  ' <<<"$out") cases"
  else
    report 4 pipeline FAILED "pipe_gpu_test does not load: $(tail -n 1 <<<"$out")"
  fi
fi

# profile_kernels NAME CMD...: CMD under ncu (kernel durations), the top kernels
# into $LOGS/top_kernels_NAME.txt and their first lines into the summary.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
profile_kernels() {
  local name=$1 csvf=$LOGS/ncu_$1.csv out=$LOGS/ncu_$1.out
  shift
  [ -n "$NCU" ] || { echo "  top kernels ($name): no ncu here" >>"$SUMMARY"; return; }
  # ncu must reach the real driver: its folder goes first on the library path.
  local real pl
  real=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
  [ -z "$real" ] && [ -e /usr/local/nvidia/lib64/libcuda.so.1 ] && real=/usr/local/nvidia/lib64/libcuda.so.1
  pl=$(($(left) - CPU_S))
  if ((pl > 15)); then
    LD_LIBRARY_PATH=${real:+$(dirname "$real"):}$LD_LIBRARY_PATH timeout -k 5 $((pl - 5)) "$NCU" \
      --metrics gpu__time_duration.sum --csv --print-units base --clock-control none --log-file "$csvf" "$@" \
      >"$out" 2>&1
  fi
  "$PY" - "$csvf" >"$LOGS/top_kernels_$name.txt" 2>&1 <<'PYEOF'
import collections, csv, sys
try:
    rows = list(csv.reader(l for l in open(sys.argv[1], errors="replace") if l.startswith('"')))
except OSError:
    rows = []
if not rows:
    sys.exit("ncu wrote no kernel rows (see its .out log)")
head, body = rows[0], rows[1:]
k, m, v = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
tot, cnt = collections.Counter(), collections.Counter()
for r in body:
    if len(r) > v and r[m] == "gpu__time_duration.sum":
        tot[r[k][:100]] += float(r[v].replace(",", ""))
        cnt[r[k][:100]] += 1
s = sum(tot.values())
print(f"{sum(cnt.values())} kernels, {s / 1e6:.1f} ms of kernel time in one step (serialised by the profiler)")
for name, t in tot.most_common(25):
    print(f"{100 * t / s:5.1f}% {t / 1e6:8.2f} ms {cnt[name]:5d}x {name}")
PYEOF
  { echo "  top kernels ($name):"; sed 's/^/    /' "$LOGS/top_kernels_$name.txt" | head -n 9; } >>"$SUMMARY"
}

# --- step 5: against PyTorch, and where weft's GPT-2 step spends its time -----
STEP_START=$SECONDS
if ((HAVE_GPU)); then
  l=$(($(left) - CPU_S))
  nb=$((l > 70 ? l - 60 : l))  # ~60 s kept for the kernel profile, CPU_S for step 6
  RESULTS=$LOGS/bench BENCH_BUDGET_S=$nb bash "$HERE/bench.sh" all >"$LOGS/bench.txt" 2>&1
  cat "$LOGS/bench.txt"
  lines=$(grep -E 'speedup=|mfu:' "$LOGS/bench.txt" | tr '\n' ';')
  grep -E 'speedup=|mfu:' "$LOGS/bench.txt" | sed 's/^/  /' >>"$SUMMARY"
  # The top kernels of one GPT-2 step (the first, no warm-up) under Nsight Compute,
  # one metric (kernel duration), so one pass per kernel: weft's, then PyTorch's.
  profile_kernels weft "$PAYLOAD/bin/gpt2_weft" --steps 1 --warmup 0 --peak-iters 0
  profile_kernels torch "$PY" "$HERE/bench/gpt2_torch.py" --steps 1 --warmup 0 --peak-iters 0
  if grep -q 'speedup=[0-9]' "$LOGS/bench.txt"; then
    report 5 bench ok "$lines"
  else
    report 5 bench FAILED "no speedup figure: $lines"
  fi
else
  bad=()
  for b in cnn_gpu_weft gpt2_weft; do
    "$PAYLOAD/bin/$b" --help >/dev/null 2>&1 || bad+=("$b --help failed")
  done
  for p in "$HERE"/bench/*.py; do
    "$PY" -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$p" 2>/dev/null || bad+=("$(basename "$p") does not parse")
  done
  if ((${#bad[@]})); then
    report 5 bench FAILED "${bad[*]}"
  else
    report 5 bench skipped "$NO_GPU_REASON; the benchmarks load and the PyTorch peers parse"
  fi
fi

# --- step 6: the host's CPU, weft's float32 GEMM against MKL ------------------
STEP_START=$SECONDS
sg=$PAYLOAD/bin/sgemm_mkl_ab gs=$PAYLOAD/bin/gemm_shapes
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
cpu="${cpu:-unknown CPU}, $(nproc) cores; $(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null |
  sort -u | tr '\n' ' ' | sed 's/ $//')"
mkl=""
IFS=: read -r -a libdirs <<<"$LD_LIBRARY_PATH"
for d in "${libdirs[@]}"; do [ -f "$d/libtorch_cpu.so" ] && mkl=$d/libtorch_cpu.so && break; done
if [ ! -x "$sg" ] || [ ! -x "$gs" ]; then
  report 6 cpu FAILED "no sgemm_mkl_ab or gemm_shapes in the bundle"
elif ! ((HAVE_GPU)); then
  if "$sg" --help >/dev/null 2>&1 && "$gs" --help >/dev/null 2>&1; then
    report 6 cpu skipped "$NO_GPU_REASON (this step measures the GPU machine's CPU); sgemm_mkl_ab and gemm_shapes load"
  else
    report 6 cpu FAILED "sgemm_mkl_ab --help or gemm_shapes --help failed"
  fi
elif [ -z "$mkl" ]; then
  report 6 cpu skipped "$cpu; no libtorch_cpu.so on the library path to take MKL from"
else
  echo "  cpu: $cpu" >>"$SUMMARY"
  timeout -k 2 20 "$gs" --peaks-only 2>&1 | tee "$LOGS/cpu_peaks.txt" | sed 's/^/  /' >>"$SUMMARY"
  texts=()
  for th in 1 2; do
    l=$(left)
    ((l >= 15)) || break
    OMP_WAIT_POLICY=passive timeout -k 2 $((l - 2)) "$sg" --mkl-lib "$mkl" --threads "$th" --rounds 9 \
      >"$LOGS/sgemm_vs_mkl_$th.txt" 2>&1
    rc=$?
    sed 's/^/  /' "$LOGS/sgemm_vs_mkl_$th.txt" >>"$SUMMARY"
    texts+=("$th thread(s): exit $rc, $(grep -cE '[0-9]x ' "$LOGS/sgemm_vs_mkl_$th.txt") cases")
  done
  if ((${#texts[@]})); then
    report 6 cpu ok "$cpu; $(IFS=';'; echo "${texts[*]}")"
  else
    report 6 cpu skipped "$cpu; under 15 s left"
  fi
fi

echo "all.sh: $failed_steps steps failed, $((SECONDS - START)) s" | tee -a "$SUMMARY"
pack
rm -rf "$WORK"
[ "$failed_steps" -eq 0 ]

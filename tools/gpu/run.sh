#!/usr/bin/env bash
# run.sh (GPU bundle, made by tools/gpu_bundle.sh): runs every GPU test binary
# (gtest XML in $RESULTS/xml), then examples/fashion_mnist on --device cuda for
# 1 epoch (EXAMPLE_EPOCHS overrides), and ends with exactly one line
# `N passed, N failed` counting test cases (skipped cases are not counted) plus
# the example as one case. Logs go to $RESULTS (default: $OUT if set, else
# ./results next to this script).
#   ./run.sh [gtest_filter]
# Steps: RUN_STEPS=tests|example|all (default all), so each can be its own command;
# RUN_SKIP names test binaries to leave out (space-separated; all.sh runs one alone).
# Time: everything fits in RUN_BUDGET_S (default 570 s, under the device tool's 10
# minutes a command): each test binary gets at most TEST_TIMEOUT (default 240 s)
# and the example at most EXAMPLE_TIMEOUT (default 300 s), both cut to what is left
# of the budget; a step with no time left counts as a failure.
# A machine with a GPU on which every GPU test skipped is a failure: the line
# names the reason the tests gave (the CUDA driver's error, e.g. a driver too old).
# Exit status: 0 when nothing failed, else 1.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/env.sh"
RESULTS=${RESULTS:-${OUT:-$HERE/results}}
mkdir -p "$RESULTS/xml" "$RESULTS/logs"
FILTER=${1:-*}
STEPS=${RUN_STEPS:-all}
BUDGET=${RUN_BUDGET_S:-570}
START=$SECONDS
passed=0
failed=0
skipped=0  # reported per binary
failures=()

# time_for LIMIT -> min(LIMIT, seconds left in the budget), at least 0
time_for() {
  local left=$((BUDGET - (SECONDS - START)))
  ((left < 0)) && left=0
  echo $(($1 < left ? $1 : left))
}

# count_xml FILE -> "passed failed skipped" for the test cases in a gtest XML file
count_xml() {
  python3 - "$1" <<'PYEOF' 2>/dev/null || echo "0 1 0"
import sys, xml.etree.ElementTree as ET
p = f = s = 0
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if tc.find("failure") is not None or tc.find("error") is not None:
        f += 1
    elif tc.find("skipped") is not None or tc.get("result") == "skipped" or tc.get("status") == "notrun":
        s += 1
    else:
        p += 1
print(p, f, s)
PYEOF
}

# no_gpu_cases FILE -> the cases of a gtest XML file that skipped because a GPU is
# visible, as a gtest filter (Suite.Case:Suite.Case), or nothing
no_gpu_cases() {
  python3 - "$1" <<'PYEOF' 2>/dev/null
import sys, xml.etree.ElementTree as ET
names = []
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    sk = tc.find("skipped")
    if sk is not None and "a GPU is visible" in (sk.get("message", "") + (sk.text or "")):
        names.append(tc.get("classname") + "." + tc.get("name"))
print(":".join(names))
PYEOF
}

if gpus_present; then
  echo "machine: $( (nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
    echo 'NVIDIA GPU (nvidia-smi unavailable)') | head -n 1 | tr -s ' ')"
else
  echo "machine: no NVIDIA GPU found (nvidia-smi, /proc/driver/nvidia, /dev/nvidia*)"
fi

if [ "$STEPS" = all ] || [ "$STEPS" = tests ]; then
  for t in "$PAYLOAD"/tests/*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    case " ${RUN_SKIP:-} " in *" $name "*) continue ;; esac
    xml="$RESULTS/xml/$name.xml"
    log="$RESULTS/logs/$name.log"
    rm -f "$xml"
    limit=$(time_for "${TEST_TIMEOUT:-240}")
    if [ "$limit" -le 0 ]; then
      failed=$((failed + 1))
      failures+=("$name (not run: the ${BUDGET} s budget is spent)")
      echo "$name: not run (budget spent)"
      continue
    fi
    timeout -k 10 "$limit" "$t" --gtest_filter="$FILTER" --gtest_output="xml:$xml" >"$log" 2>&1
    rc=$?
    if [ -s "$xml" ]; then
      read -r p f s < <(count_xml "$xml")
    else
      p=0 f=0 s=0
    fi
    # A crash, a timeout or a non-zero exit without a recorded failure is one failure.
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    # The no-GPU cases (they skip with "a GPU is visible") run again with the GPU
    # hidden (CUDA_VISIBLE_DEVICES=""), where they check the error a user without one gets.
    nogpu=$(no_gpu_cases "$xml")
    if [ -n "$nogpu" ] && [ "$rc" -eq 0 ]; then
      n=$(tr ':' '\n' <<<"$nogpu" | grep -c .)
      CUDA_VISIBLE_DEVICES="" timeout -k 10 "$(time_for 60)" "$t" --gtest_filter="$nogpu" \
        --gtest_output="xml:$RESULTS/xml/$name.nogpu.xml" >"$RESULTS/logs/$name.nogpu.log" 2>&1
      rc2=$?
      read -r p2 f2 s2 < <(count_xml "$RESULTS/xml/$name.nogpu.xml")
      if [ "$rc2" -ne 0 ] && [ "$f2" -eq 0 ]; then f2=1; fi
      p=$((p + p2)) f=$((f + f2)) s=$((s - n + s2))
      [ "$f2" -gt 0 ] && failures+=("$name with the GPU hidden (exit $rc2, log $RESULTS/logs/$name.nogpu.log)")
      echo "$name: $p2 passed, $f2 failed, $s2 skipped with the GPU hidden ($nogpu)"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    [ "$f" -gt 0 ] && failures+=("$name (exit $rc, log $log)")
    echo "$name: $p passed, $f failed, $s skipped (exit $rc, ${limit} s limit)"
  done
  # GPU tests skipped for want of a GPU although the machine has one: CUDA could
  # not use it (the device count is the same for every binary, so all of them did).
  why=$(grep -ho 'no CUDA GPU visible (.*' "$RESULTS"/logs/*.log 2>/dev/null | head -n 1 | sed 's/: test skipped$//')
  if [ -n "$why" ] && gpus_present; then
    failed=$((failed + 1))
    failures+=("every GPU test skipped on a machine with a GPU: $why")
  elif [ -n "$why" ]; then
    echo "GPU tests skipped: $why"
  fi
fi

if [ "$STEPS" = all ] || [ "$STEPS" = example ]; then
  # The example: Fashion-MNIST on the GPU, 1 epoch by default.
  log="$RESULTS/logs/fashion_mnist.log"
  limit=$(time_for "${EXAMPLE_TIMEOUT:-300}")
  if [ "$limit" -le 0 ]; then
    rc=124
    echo "budget spent" >"$log"
  else
    timeout -k 10 "$limit" "$PAYLOAD/bin/fashion_mnist" --device cuda --epochs "${EXAMPLE_EPOCHS:-1}" --data "$HERE/data" \
      --no-progress --metrics "$RESULTS/fashion_mnist_metrics.jsonl" --plot "$RESULTS/fashion_mnist.svg" >"$log" 2>&1
    rc=$?
  fi
  if [ "$rc" -eq 0 ] && grep -q '^test_accuracy=' "$log"; then
    passed=$((passed + 1))
    echo "fashion_mnist --device cuda: passed ($(grep '^test_accuracy=' "$log"), ${limit} s limit)"
  else
    failed=$((failed + 1))
    failures+=("fashion_mnist --device cuda (exit $rc, log $log)")
    echo "fashion_mnist --device cuda: FAILED (exit $rc, ${limit} s limit): $(grep -m1 -i 'error' "$log" || tail -n 1 "$log")"
  fi
fi

for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "skipped: $skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

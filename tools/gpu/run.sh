#!/usr/bin/env bash
# run.sh (GPU bundle, made by tools/gpu_bundle.sh): runs every GPU test binary
# (gtest XML in $RESULTS/xml), then examples/fashion_mnist on
# --device cuda (default flags: 5 epochs, like the CPU run; EXAMPLE_EPOCHS overrides), and ends with exactly one line `N passed, N failed` counting test
# cases (skipped cases are not counted) plus the example as one case. Logs go to
# $RESULTS (default: $OUT if set, else ./results next to this script).
#   ./run.sh [gtest_filter]
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/env.sh"
RESULTS=${RESULTS:-${OUT:-$HERE/results}}
mkdir -p "$RESULTS/xml" "$RESULTS/logs"
FILTER=${1:-*}
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
passed=0
failed=0
failures=()

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

for t in "$HERE"/tests/*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  xml="$RESULTS/xml/$name.xml"
  rm -f "$xml"
  timeout -k 10 "$TEST_TIMEOUT" "$t" --gtest_filter="$FILTER" --gtest_output="xml:$xml" >"$RESULTS/logs/$name.log" 2>&1
  rc=$?
  if [ -s "$xml" ]; then
    read -r p f s < <(count_xml "$xml")
  else
    p=0 f=0 s=0
  fi
  # A crash, a timeout or a non-zero exit without a recorded failure is one failure.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p))
  failed=$((failed + f))
  [ "$f" -gt 0 ] && failures+=("$name (exit $rc, log $RESULTS/logs/$name.log)")
  echo "$name: $p passed, $f failed, $s skipped (exit $rc)"
done

# The example: Fashion-MNIST on the GPU with the default schedule.
log="$RESULTS/logs/fashion_mnist.log"
timeout -k 10 "${EXAMPLE_TIMEOUT:-900}" "$HERE/bin/fashion_mnist" --device cuda --epochs "${EXAMPLE_EPOCHS:-5}" --data "$HERE/data" \
  --no-progress --metrics "$RESULTS/fashion_mnist_metrics.jsonl" --plot "$RESULTS/fashion_mnist.svg" >"$log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^test_accuracy=' "$log"; then
  passed=$((passed + 1))
  echo "fashion_mnist --device cuda: passed ($(grep '^test_accuracy=' "$log"))"
else
  failed=$((failed + 1))
  failures+=("fashion_mnist --device cuda (exit $rc, log $log)")
  echo "fashion_mnist --device cuda: FAILED (exit $rc): $(grep -m1 'error' "$log" || tail -n 1 "$log")"
fi

for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"

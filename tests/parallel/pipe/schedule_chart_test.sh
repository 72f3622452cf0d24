#!/usr/bin/env bash
# The schedule_chart tool: prints the chart and the simulated figures, writes the
# SVG, and refuses bad arguments with the generator's message.
set -euo pipefail
bin="$1"
out="$("$bin" --schedule zb --ranks 4 --microbatches 8 --svg "$TEST_TMPDIR/zb.svg")"
grep -qxF "rank 3 |.. .. .. F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7|" <<<"$out"
grep -qxF "rank 0: busy 24, idle 3, peak live activations 4, peak pending weight gradients 1" <<<"$out"
grep -qxF "makespan=27 bubble=0.1111" <<<"$out"
grep -q "^<svg " "$TEST_TMPDIR/zb.svg"
[[ $(grep -c '<rect class="action ' "$TEST_TMPDIR/zb.svg") -eq 96 ]]
# Interleaved: costs are per rank's share, split over the stages, so the bubble is 3/19.
inter="$("$bin" --schedule interleaved --ranks 4 --microbatches 8 --virtual 2)"
grep -qxF "makespan=28.5 bubble=0.1579" <<<"$inter"
ofob="$("$bin" --schedule 1f1b --ranks 4 --microbatches 8)"
grep -qxF "makespan=33 bubble=0.2727" <<<"$ofob"
if err="$("$bin" --schedule interleaved --ranks 4 --microbatches 6 --virtual 2 2>&1)"; then
  echo "expected a failure for m=6, p=4"; exit 1
fi
grep -qF "multiple of the rank count (microbatches=6, ranks=4)" <<<"$err"
if err="$("$bin" --schedule pipedream 2>&1)"; then echo "expected a failure"; exit 1; fi
grep -qF "unknown pipeline schedule 'pipedream'" <<<"$err"
echo "schedule_chart_test: ok"

#!/usr/bin/env bash
# The schedule_chart tool (//tools:schedule_chart): prints the chart and the
# simulated figures, writes the SVG, and refuses bad arguments: a schedule the
# generator refuses with its message (exit 1), a bad flag value with an error
# naming the flag (exit 2; "2.7" is not a rank count, not 2). --help exits 0.
# --from FILE charts a text schedule; a missing file, a parse error and a
# schedule the validator refuses exit 1 with the message. zbv and
# interleaved-zb print their action lists and bubbles.
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
# zbv (V placement, two stages per rank without --virtual) and interleaved-zb:
# 4 ranks, 8 micro-batches idle 3 stage-times of 51 (5.9%), against zb-h1's 11.1%.
zbv="$("$bin" --schedule zbv --ranks 4 --microbatches 8 --actions)"
grep -qxF "zbv: ranks=4 microbatches=8 virtual=2 stages=8 backward=split placement=v" <<<"$zbv"
grep -qF "rank 3: RecvAct3.0<-s2@r2 F3.0 F4.0 SendAct4.0->s5@r2 " <<<"$zbv"
grep -qxF "rank 0: busy 24, idle 1.5, peak live activations 8, peak pending weight gradients 7" <<<"$zbv"
grep -qxF "makespan=25.5 bubble=0.0588" <<<"$zbv"
izb="$("$bin" --schedule interleaved-zb --virtual 2 --ranks 4 --microbatches 8 --actions)"
grep -qxF "interleaved-zb: ranks=4 microbatches=8 virtual=2 stages=8 backward=split" <<<"$izb"
grep -qF "rank 3: busy 24, idle 1.5, peak live activations 5," <<<"$izb"
grep -qxF "makespan=25.5 bubble=0.0588" <<<"$izb"
# zbv's text (with placement=v) charts as the generated schedule.
sed '/^$/q' <<<"$zbv" > "$TEST_TMPDIR/zbv.txt"
[[ "$("$bin" --from "$TEST_TMPDIR/zbv.txt")" == "$("$bin" --schedule zbv --ranks 4 --microbatches 8)" ]]
if err="$("$bin" --schedule zbv --virtual 3 2>&1)"; then echo "expected a failure for zbv --virtual 3"; exit 1; fi
grep -qF "zbv places two stages per rank in a V (virtual=3)" <<<"$err"
if err="$("$bin" --schedule interleaved --ranks 4 --microbatches 6 --virtual 2 2>&1)"; then
  echo "expected a failure for m=6, p=4"; exit 1
fi
grep -qF "multiple of the rank count (microbatches=6, ranks=4)" <<<"$err"
if err="$("$bin" --schedule pipedream 2>&1)"; then echo "expected a failure"; exit 1; fi
grep -qF "schedule_chart: error: flag --schedule must be one of gpipe|1f1b|interleaved|zb|zbv|interleaved-zb, got 'pipedream'" <<<"$err"
# flag_error WANT ARGS...: exits 2, prints WANT on stderr and nothing on stdout.
flag_error() {
  local want="$1" rc=0; shift
  "$bin" "$@" > "$TEST_TMPDIR/out" 2> "$TEST_TMPDIR/err" || rc=$?
  [[ $rc -eq 2 ]] || { echo "rc $rc for $*"; cat "$TEST_TMPDIR/out" "$TEST_TMPDIR/err"; exit 1; }
  [[ ! -s "$TEST_TMPDIR/out" ]] || { echo "stdout for $*:"; cat "$TEST_TMPDIR/out"; exit 1; }
  grep -qF "schedule_chart: error: $want" "$TEST_TMPDIR/err" || { echo "no '$want' in:"; cat "$TEST_TMPDIR/err"; exit 1; }
}
flag_error "flag --ranks: '2.7' is not an integer" --ranks 2.7
flag_error "flag --microbatches: '8x' is not an integer" --microbatches 8x
flag_error "flag --forward: 'fast' is not a number" --forward fast
flag_error "--ranks must be a positive integer (got 0)" --ranks 0
flag_error "--virtual must be a positive integer (got -1)" --virtual=-1
flag_error "--transfer must be >= 0 (got -1)" --transfer -1
flag_error "unknown flag '--rank'" --rank 4
flag_error "flag --svg needs a value (--svg PATH)" --svg
# --from FILE: a text schedule. What --actions prints (up to the blank line)
# charts as the generated schedule does.
"$bin" --schedule zb --ranks 4 --microbatches 8 --actions > "$TEST_TMPDIR/zb_actions.txt"
sed '/^$/q' "$TEST_TMPDIR/zb_actions.txt" > "$TEST_TMPDIR/zb.txt"
grep -qxF "zb-h1: ranks=4 microbatches=8 virtual=1 stages=4 backward=split" "$TEST_TMPDIR/zb.txt"
[[ "$("$bin" --from "$TEST_TMPDIR/zb.txt")" == "$("$bin" --schedule zb --ranks 4 --microbatches 8)" ]]
# Written by hand: comments, blank lines, no header (GPipe, 2 ranks, 2 micro-batches).
cat > "$TEST_TMPDIR/hand.txt" <<'TEXT'
# fill-drain on two ranks

rank 0: F0.0 SendAct0.0->s1@r1  F0.1 SendAct0.1->s1@r1   RecvGrad0.0<-s1@r1 B0.0  RecvGrad0.1<-s1@r1 B0.1
rank 1: RecvAct1.0<-s0@r0 F1.0  RecvAct1.1<-s0@r0 F1.1   B1.0 SendGrad1.0->s0@r0  B1.1 SendGrad1.1->s0@r0  # last stage
TEXT
hand="$("$bin" --from "$TEST_TMPDIR/hand.txt" --svg "$TEST_TMPDIR/hand.svg")"
grep -qxF "rank 0 |F0 F1 .. .. .. B0 B0 B1 B1|" <<<"$hand"
grep -qxF "makespan=9 bubble=0.3333" <<<"$hand"
grep -q "^<svg " "$TEST_TMPDIR/hand.svg"
# from_error WANT FILE: exits 1 and prints WANT on stderr.
from_error() {
  local want="$1" rc=0
  "$bin" --from "$2" > "$TEST_TMPDIR/out" 2> "$TEST_TMPDIR/err" || rc=$?
  [[ $rc -eq 1 ]] || { echo "rc $rc for --from $2"; cat "$TEST_TMPDIR/out" "$TEST_TMPDIR/err"; exit 1; }
  grep -qF "schedule_chart: error: --from $2: $want" "$TEST_TMPDIR/err" || {
    echo "no '$want' in:"; cat "$TEST_TMPDIR/err"; exit 1; }
}
from_error "cannot open the file" "$TEST_TMPDIR/missing.txt"
sed 's/F0.1 /Fx.1 /' "$TEST_TMPDIR/hand.txt" > "$TEST_TMPDIR/typo.txt"
from_error "parse_schedule: line 3, token 5 'Fx.1': unknown action kind 'Fx'" "$TEST_TMPDIR/typo.txt"
sed 's/RecvAct1.1<-s0@r0 //' "$TEST_TMPDIR/hand.txt" > "$TEST_TMPDIR/norecv.txt"
from_error "schedule custom: rank 1 action 2 (F1.1): its input from stage 0 on rank 0 was not received before" \
  "$TEST_TMPDIR/norecv.txt"
help="$("$bin" --help)"
grep -qF "usage: schedule_chart [flags]" <<<"$help"
grep -qF -- "--ranks N" <<<"$help"
grep -qF -- "pipeline ranks p (default 4)" <<<"$help"
grep -qF -- "--unit X" <<<"$help"
echo "schedule_chart_test: ok"

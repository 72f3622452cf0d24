#!/usr/bin/env bash
# Runs one program of the guide and checks its output.
# Usage: run_program.sh PROGRAM [--np N,M --mpirun MPIRUN_SH] [--expect TEXT]... -- [PROGRAM ARGS]
# With --np the program runs under mpirun once per rank count. The run must
# exit 0 and its output (stdout and stderr) must contain every TEXT (fixed
# strings); the program's arguments may name $TEST_TMPDIR as @TMP@.
set -uo pipefail
program="$1"; shift
nps="" mpirun_sh="" expects=()
while [ $# -gt 0 ]; do
  case "$1" in
    --np) nps="$2"; shift 2 ;;
    --mpirun) mpirun_sh="$2"; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "run_program.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
args=()
for a in "$@"; do args+=("${a//@TMP@/$tmp}"); done
# mpirun ranks would share gtest-style premature-exit files; not needed here.
unset TEST_PREMATURE_EXIT_FILE
export WEFT_COLLECTIVE_TIMEOUT_S="${WEFT_COLLECTIVE_TIMEOUT_S:-60}"

check_run() {  # LABEL CMD...: runs CMD, checks its exit status and output
  local label="$1"; shift
  echo "=== $label: $*"
  local out="$tmp/out.txt"
  timeout 120 "$@" > "$out" 2>&1
  local rc=$?
  cat "$out"
  if [ "$rc" -ne 0 ]; then echo "FAILED: $label exited $rc"; return 1; fi
  local missing=0
  for want in "${expects[@]}"; do
    if ! grep -qF -- "$want" "$out"; then echo "FAILED: $label printed no '$want'"; missing=1; fi
  done
  return "$missing"
}

status=0
if [ -z "$nps" ]; then
  check_run "$(basename "$program")" "$program" "${args[@]}" || status=1
else
  for np in ${nps//,/ }; do
    rm -rf "$tmp/run" && mkdir -p "$tmp/run"
    check_run "mpirun -np $np" "$mpirun_sh" -np "$np" "$program" "${args[@]}" || status=1
  done
fi
[ "$status" -eq 0 ] && echo "PASSED"
exit "$status"

#!/usr/bin/env bash
# tools/mpirun_status.sh: its exit status reflects the ranks' even under
# --enable-recovery, where Open MPI 4.1's mpirun itself exits 0 (checked here
# too, since the README relies on it).
# Usage: mpirun_status_test.sh MPIRUN_STATUS_SH MPIRUN_SH
set -uo pipefail
wrapper="$1"
export MPIRUN="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
unset GTEST_OUTPUT XML_OUTPUT_FILE
pass=0 fail=0
# expect WANT_RC GREP_OR_EMPTY CMD...: CMD exits WANT_RC and its output contains GREP.
expect() {
  local want="$1" pattern="$2"; shift 2
  "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [[ "$rc" != "$want" ]]; then
    echo "FAILED (rc $rc, want $want): $*"; cat "$tmp/out"; fail=$((fail+1)); return
  fi
  if [[ -n "$pattern" ]] && ! grep -qF -- "$pattern" "$tmp/out"; then
    echo "FAILED (no '$pattern'): $*"; cat "$tmp/out"; fail=$((fail+1)); return
  fi
  pass=$((pass+1))
}
# rank_exits CODES...: a program whose rank r exits CODES[r] (kill: SIGKILLs itself).
rank_exits() {
  echo "set -- $*; shift \$OMPI_COMM_WORLD_RANK; echo rank \$OMPI_COMM_WORLD_RANK ran; "'
        if [ "$1" = kill ]; then kill -9 $$; fi; exit "$1"'
}

# Open MPI's behaviour that the wrapper exists for.
expect 0 "" "$MPIRUN" --enable-recovery -np 2 sh -c 'exit 3'
expect 3 "" "$MPIRUN" -np 2 sh -c 'exit 3'

expect 0 "rank 1 ran" "$wrapper" --enable-recovery -np 2 -- sh -c "$(rank_exits 0 0)"
expect 3 "mpirun_status: rank 1 exited 3" "$wrapper" --enable-recovery -np 2 -- sh -c "$(rank_exits 3 3)"
expect 5 "mpirun_status: rank 1 exited 5" "$wrapper" --enable-recovery -np 2 -- sh -c "$(rank_exits 0 5)"
if grep -q "rank 0 exited" "$tmp/out"; then echo "FAILED: rank 0 succeeded but was reported"; fail=$((fail+1)); fi
expect 137 "mpirun_status: rank 1 exited 137 (signal 9)" \
  "$wrapper" --enable-recovery -np 3 -- sh -c "$(rank_exits 0 kill 0)"
expect 4 "mpirun_status: rank 2 exited 6" "$wrapper" --enable-recovery -np 3 -- sh -c "$(rank_exits 0 4 6)"
# Without --enable-recovery mpirun's own non-zero status is kept.
expect 3 "" "$wrapper" -np 2 -- sh -c "$(rank_exits 3 0)"
expect 2 "usage: mpirun_status.sh" "$wrapper" -np 2 sh -c true

echo "$pass passed, $fail failed"
test "$fail" -eq 0

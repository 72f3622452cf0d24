#!/usr/bin/env bash
# mpirun_status.sh: mpirun whose exit status says whether every rank succeeded.
#
#   tools/mpirun_status.sh [mpirun options] -- PROGRAM [ARGS...]
#   tools/mpirun_status.sh --allow-run-as-root --oversubscribe --enable-recovery -np 2 \
#     -- bazel-bin/examples/fashion_mnist_ddp --epochs 1
#
# Why: with --enable-recovery (which lets the surviving ranks report a dead one
# instead of being killed with it), Open MPI 4.1's mpirun exits 0 even when ranks
# exit non-zero or are killed, and no MCA option changes that (tried:
# orte_abort_on_non_zero_status, orte_report_child_jobs_separately,
# orte_max_restarts, orte_allowed_exit_without_sync; see README "Data parallel").
#
# Contract: each rank runs under a small sh wrapper that records the program's
# exit status in a private directory (WEFT_MPIRUN_STATUS_DIR, exported to the
# ranks with -x; it must be on a filesystem every node sees). After mpirun
# returns, this script exits
#   - mpirun's own status when that is non-zero (the job failed to launch, or
#     was torn down without --enable-recovery);
#   - else the status of the lowest rank whose status is non-zero, or 1 if some
#     rank left no status at all (killed together with its wrapper);
#   - else 0.
# It prints one line per failed rank on stderr ("mpirun_status: rank 1 exited
# 137 (signal 9)"). Stdout and stderr of the ranks pass through unchanged.
# MPIRUN (default: mpirun) names the launcher, e.g. tests/parallel/mpirun.sh.
set -uo pipefail

mpi_opts=()
while (($#)) && [[ "$1" != "--" ]]; do mpi_opts+=("$1"); shift; done
if (($# < 2)); then
  echo "usage: mpirun_status.sh [mpirun options] -- PROGRAM [ARGS...]" >&2
  exit 2
fi
shift  # the --

dir="$(mktemp -d "${TMPDIR:-/tmp}/weft-mpirun-status.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
export WEFT_MPIRUN_STATUS_DIR="$dir"

# $0 is the program inside sh -c; the rank's world size and status go to files.
"${MPIRUN:-mpirun}" "${mpi_opts[@]}" -x WEFT_MPIRUN_STATUS_DIR \
  sh -c 'r="${OMPI_COMM_WORLD_RANK:-0}"
         echo "${OMPI_COMM_WORLD_SIZE:-1}" >"$WEFT_MPIRUN_STATUS_DIR/size.$r"
         "$0" "$@"; rc=$?
         echo "$rc" >"$WEFT_MPIRUN_STATUS_DIR/rc.$r"
         exit "$rc"' "$@"
mpirun_rc=$?

size=""
for f in "$dir"/size.*; do [[ -e "$f" ]] && size="$(cat "$f")" && break; done
status=0
if [[ -z "$size" ]]; then
  echo "mpirun_status: no rank started (mpirun exited $mpirun_rc)" >&2
  status=1
else
  for ((r = 0; r < size; r++)); do
    if [[ ! -s "$dir/rc.$r" ]]; then
      echo "mpirun_status: rank $r left no exit status (killed with its wrapper, or never started)" >&2
      ((status == 0)) && status=1
      continue
    fi
    rc="$(cat "$dir/rc.$r")"
    if [[ "$rc" != 0 ]]; then
      if ((rc > 128)); then why=" (signal $((rc - 128)))"; else why=""; fi
      echo "mpirun_status: rank $r exited $rc$why" >&2
      ((status == 0)) && status=$rc
    fi
  done
fi
if ((mpirun_rc != 0)); then exit "$mpirun_rc"; fi
exit "$status"

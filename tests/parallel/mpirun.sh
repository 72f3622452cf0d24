#!/usr/bin/env bash
# mpirun.sh: mpirun with what weft's multi-process tests need. Usage like
# mpirun: mpirun.sh [mpirun options] -np N PROGRAM [ARGS...].
#
# - root: --allow-run-as-root; 2-core CI: --oversubscribe --bind-to none.
# - Isolation: Bazel's sandbox runs each test in its own PID namespace, so two
#   concurrent mpiruns have the same PID, hence the same Open MPI job id, and
#   would share the session directory and the shared-memory (vader) segment
#   files in /dev/shm: jobs then corrupt each other (segfaults in
#   mca_btl_vader_poll_handle_frag, PMIx dstore errors, hangs; measured). Each
#   run therefore gets a private temporary directory for both.
set -uo pipefail
tmp="$(mktemp -d /tmp/weft-mpi.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
TMPDIR="$tmp" PMIX_SERVER_TMPDIR="$tmp" mpirun --allow-run-as-root --oversubscribe --bind-to none \
  --mca orte_tmpdir_base "$tmp" --mca btl_vader_backing_directory "$tmp" \
  --mca osc_sm_backing_directory "$tmp" "$@"

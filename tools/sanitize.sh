#!/usr/bin/env bash
# tools/sanitize.sh: runs weft's tests under a sanitizer.
#
#   tools/sanitize.sh asan [TARGETS...]   AddressSanitizer + UndefinedBehaviorSanitizer
#   tools/sanitize.sh tsan [TARGETS...]   ThreadSanitizer
#
# Each sanitizer builds in a Bazel output base of its own
# ($WEFT_SANITIZE_DIR/weft-<asan|tsan>, by default under ~/.cache), so the regular build's
# cache and the bazel-* links of the checkout stay as they are; the first run
# compiles everything once (about half an hour on 2 cores).
#
# asan: out-of-bounds and use-after-free accesses, and undefined behaviour
# (overflow, misaligned or null accesses, bad shifts and casts); the first
# report fails the test. Leak checking is off: Open MPI and the leaked-on-purpose
# per-thread handles would fill the reports. Default targets: every test
# target but the examples' and the multi-host test beds' (tests/parallel/hosts:
# they train the examples for minutes under mpirun, past their time limits
# when instrumented, and add nothing the unit tests do not cover here).
#
# tsan: data races between weft's own threads: ranks played as threads
# (run_ranks, LocalPipe), DataLoader workers, asynchronous checkpoint writers,
# timeouts and watchdogs. It is built without OpenMP (-fno-openmp): libgomp is
# not instrumented, so ThreadSanitizer cannot see its barriers and would
# report the kernels' disjoint writes as races; without it parallel_for runs
# its chunks in order on the calling thread. Default targets: the tests of
# io, train, autograd and parallel that run in one process (mpirun's ranks are
# processes, and Open MPI is not instrumented either).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

kind="${1:-}"
case "$kind" in
  asan | tsan) shift ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan [bazel test targets...]" >&2
    exit 2
    ;;
esac
base="${WEFT_SANITIZE_DIR:-$HOME/.cache}/weft-$kind"

./bazelw --deps-only  # the Debian packages, on first use

targets=("$@")
if ((${#targets[@]} == 0)); then
  if [[ "$kind" == asan ]]; then
    query='tests(//tests/...) except tests(//tests/examples/... + //tests/parallel/hosts/...)'
  else
    query='tests(//tests/io/... + //tests/train/... + //tests/autograd/... + //tests/parallel/...) except attr(tags, "multiprocess|gpu", tests(//tests/...))'
  fi
  mapfile -t targets < <(./bazelw --output_base="$base" query "$query" 2>/dev/null)
  if ((${#targets[@]} == 0)); then
    echo "sanitize: the query for the default targets found none ($query)" >&2
    exit 2
  fi
fi

# --symlink_prefix=/: no bazel-* links, so the checkout's keep pointing at the
# regular build.
exec ./bazelw --output_base="$base" test --config="$kind" --symlink_prefix=/ --keep_going \
  --test_output=errors --test_summary=terse "${targets[@]}"

#!/usr/bin/env bash
# check_layering.sh: checks that Bazel visibility keeps weft's layering
# (docs/ARCHITECTURE.md, "Layers"; the package groups in //:BUILD):
#
#   core <- autograd <- nn <- optim <- parallel <- train,   io <- core,   parallel -> io
#   inside parallel: comm <- data <- pipe <- partition <- hybrid <- checkpoint
#
# For each library package it asks Bazel which targets that package may depend
# on (`bazel query 'visible(...)'`, no build) and fails if any lies in a layer
# the package must not see, or if a dependency the layering allows is not
# visible. It also checks that no library package depends on a higher layer by
# any path (the public //:weft, //:nn, ... targets included), and builds three
# throw-away probe packages to analysis: a user package (not one of weft's)
# that uses the public targets must pass; a package inside //nn that reaches
# //:parallel or //parallel/data:ddp must fail as "not visible".
# Run from anywhere in the checkout: tools/check_layering.sh (it runs Bazel
# queries and analysis, so it is not a `bazel test`; .ci/run runs it).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
q() { ./bazelw query --noshow_progress "$@" 2>/dev/null; }

# package -> package prefixes it may see (besides itself; //third_party/ always).
declare -A allowed=(
  [core]="//core"
  [core/cuda]="//core"
  [autograd]="//core"
  [nn]="//core //autograd"
  [optim]="//core //autograd //nn //optim"
  [optim/cuda]="//core //autograd //nn //optim"
  [io]="//core"
  [parallel/comm]="//core //autograd //nn //optim //io //parallel"
  [parallel/comm/mpi]="//core //autograd //nn //optim //io //parallel"
  [parallel/comm/inproc]="//core //autograd //nn //optim //io //parallel"
  [parallel/comm/nccl]="//core //autograd //nn //optim //io //parallel"
  [parallel/data]="//core //autograd //nn //optim //io //parallel"
  [parallel/checkpoint]="//core //autograd //nn //optim //io //parallel"
  [parallel/hybrid]="//core //autograd //nn //optim //io //parallel"
  [parallel/pipe]="//core //autograd //nn //optim //io //parallel"
  [parallel/partition]="//core //autograd //nn //optim //io //parallel"
  [train]="//core //autograd //nn //optim //io //parallel //train"
)
# package -> targets it must see (the layering's own edges, so the check is not vacuous).
declare -A required=(
  [autograd]="//core:core"
  [nn]="//autograd:autograd //core:core"
  [optim]="//nn:nn //autograd:autograd"
  [io]="//core:core"
  [parallel/comm]="//core:core"
  [parallel/data]="//optim:optim //nn:nn //io:io //core:core //parallel/comm:process_group"
  [parallel/hybrid]="//parallel/pipe:pipe //parallel/data:zero //parallel/partition:balance"
  [parallel/checkpoint]="//parallel/hybrid:distributed_model //parallel/comm:process_group"
  [parallel/pipe]="//core:core //parallel/comm:process_group"
  [parallel/partition]="//core:core //parallel/comm:process_group"
  [train]="//parallel/data:ddp //optim:optim"
)
libraries="//core/... + //autograd/... + //nn/... + //optim/... + //io/... + //parallel/... + //train/..."

fail=0
for pkg in core core/cuda autograd nn optim optim/cuda io parallel/comm parallel/comm/mpi parallel/comm/inproc parallel/comm/nccl \
  parallel/data parallel/pipe parallel/partition parallel/checkpoint parallel/hybrid train; do
  viewer="$(q "kind(rule, //$pkg:*)" | head -n 1)"
  if [[ -z "$viewer" ]]; then echo "check_layering: no rule in //$pkg"; fail=1; continue; fi
  seen="$(q "visible($viewer, kind(rule, $libraries) - //$pkg:*)")"
  for t in $seen; do
    ok=0
    for prefix in ${allowed[$pkg]}; do
      [[ "$t" == "$prefix:"* || "$t" == "$prefix/"* ]] && ok=1
    done
    if ((!ok)); then echo "check_layering: //$pkg can depend on $t (not below it)"; fail=1; fi
  done
  for t in ${required[$pkg]:-}; do
    if ! grep -qx -- "$t" <<<"$seen"; then echo "check_layering: //$pkg cannot depend on $t"; fail=1; fi
  done
  echo "//$pkg sees: $(echo $seen | wc -w) library targets outside itself"
done

# Real dependencies, by any path: a layer's targets may depend only on the layers
# below it (the public targets in //: count as the top of the stack).
public="kind(rule, //:*)"
declare -A higher=(
  [core]="//autograd/... + //nn/... + //optim/... + //io/... + //parallel/... + //train/..."
  [autograd]="//nn/... + //optim/... + //io/... + //parallel/... + //train/..."
  [nn]="//optim/... + //io/... + //parallel/... + //train/..."
  [optim]="//io/... + //parallel/... + //train/..."
  [io]="//autograd/... + //nn/... + //optim/... + //parallel/... + //train/..."
  [parallel]="//train/..."
  # inside parallel: comm <- data <- pipe <- partition <- hybrid <- checkpoint
  [parallel/comm]="//parallel/data/... + //parallel/pipe/... + //parallel/partition/... + //parallel/hybrid/... + //parallel/checkpoint/..."
  [parallel/data]="//parallel/pipe/... + //parallel/partition/... + //parallel/hybrid/... + //parallel/checkpoint/..."
  [parallel/pipe]="//parallel/partition/... + //parallel/hybrid/... + //parallel/checkpoint/..."
  [parallel/partition]="//parallel/hybrid/... + //parallel/checkpoint/..."
  [parallel/hybrid]="//parallel/checkpoint/..."
  [train]=""
)
for layer in core autograd nn optim io parallel parallel/comm parallel/data parallel/pipe parallel/partition parallel/hybrid train; do
  forbidden="$public"
  [[ -n "${higher[$layer]}" ]] && forbidden="$forbidden + ${higher[$layer]}"
  bad="$(q "deps(//$layer/...) intersect ($forbidden)")"
  if [[ -n "$bad" ]]; then
    echo "check_layering: //$layer/... depends on a higher layer: $(echo $bad)"
    fail=1
  fi
done
echo "dependency paths: checked core, autograd, nn, optim, io, parallel (comm, data, pipe, partition, hybrid), train"

# Probes: throw-away packages analysed (not built), then removed.
probes=()
trap 'rm -rf "${probes[@]}"' EXIT
# probe DIR EXPECT DEP...: a cc_library in DIR depending on DEPs; EXPECT is
# "ok" (analysis passes) or "hidden" (fails: a dependency is not visible).
probe() {
  local dir="$1" expect="$2"
  shift 2
  mkdir -p "$dir"
  probes+=("$dir")
  {
    echo "# Temporary package written by tools/check_layering.sh."
    echo "cc_library("
    echo "    name = \"probe\","
    echo "    deps = ["
    for d in "$@"; do echo "        \"$d\","; done
    echo "    ],"
    echo ")"
  } >"$dir/BUILD"
  local out
  out="$(./bazelw build --nobuild --noshow_progress "//$dir:probe" 2>&1)"
  local rc=$?
  if [[ "$expect" == ok && $rc -ne 0 ]]; then
    echo "check_layering: a user package cannot use $*:"
    grep -m 3 "ERROR" <<<"$out"
    fail=1
  elif [[ "$expect" == hidden ]] && ! grep -q "is not visible from target '//$dir:probe'" <<<"$out"; then
    echo "check_layering: //$dir can depend on $* (a library layer reaching a higher one)"
    fail=1
  else
    echo "probe //$dir -> $*: $expect"
  fi
  rm -rf "$dir"
}
probe weft_user_probe_tmp ok //:weft //:core //:autograd //:nn //:optim //:io //:parallel //:train
probe nn/layering_probe_tmp hidden //:parallel
probe nn/layering_probe_tmp hidden //parallel/data:ddp
probe core/layering_probe_tmp hidden //:weft
if ((fail)); then echo "check_layering: FAILED"; exit 1; fi
echo "check_layering: ok"

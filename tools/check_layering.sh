#!/usr/bin/env bash
# check_layering.sh: checks that Bazel visibility keeps weft's layering
# (docs/ARCHITECTURE.md, "Layers"; the package groups in //:BUILD):
#
#   core <- autograd <- nn <- optim <- parallel,   io <- core,   parallel -> io
#
# For each library package it asks Bazel which targets that package may depend
# on (`bazel query 'visible(...)'`, no build) and fails if any lies in a layer
# the package must not see, or if a dependency the layering allows is not
# visible. Run from anywhere in the checkout: tools/check_layering.sh
# (it runs queries, so it is not a `bazel test`; run it after editing BUILD files).
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
  [parallel]="//core //autograd //nn //optim //io //parallel"
  [parallel/pipe]="//core //autograd //nn //optim //io //parallel"
  [parallel/partition]="//core //autograd //nn //optim //io //parallel"
)
# package -> targets it must see (the layering's own edges, so the check is not vacuous).
declare -A required=(
  [autograd]="//core:core"
  [nn]="//autograd:autograd //core:core"
  [optim]="//nn:nn //autograd:autograd"
  [io]="//core:core"
  [parallel]="//optim:optim //nn:nn //io:io //core:core"
  [parallel/pipe]="//core:core //parallel:process_group"
  [parallel/partition]="//core:core //parallel:process_group"
)
libraries="//core/... + //autograd/... + //nn/... + //optim/... + //io/... + //parallel/..."

fail=0
for pkg in core core/cuda autograd nn optim optim/cuda io parallel parallel/pipe parallel/partition; do
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
if ((fail)); then echo "check_layering: FAILED"; exit 1; fi
echo "check_layering: ok"

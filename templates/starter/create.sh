#!/usr/bin/env bash
# create.sh DIR: starts a project of your own on weft in DIR (a new or empty
# directory): copies this starter there (WORKSPACE, .bazelrc, BUILD, train.cc,
# README.md) with WORKSPACE pointing at this weft checkout. Then:
#   cd DIR && bazel run //:train
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: create.sh DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
weft="$(cd "$here/../.." && pwd)"
dir="$1"
if [[ -e "$dir" && -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
  echo "create.sh: $dir exists and is not empty; give a new or empty directory" >&2
  exit 1
fi
mkdir -p "$dir"
cp "$here/.bazelrc" "$here/BUILD" "$here/train.cc" "$here/README.md" "$dir/"
sed "s|path = \"../weft\"|path = \"$weft\"|" "$here/WORKSPACE" >"$dir/WORKSPACE"
echo "create.sh: a weft project in $dir (weft at $weft). Next:"
echo "  cd $dir && bazel run //:train"

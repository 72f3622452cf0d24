#!/usr/bin/env bash
# Rewrites the body of every ```cpp NN_name.cc block in docs/guide/*.md with
# the current contents of docs/guide/NN_name.cc (what guide_markdown_test
# checks). Run from anywhere: docs/guide/update_markdown.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for md in "$here"/*.md; do
  awk -v dir="$here" '
    !inside && /^```cpp[ \t]+[^ \t]+\.cc[ \t]*$/ {
      print; inside = 1; split($0, w, /[ \t]+/); file = dir "/" w[2]
      while ((getline l < file) > 0) print l
      close(file); next
    }
    inside && /^```[ \t]*$/ { inside = 0; print; next }
    inside { next }
    { print }
  ' "$md" > "$md.tmp"
  mv "$md.tmp" "$md"
done

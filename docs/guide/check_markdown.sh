#!/usr/bin/env bash
# Keeps the documentation honest:
# 1. Every ```cpp block of a guide chapter (docs/guide/*.md) opens with the
#    name of a program of the guide (```cpp 03_training.cc) and holds exactly
#    that file's bytes; every program of the guide is shown exactly once.
# 2. Every relative link of README.md, docs/*.md and docs/guide/*.md (outside
#    code) points at a file or directory that exists: among the test's inputs,
#    or in the source tree the inputs come from (found through README.md's
#    runfiles link), for links to other parts of the repository. A link's
#    #fragment must be the anchor of a heading of the Markdown page it names.
# 3. Those pages keep Markdown's shape outside code (what a C++ formatter run
#    over a page breaks): headings start at the line's first column with a
#    space after the #s, and no link target holds a space.
# Usage: check_markdown.sh  (run by Bazel from the runfiles root)
set -uo pipefail
ws="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-weft}"
[ -d "$ws/docs/guide" ] || ws="."
tmp="${TEST_TMPDIR:-$(mktemp -d)}/check_markdown"
rm -rf "$tmp" && mkdir -p "$tmp/blocks"
src_root="$(dirname "$(readlink -f "$ws/README.md")")"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# 1. Code blocks against the program files.
for md in "$ws"/docs/guide/*.md; do
  rel="docs/guide/$(basename "$md")"
  # Writes each tagged block to $tmp/blocks/<name>.<n>; prints one line per block: "<line> <name>".
  awk -v out="$tmp/blocks" -v rel="$rel" '
    !inside && /^```/ {
      inside = 1; lang = $0; sub(/^```/, "", lang); split(lang, w, /[ \t]+/)
      if (w[1] == "cpp") {
        name = w[2]; n[name]++; file = out "/" (name == "" ? "UNTAGGED" : name) "." n[name]
        printf "" > file; print NR, (name == "" ? "-" : name)
      } else file = ""
      next
    }
    inside && /^```[ \t]*$/ { inside = 0; if (file != "") close(file); file = ""; next }
    inside && file != "" { print > file }
  ' "$md" > "$tmp/list" || fail "$rel: cannot read"
  while read -r line name; do
    if [ "$name" = "-" ]; then fail "$rel:$line: a \`\`\`cpp block without a program name (\`\`\`cpp NN_name.cc)"; continue; fi
    if [ ! -f "$ws/docs/guide/$name" ]; then fail "$rel:$line: no program docs/guide/$name"; continue; fi
    echo "$rel" >> "$tmp/shown.$name"
  done < "$tmp/list"
done
for cc in "$ws"/docs/guide/*.cc; do
  name="$(basename "$cc")"
  count=$(ls "$tmp/blocks/$name".* 2>/dev/null | wc -l)
  if [ "$count" -eq 0 ]; then fail "docs/guide/$name is shown in no chapter (docs/guide/*.md)"; continue; fi
  if [ "$count" -gt 1 ]; then fail "docs/guide/$name is shown $count times ($(sort -u "$tmp/shown.$name" | tr '\n' ' '))"; fi
  for block in "$tmp/blocks/$name".*; do
    if ! cmp -s "$block" "$cc"; then
      fail "the block of $name in $(sort -u "$tmp/shown.$name" | tr '\n' ' ')differs from docs/guide/$name (docs/guide/update_markdown.sh copies the files in):"
      diff "$cc" "$block" | head -20
    fi
  done
done

# 2. Relative links.
# The anchors of a page's headings, as GitHub makes them: lower case, spaces
# to hyphens, punctuation other than '-' and '_' dropped.
anchors() {
  awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
    tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}
pages=("$ws/README.md" "$ws"/docs/*.md "$ws"/docs/guide/*.md)
for md in "${pages[@]}"; do
  rel="${md#"$ws"/}"
  dir="$(dirname "$rel")"
  awk '
    /^```/ { code = !code; next }
    code { next }
    {
      line = $0; gsub(/`[^`]*`/, "", line)
      while (match(line, /\]\([^) \t]+\)/)) {
        print NR, substr(line, RSTART + 2, RLENGTH - 3); line = substr(line, RSTART + RLENGTH)
      }
    }
  ' "$md" > "$tmp/links"
  while read -r line target; do
    case "$target" in http://* | https://* | mailto:*) continue ;; esac
    path="${target%%#*}"
    resolved="$dir/$path"
    [ -n "$path" ] || resolved="$rel"
    if [ -e "$ws/$resolved" ]; then
      file="$ws/$resolved"
    elif [ -e "$src_root/$resolved" ]; then
      file="$src_root/$resolved"
    else
      fail "$rel:$line: link to '$target': no such file ($resolved)"
      continue
    fi
    # A fragment must name a heading of the page (GitHub's anchors).
    if [ "$target" != "$path" ] && [[ "$file" == *.md ]]; then
      anchor="${target#*#}"
      if ! anchors "$file" | grep -qxF -- "$anchor"; then
        fail "$rel:$line: link to '$target': $resolved has no heading with the anchor '#$anchor'"
      fi
    fi
  done < "$tmp/links"
done

# 3. Markdown's shape.
for md in "${pages[@]}"; do
  rel="${md#"$ws"/}"
  awk -v rel="$rel" '
    /^```/ { code = !code; next }
    code { next }
    /^#+[^# ]/ { print rel ":" NR ": a heading without a space after its #s: " $0 }
    /^[ \t]+#+ / { print rel ":" NR ": an indented heading (Markdown does not read it as one): " $0 }
    {
      line = $0; gsub(/`[^`]*`/, "", line)
      if (match(line, /\]\([^)]* [^)]*\)/)) print rel ":" NR ": a link target with a space: " substr(line, RSTART, RLENGTH)
    }
  ' "$md" > "$tmp/shape"
  while read -r problem; do fail "$problem"; done < "$tmp/shape"
done

shown=$(ls "$tmp/blocks" | wc -l)
echo "checked $shown program blocks and the links of ${#pages[@]} pages: $failures failure(s)"
[ "$failures" -eq 0 ]

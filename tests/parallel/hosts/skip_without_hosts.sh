# Sourced by the multi-host tests: skip_without_hosts NAME NETNS_HOSTS TMP
# tries tools/hosts/netns_hosts.sh (namespaces, bridge, veth and a tbf-shaped
# link); where the machine cannot make hosts (its exit status 77) it prints
# "SKIPPED: <why>", writes a test XML with one skipped case NAME (counted as
# skipped, not passed) to $XML_OUTPUT_FILE when Bazel set it, and exits 0.
# Call it before unsetting XML_OUTPUT_FILE.
skip_without_hosts() {
  local name="$1" hosts_sh="$2" tmp="$3" xml="${XML_OUTPUT_FILE:-}" why
  "$hosts_sh" 1 1 100mbit -- true 2> "$tmp/probe.err"
  [ $? -eq 77 ] || return 0
  why="$(head -n 1 "$tmp/probe.err" | sed 's/[<>&"]/_/g')"
  echo "SKIPPED: $why"
  [ -n "$xml" ] && printf '<?xml version="1.0"?>\n<testsuites><testsuite name="%s" tests="1" skipped="1">%s</testsuite></testsuites>\n' \
    "$name" "<testcase name=\"$name\" status=\"notrun\"><skipped message=\"$why\"/></testcase>" > "$xml"
  exit 0
}

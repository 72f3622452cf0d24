#!/usr/bin/env bash
# netns_hosts.sh: several "hosts" on one machine, for multi-host runs and
# tests. Each host is a network namespace with its own address on a private
# subnet (10.77.0.0/24, host k at 10.77.0.(k+1)), all joined by veth links to
# a bridge in a switch namespace of their own; the machine's own interfaces
# and addresses are untouched. With a RATE the links are shaped with tbf
# (both directions of every host's link), the way a slow network between
# machines would be.
#
#   netns_hosts.sh HOSTS SLOTS RATE -- COMMAND [ARGS...]
#
# runs COMMAND inside host 0 (mpirun then treats host 0 as its own node and
# reaches the others through an rsh agent that enters their namespaces),
# with these in its environment:
#   WEFT_HOSTFILE      a hostfile: each host's address with SLOTS slots
#   WEFT_MPIRUN_HOSTS  mpirun options for the hosts: --hostfile, the rsh
#                      agent, and both TCP between ranks and Open MPI's own
#                      channel kept on the subnet (ranks of one host use
#                      shared memory, ranks of two hosts TCP)
#   WEFT_MPIRUN_AGENT  the same without --hostfile (for a launcher that
#                      writes its own, tools/weftrun.py --hostfile)
#   WEFT_LOSE_HOST     a command, "$WEFT_LOSE_HOST ADDRESS", that makes that
#                      host fail as a machine does: its link goes down
#                      (nothing reaches it or leaves it any more) and every
#                      process in it is killed (SIGKILL)
# Every host also has a UTS namespace of its own, its hostname its namespace's
# name (w<pid>h<k>): Open MPI names shared-memory segments and tells nodes
# apart by hostname, so hosts sharing the machine's would collide.
# and removes everything it made when COMMAND ends (or fails, or is
# interrupted). RATE is tc's syntax (100mbit, 1gbit) or 0 for unshaped
# links. Exit status: COMMAND's; 77 with "netns_hosts: cannot ..." on
# stderr where the hosts cannot be made (not root, no ip or tc, a sandbox
# without the capability, no bridge, veth or tbf in the kernel): callers
# skip then. A bad rate is such a failure too (tc refuses it).
set -uo pipefail
if [ $# -lt 5 ] || [ "$4" != "--" ]; then
  echo "usage: netns_hosts.sh HOSTS SLOTS RATE -- COMMAND [ARGS...]" >&2
  exit 2
fi
hosts="$1" slots="$2" rate="$3"
shift 4
[[ "$hosts" =~ ^[1-9][0-9]?$ ]] && [ "$hosts" -le 200 ] || { echo "netns_hosts: HOSTS must be 1..200 (got $hosts)" >&2; exit 2; }
[[ "$slots" =~ ^[1-9][0-9]*$ ]] || { echo "netns_hosts: SLOTS must be a positive integer (got $slots)" >&2; exit 2; }
command -v ip > /dev/null || { echo "netns_hosts: cannot make hosts: no 'ip' command (iproute2)" >&2; exit 77; }
[ "$rate" = 0 ] || command -v tc > /dev/null || { echo "netns_hosts: cannot shape links: no 'tc' command" >&2; exit 77; }

id="w$$"                          # names unique to this run (interface names have 15 characters at most)
sw="${id}sw"
state="$(mktemp -d /tmp/weft-hosts.XXXXXX)"
made=()
cleanup() {
  for ns in "${made[@]}"; do ip netns del "$ns" 2> /dev/null; done
  rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every step of the setup: on failure the machine cannot make hosts (exit 77, the reason on stderr).
need() {  # WHAT COMMAND...
  local what="$1"; shift
  "$@" 2> "$state/err" || { echo "netns_hosts: cannot $what here: $(head -n 1 "$state/err")" >&2; exit 77; }
}
need "make network namespaces" ip netns add "$sw"
made+=("$sw")
need "make UTS namespaces (unshare --uts)" ip netns exec "$sw" unshare --uts true
need "make a bridge" ip netns exec "$sw" ip link add br0 type bridge
need "bring up a bridge" ip netns exec "$sw" ip link set br0 up
: > "$state/hostfile"
for ((k = 0; k < hosts; k++)); do
  ns="${id}h$k" addr="10.77.0.$((k + 1))"
  need "make network namespaces" ip netns add "$ns"
  made+=("$ns")
  need "make veth links" ip link add "${id}v$k" type veth peer name "${id}b$k"
  need "move links into namespaces" ip link set "${id}v$k" netns "$ns"
  need "move links into namespaces" ip link set "${id}b$k" netns "$sw"
  need "attach links to a bridge" ip netns exec "$sw" ip link set "${id}b$k" master br0
  need "bring up links" ip netns exec "$sw" ip link set "${id}b$k" up
  need "assign addresses" ip netns exec "$ns" ip addr add "$addr/24" dev "${id}v$k"
  need "bring up links" ip netns exec "$ns" ip link set "${id}v$k" up
  need "bring up loopback" ip netns exec "$ns" ip link set lo up
  if [ "$rate" != 0 ]; then  # both directions: the host's egress and the switch port's
    need "shape links with tbf" ip netns exec "$ns" tc qdisc add dev "${id}v$k" root tbf rate "$rate" burst 256kb latency 50ms
    need "shape links with tbf" ip netns exec "$sw" tc qdisc add dev "${id}b$k" root tbf rate "$rate" burst 256kb latency 50ms
  fi
  echo "$addr slots=$slots" >> "$state/hostfile"
  echo "$addr $ns" >> "$state/map"
done
# The rsh agent: "agent ADDRESS COMMAND..." runs COMMAND in that host's namespace.
cat > "$state/agent" <<AGENT
#!/usr/bin/env bash
host="\$1"; shift
while [ "\${host#-}" != "\$host" ]; do host="\$1"; shift; done  # ssh-style options mpirun may pass
ns=\$(awk -v h="\$host" '\$1 == h { print \$2 }' "$state/map")
[ -n "\$ns" ] || { echo "netns_hosts: no host \$host" >&2; exit 1; }
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns && \$*"
AGENT
chmod +x "$state/agent"
cat > "$state/lose" <<LOSE
#!/usr/bin/env bash
ns=\$(awk -v h="\$1" '\$1 == h { print \$2 }' "$state/map")
[ -n "\$ns" ] || { echo "netns_hosts: no host \$1" >&2; exit 1; }
k=\${ns##*h}
ip netns exec "$sw" ip link set "${id}b\$k" down
for p in \$(ip netns pids "\$ns"); do kill -KILL "\$p" 2> /dev/null; done
exit 0
LOSE
chmod +x "$state/lose"
export WEFT_HOSTFILE="$state/hostfile"
export WEFT_MPIRUN_AGENT="--mca plm_rsh_agent $state/agent \
--mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24"
export WEFT_MPIRUN_HOSTS="--hostfile $state/hostfile $WEFT_MPIRUN_AGENT"
export WEFT_LOSE_HOST="$state/lose"
ip netns exec "${id}h0" unshare --uts sh -c 'hostname "$0" && exec "$@"' "${id}h0" "$@"

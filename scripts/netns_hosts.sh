#!/usr/bin/env bash
# Two hosts on this machine as Linux network namespaces, for real multi-host Open MPI runs.
#
#   scripts/netns_hosts.sh [--np-per-host N] [--rate RATE] -- command...
#
# Creates namespaces pmA<pid> and pmB<pid> joined by one veth pair (10.77.0.1/24 in A,
# 10.77.0.2/24 in B; no address anywhere else, no link into the root namespace). Each namespace
# also gets its own UTS namespace with the host name equal to its namespace name, and an
# /etc/netns/<name>/hosts that `ip netns exec` binds over /etc/hosts, so both hosts resolve each
# other. The command runs inside host A with these variables set:
#   PM_NETNS_MPIRUN   mpirun plus the options that make it a 2-host TCP job:
#                     --host A:N,B:N, the rsh agent (netns_agent.sh: starts Open MPI's remote daemon
#                     inside host B with `ip netns exec`, where ssh would log in), the TCP and self
#                     transports only (no shared memory, not even within a host), and the TCP
#                     interfaces restricted to 10.77.0.0/24 for both the MPI traffic and the
#                     daemons' out-of-band channel.
#   PM_NETNS_A, PM_NETNS_B  the two host (= namespace) names; PM_NETNS_LINK_B the veth in B.
#   PM_NETNS_WHERE    a wrapper that prints "rank R on host H (netns net:[inode])" and execs its
#                     arguments: put it between mpirun and the binary to show each rank's host.
# --rate RATE   limits host A's end of the link with `tc qdisc ... tbf rate RATE` (e.g. 8gbit).
#               Host B's end is limited the same way, so both directions are shaped.
# A partition is the command's to make: `ip -n "$PM_NETNS_B" link set "$PM_NETNS_LINK_B" down`.
# Everything (namespaces, links, /etc/netns entries) is removed on exit, also on failure or a
# signal. Exit status: the command's; 77 (skipped) with the reason printed when this machine does
# not allow network namespaces (not root, no `ip`, or `ip netns add` refused).
set -u
np_per_host=4 rate=""
while [[ $# -gt 0 && "$1" != "--" ]]; do
  case "$1" in
    --np-per-host) np_per_host="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    *) echo "netns_hosts: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] && shift
if [[ $# -eq 0 ]]; then
  echo "netns_hosts: no command (usage: netns_hosts.sh [options] -- command...)" >&2
  exit 2
fi
if ! [[ "$np_per_host" =~ ^[1-9][0-9]*$ ]]; then
  echo "netns_hosts: --np-per-host must be a positive integer (got '$np_per_host')" >&2
  exit 2
fi

readonly kSkip=77
skip() { echo "netns_hosts: SKIP: $*"; exit "$kSkip"; }
[[ $(id -u) -eq 0 ]] || skip "network namespaces need root (uid is $(id -u))"
command -v ip >/dev/null || skip "iproute2's ip is not installed"
command -v mpirun >/dev/null || skip "mpirun is not installed"

here=$(cd "$(dirname "$0")" && pwd)
host_a="pmA$$" host_b="pmB$$"
link_a="pmva$$" link_b="pmvb$$"
cleanup() {
  # Whatever still runs in the hosts (a daemon cut off from mpirun) is this run's: end it first,
  # or it would keep the namespace and the caller's output pipe alive.
  local ns pid
  for ns in "$host_a" "$host_b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  ip netns del "$host_a" 2>/dev/null
  ip netns del "$host_b" 2>/dev/null  # deleting a namespace deletes the veth end inside it
  rm -rf "/etc/netns/$host_a" "/etc/netns/$host_b"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! err=$(ip netns add "$host_a" 2>&1); then skip "ip netns add refused: $err"; fi
ip netns add "$host_b" || exit 1
ip link add "$link_a" netns "$host_a" type veth peer name "$link_b" netns "$host_b" || exit 1
ip -n "$host_a" addr add 10.77.0.1/24 dev "$link_a"
ip -n "$host_b" addr add 10.77.0.2/24 dev "$link_b"
for ns_link in "$host_a:$link_a" "$host_b:$link_b"; do
  ns=${ns_link%%:*} link=${ns_link#*:}
  ip -n "$ns" link set lo up && ip -n "$ns" link set "$link" up || exit 1
  # A host's TCP gives up on a silent peer after 4 retransmissions (a few seconds; Linux's default
  # of 15 takes about 15 minutes), so after a partition mpirun learns that a daemon is gone.
  ip netns exec "$ns" sh -c 'echo 4 > /proc/sys/net/ipv4/tcp_retries2' || exit 1
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n10.77.0.1 %s\n10.77.0.2 %s\n' "$host_a" "$host_b" \
    > "/etc/netns/$ns/hosts"
  if [[ -n "$rate" ]]; then
    tc -n "$ns" qdisc add dev "$link" root tbf rate "$rate" burst 1mb latency 100ms || exit 1
  fi
done
echo "netns_hosts: hosts $host_a (10.77.0.1, $link_a) and $host_b (10.77.0.2, $link_b)${rate:+;}" \
  "${rate:+link limited to $rate by tbf}"
# netem needs the sch_netem module; say whether this kernel has it (delay/loss faults need it).
if tc -n "$host_a" qdisc add dev lo root netem delay 1ms 2>/dev/null; then
  tc -n "$host_a" qdisc del dev lo root
  echo "netns_hosts: sch_netem available (delay/loss can be injected)"
else
  echo "netns_hosts: sch_netem missing in kernel $(uname -r): no delay/loss injection, tbf only"
fi

export PM_NETNS_A="$host_a" PM_NETNS_B="$host_b" PM_NETNS_LINK_B="$link_b"
export PM_NETNS_WHERE="$here/netns_where.sh"
export PM_NETNS_MPIRUN="mpirun --allow-run-as-root --oversubscribe \
--host $host_a:$np_per_host,$host_b:$np_per_host \
--mca plm_rsh_agent $here/netns_agent.sh \
--mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
--mca oob_tcp_keepalive_time 20 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3"

# In the background, so that a TERM (from `timeout`, ctest) runs the clean-up at once: bash runs
# traps only between foreground commands, but interrupts `wait`.
ip netns exec "$host_a" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host_a" "$@" &
wait $!
rc=$?
# What crossed the link (both directions), from host A's end.
stats="/sys/class/net/$link_a/statistics"
read -r rx tx < <(ip netns exec "$host_a" cat "$stats/rx_bytes" "$stats/tx_bytes" | tr '\n' ' ')
echo "netns_hosts: the link carried $tx bytes $host_a -> $host_b and $rx bytes back"
exit "$rc"

#!/usr/bin/env bash
# Open MPI's rsh agent for netns_hosts.sh: where ssh would log in to HOST and run the daemon's
# command line through a shell, this runs it through a shell inside the network namespace named
# HOST (`ip netns exec`), in its own UTS namespace whose host name is HOST.
# Usage (by mpirun, via --mca plm_rsh_agent): netns_agent.sh HOST command words...
set -u
host="$1"; shift
if ! ip netns list | grep -qw -- "$host"; then
  echo "netns_agent: no network namespace named '$host'" >&2
  exit 1
fi
# Like ssh: the words form one command line for the remote shell.
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"

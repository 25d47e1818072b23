#!/usr/bin/env bash
# A real Slurm cluster on this one machine: a private munged, slurmctld and N slurmd "nodes"
# (Debian 12's slurm-wlm 22.05; docs/multihost.md, "Slurm").
#
#   scripts/slurm_cluster.sh start  [--dir DIR] [--nodes N] [--gpus-per-node G] [--port-base P]
#   scripts/slurm_cluster.sh status [--dir DIR]
#   scripts/slurm_cluster.sh stop   [--dir DIR]
#   scripts/slurm_cluster.sh stepds [--dir DIR]
#
# start writes DIR/slurm.conf (nodes pm1..pmN: NodeName aliases, all NodeHostname=localhost and
# NodeAddr=127.0.0.1, each slurmd on its own port and started with `-N pmK`; every node gets the
# CPUs `slurmd -C` reports; proctrack/linuxproc, task/none, select/cons_tres, no cgroups, no
# accounting), starts munged on its own socket and key under DIR (a munged that already serves
# that socket is reused, not restarted), then slurmctld and the slurmds, and waits (bounded) until
# `sinfo` shows every node idle. It prints `export SLURM_CONF=DIR/slurm.conf`: the client commands
# (sinfo, srun, sbatch, scontrol) find this cluster through that variable.
# stop cancels the cluster's jobs, then ends exactly the processes start recorded (DIR/*.pid,
# each checked to still be the program it names) and any slurmstepd of this cluster left behind;
# logs stay in DIR/log. status prints the daemons and `sinfo`; exit 1 if not up. stepds prints
# the cluster's slurmstepd processes ("pid slurmstepd: [job.step]", or "pid exiting"): a requeued
# job is released once its previous run's are gone.
# --gpus-per-node G gives every node G GPUs with no device behind them (GresTypes=gpu, `Gres=gpu:G`,
# gres.conf `File=DIR/dev/gpu[0-G-1]`, links to /dev/null: Slurm drops a GPU without a device), so jobs that
# ask `--gpus-per-node` are scheduled as on a GPU cluster. DIR defaults to $PM_SLURM_DIR, else /tmp/pentamesh-slurm.
# Exit status: 0; 2 for bad arguments; 77 (skipped) with "slurm_cluster: SKIP: <reason>" when
# the cluster cannot run here (not root, packages missing, a daemon that does not start).
set -u
readonly kSkip=77
readonly nl=$'\n'
readonly kWaitS=40  # for the nodes to show idle, and for daemons to exit
usage() { echo "usage: slurm_cluster.sh start|stop|status|stepds [--dir DIR] [--nodes N] [--gpus-per-node G] [--port-base P]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
action=$1; shift
dir=${PM_SLURM_DIR:-/tmp/pentamesh-slurm} nodes=2 port_base="" gpus=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --port-base) port_base="$2"; shift 2 ;;
    --gpus-per-node) gpus="$2"; shift 2 ;;
    *) echo "slurm_cluster: unknown option '$1'" >&2; usage ;;
  esac
done
case "$action" in start | stop | status | stepds) ;; *) echo "slurm_cluster: unknown action '$action'" >&2; usage ;; esac
if ! [[ "$nodes" =~ ^[1-9][0-9]*$ ]] || [[ $nodes -gt 16 ]]; then
  echo "slurm_cluster: --nodes must be an integer in [1, 16] (got '$nodes')" >&2
  exit 2
fi
if ! [[ "$gpus" =~ ^[0-9]+$ ]] || [[ $gpus -gt 64 ]]; then
  echo "slurm_cluster: --gpus-per-node must be an integer in [0, 64] (got '$gpus')" >&2
  exit 2
fi
if [[ -n "$port_base" ]] && ! { [[ "$port_base" =~ ^[1-9][0-9]*$ ]] && [[ $port_base -ge 1024 && $port_base -le 65000 ]]; }; then
  echo "slurm_cluster: --port-base must be an integer in [1024, 65000] (got '$port_base')" >&2
  exit 2
fi
dir=$(realpath -m "$dir")
if [[ "$action" != start && ! -f "$dir/slurm.conf" ]]; then
  echo "slurm_cluster: no cluster in $dir"
  [[ "$action" == stop ]] && exit 0
  exit 1
fi
conf=$dir/slurm.conf
export SLURM_CONF=$conf
skip() { echo "slurm_cluster: SKIP: $*"; exit "$kSkip"; }

# The pid recorded in DIR/NAME.pid if that process is still the program it was started as.
live_pid() {
  local name=$1 prog=$2 pid
  pid=$(cat "$dir/$name.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == *"$prog"* ]] || return 1
  echo "$pid"
}
# Ends the process recorded as NAME (TERM, then KILL after kWaitS/4 s) and removes its pid file.
end_daemon() {
  local name=$1 prog=$2 pid i
  if pid=$(live_pid "$name" "$prog"); then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < kWaitS * 10 / 4; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    echo "slurm_cluster: stopped $name (pid $pid)"
  fi
  rm -f "$dir/$name.pid"
}
# slurmstepd processes of this cluster, one "pid title" a line (title: `slurmstepd: [job.step]`):
# the slurmds run with SLURM_CONF=DIR/slurm.conf, which every slurmstepd they start inherits. A
# slurmstepd that is exiting no longer shows its environment: it is listed as "pid exiting", as
# it may be this cluster's, until it is a zombie (finished, waiting to be reaped).
stepds() {
  local pid env
  for pid in $(pgrep -x slurmstepd); do
    if ! env=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ") || [[ -z "$env" ]]; then
      # A zombie (state Z) has finished; anything else is still tearing down.
      [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" =~ ^[^Z]$ ]] && echo "$pid exiting"
      continue
    fi
    grep -qx "SLURM_CONF=$conf" <<<"$env" || continue
    echo "$pid $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")"
  done
}
nodes_in_conf() { sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$conf" 2>/dev/null; }

stop() {
  local jobs i pid
  if live_pid slurmctld slurmctld >/dev/null; then
    jobs=$(squeue -h -o %i 2>/dev/null)
    if [[ -n "$jobs" ]]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null
      for ((i = 0; i < kWaitS * 10; i++)); do
        [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break
        sleep 0.1
      done
      echo "slurm_cluster: cancelled jobs ${jobs//$'\n'/ }"
    fi
  fi
  for pid in $(stepds | grep -v " exiting$" | cut -d' ' -f1); do
    kill -KILL "$pid" 2>/dev/null && echo "slurm_cluster: killed slurmstepd $pid (left by a job)"
  done
  for node in $(nodes_in_conf); do end_daemon "slurmd-$node" slurmd; done
  end_daemon slurmctld slurmctld
  end_daemon munged munged
  echo "slurm_cluster: stopped; logs in $dir/log"
}

status() {
  local up=0 node pid
  for name in munged:munged slurmctld:slurmctld $(for node in $(nodes_in_conf); do echo "slurmd-$node:slurmd"; done); do
    if pid=$(live_pid "${name%%:*}" "${name#*:}"); then
      echo "slurm_cluster: ${name%%:*} running (pid $pid)"
    else
      echo "slurm_cluster: ${name%%:*} not running"
      up=1
    fi
  done
  [[ -f "$conf" ]] || { echo "slurm_cluster: no cluster in $dir"; return 1; }
  echo "export SLURM_CONF=$conf"
  sinfo -N -o "%N %T %c %P" 2>&1 || up=1
  return "$up"
}

# A port base with ports P .. P+N all free on this machine (no TCP listener in /proc/net/tcp*).
free_port_base() {
  local listening p i ok
  listening=$(awk 'NR > 1 && $4 == "0A" { split($2, a, ":"); print strtonum("0x" a[2]) }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u)
  for ((i = 0; i < 50; i++)); do
    p=$((20000 + (RANDOM % 2000) * 10))
    ok=1
    for ((k = 0; k <= nodes; k++)); do grep -qx "$((p + k))" <<<"$listening" && ok=0; done
    [[ $ok -eq 1 ]] && { echo "$p"; return 0; }
  done
  return 1
}

# Why the daemon NAME did not come up: its log's last lines.
log_tail() { tail -n 5 "$dir/log/$1.log" 2>/dev/null | sed 's/^/    /'; }
fail_start() {
  echo "slurm_cluster: SKIP: $*"
  stop >/dev/null 2>&1
  exit "$kSkip"
}

start() {
  [[ $(id -u) -eq 0 ]] || skip "the daemons run as root here (SlurmUser=root); uid is $(id -u)"
  local prog
  for prog in munged slurmctld slurmd sinfo srun sbatch scontrol squeue scancel; do
    command -v "$prog" >/dev/null || skip "$prog is not installed (scripts/setup.sh installs slurm-wlm and munge)"
  done
  if live_pid slurmctld slurmctld >/dev/null; then
    echo "slurm_cluster: a cluster already runs in $dir (stop it first)" >&2
    exit 2
  fi
  mkdir -p "$dir/log" "$dir/state" "$dir/munge" 2>/dev/null ||
    { echo "slurm_cluster: --dir: cannot create directories in '$dir'" >&2; exit 2; }
  [[ -n "$port_base" ]] || port_base=$(free_port_base) || skip "no free TCP ports for the daemons"
  for ((k = 1; k <= nodes; k++)); do mkdir -p "$dir/spool/pm$k" "$dir/tmp/pm$k"; done
  chmod 700 "$dir/munge"

  # munged: its own key and socket, so nothing outside DIR is used or changed.
  local sock=$dir/munge/munge.socket
  if ! munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then
    [[ -f "$dir/munge/munge.key" ]] || mungekey --create --keyfile="$dir/munge/munge.key" 2>/dev/null ||
      fail_start "mungekey could not create a key in $dir/munge"
    chmod 600 "$dir/munge/munge.key"
    munged --foreground --force --socket="$sock" --key-file="$dir/munge/munge.key" \
      --pid-file="$dir/munge/munged.pidfile" --seed-file="$dir/munge/munged.seed" \
      --log-file="$dir/log/munged.log" </dev/null >>"$dir/log/munged.log" 2>&1 &
    echo $! >"$dir/munged.pid"
    for ((i = 0; i < 50; i++)); do
      munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break
      sleep 0.1
    done
    munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 ||
      fail_start "munged did not start:${nl}$(log_tail munged)"
  fi

  # The node shape slurmd detects (CPUs, boards, sockets, cores, threads); every node gets it,
  # so the nodes together claim N times this machine's CPUs (they share the same cores).
  local shape
  shape=$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' |
    grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')
  [[ "$shape" == *CPUs=* ]] || fail_start "slurmd -C printed no CPU count"
  # Each node's tasks get their own TMPDIR and Open MPI shared-memory directory, as separate
  # machines would: the nodes share this host's /dev/shm and host name, so Open MPI's segment
  # names (host, job, local rank) would otherwise collide between nodes and its ranks crash.
  cat >"$dir/task_prolog.sh" <<PROLOG
#!/bin/sh
# Run by slurmstepd before each task (scripts/slurm_cluster.sh): node-local temporary directories.
echo "export TMPDIR=$dir/tmp/\$SLURMD_NODENAME"
echo "export OMPI_MCA_btl_vader_backing_directory=$dir/tmp/\$SLURMD_NODENAME"
PROLOG
  chmod 755 "$dir/task_prolog.sh"
  local host
  host=$(hostname -s)
  {
    echo "# Written by scripts/slurm_cluster.sh: $nodes slurmd nodes on this one host."
    echo "ClusterName=pentamesh"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$port_base"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$sock"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "TmpFS=$dir/tmp/%n"
    echo "TaskProlog=$dir/task_prolog.sh"
    echo "SlurmctldPidFile=$dir/state/slurmctld.pidfile"
    echo "SlurmdPidFile=$dir/spool/%n/slurmd.pidfile"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "SchedulerType=sched/backfill"
    echo "ReturnToService=2"
    echo "SlurmdTimeout=60"
    echo "KillWait=5"
    echo "MinJobAge=600"
    echo "JobRequeue=1"
    local gres=""
    if [[ $gpus -gt 0 ]]; then
      echo "GresTypes=gpu"
      gres="Gres=gpu:$gpus "
    fi
    for ((k = 1; k <= nodes; k++)); do
      echo "NodeName=pm$k NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port_base + k)) ${shape}${gres}State=UNKNOWN"
    done
    echo "PartitionName=pm Nodes=pm[1-$nodes] Default=YES MaxTime=INFINITE State=UP"
  } >"$conf"
  rm -f "$dir/gres.conf"
  if [[ $gpus -gt 0 ]]; then
    # Slurm drops a GPU without a character device: each is a link to /dev/null under DIR/dev.
    mkdir -p "$dir/dev"
    for ((g = 0; g < gpus; g++)); do ln -sfn /dev/null "$dir/dev/gpu$g"; done
    printf "AutoDetect=off\nName=gpu File=%s/dev/gpu[0-%d]\n" "$dir" "$((gpus - 1))" >"$dir/gres.conf"
  fi

  slurmctld -D -c -f "$conf" </dev/null >>"$dir/log/slurmctld.log" 2>&1 &
  echo $! >"$dir/slurmctld.pid"
  for ((k = 1; k <= nodes; k++)); do
    slurmd -D -N "pm$k" -f "$conf" </dev/null >>"$dir/log/slurmd-pm$k.log" 2>&1 &
    echo $! >"$dir/slurmd-pm$k.pid"
  done
  local idle=0 states
  for ((i = 0; i < kWaitS * 5; i++)); do
    for name in slurmctld $(for ((k = 1; k <= nodes; k++)); do echo "slurmd-pm$k"; done); do
      live_pid "$name" "${name%%-*}" >/dev/null ||
        fail_start "$name exited at start:${nl}$(log_tail "$name")"
    done
    states=$(sinfo -h -N -o "%N %T" 2>/dev/null)
    idle=$(grep -c " idle$" <<<"$states")
    [[ $idle -eq $nodes ]] && break
    sleep 0.2
  done
  [[ $idle -eq $nodes ]] ||
    fail_start "the nodes were not idle after $kWaitS s (sinfo: ${states//$'\n'/, }):${nl}$(log_tail slurmctld)"
  echo "slurm_cluster: munged, slurmctld (port $port_base) and $nodes slurmd nodes" \
    "(pm1..pm$nodes, ports $((port_base + 1))..$((port_base + nodes)); $shape) in $dir"
  sinfo -N -o "%N %T %c %P"
  echo "export SLURM_CONF=$conf"
}

case "$action" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  stepds) stepds ;;
esac

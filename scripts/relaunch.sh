#!/usr/bin/env bash
# Reruns a failed job up to N more times, the way a Slurm requeue would:
#   scripts/relaunch.sh --retries N -- mpirun -n 4 pentamesh train --config run.toml --resume auto
# The command should carry `--resume auto` so each attempt continues from the newest intact
# checkpoint (the first attempt, with none, starts fresh). Exit status: the last attempt's.
set -u
retries=3
while [[ $# -gt 0 && "$1" != "--" ]]; do
  case "$1" in
    --retries) retries="$2"; shift 2 ;;
    *) echo "relaunch: unknown option $1 (usage: relaunch.sh --retries N -- command...)" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] && shift
if [[ $# -eq 0 ]]; then
  echo "relaunch: no command (usage: relaunch.sh --retries N -- command...)" >&2
  exit 2
fi
if ! [[ "$retries" =~ ^[0-9]+$ ]]; then
  echo "relaunch: --retries must be a non-negative integer (got '$retries')" >&2
  exit 2
fi
attempt=1
while true; do
  echo "relaunch: attempt $attempt of $((retries + 1)): $*" >&2
  "$@"
  rc=$?
  if [[ $rc -eq 0 ]]; then exit 0; fi
  echo "relaunch: attempt $attempt exited with status $rc" >&2
  if [[ $attempt -gt $retries ]]; then
    echo "relaunch: giving up after $attempt attempts" >&2
    exit "$rc"
  fi
  attempt=$((attempt + 1))
done

#!/usr/bin/env bash
# Runs an MPI launcher command (mpiexec ARGS...) with its own Open MPI session directory base, a
# fresh temp dir removed after; its exit code is the launcher's. mpiruns of one user otherwise
# share <tmp>/ompi.<node>.<uid>, which the last one to end removes while another may be creating
# it (orte_session_dir: "mkdir ... File exists"), and ctest runs two tests at a time.
# Usage: mpiexec_isolated.sh MPIEXEC [ARGS...]
set -u
base=$(mktemp -d) || exit 1
OMPI_MCA_orte_tmpdir_base="$base" "$@"
rc=$?
rm -rf "$base"
exit "$rc"

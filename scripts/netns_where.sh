#!/usr/bin/env bash
# Prints which host (namespace) this MPI rank runs on, then runs its arguments in its place:
#   mpirun ... netns_where.sh binary args...
echo "rank ${OMPI_COMM_WORLD_RANK:-?} on host $(hostname) (netns $(readlink /proc/self/ns/net))"
exec "$@"

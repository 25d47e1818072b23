// The host measured once per machine: a run config without run.host_profile (and without an
// explicit run.peak_gflops / run.mem_gbps) uses this machine's HostProfile from a cache file,
// measuring it first when the file is missing, so a plain `pentamesh train` predicts its own step
// time without the user knowing about `pentamesh calibrate --host`.
//  - Key: the CPU model, its hardware threads, OpenBLAS's build, the MPI library's version and
//    kHostMeasureVersion (bumped when the measurement changes). A change of any re-measures.
//  - File: <cache dir>/host-<16 hex digits of the key's hash>.toml (the key in its header), the
//    cache dir being $PENTAMESH_CACHE_DIR, else $XDG_CACHE_HOME/pentamesh, else
//    $HOME/.cache/pentamesh.
//  - The single-process part (MeasureHost: GEMM forms, triad, attention, sgemv, a few seconds) is
//    measured under an exclusive flock on <file>.lock, so the ranks of one host measure once: the
//    first measures and writes, the others sleep in flock and read what it wrote.
//  - Collectives (the [[comm]] entry at the job's ranks per host) are measured by every rank of
//    a one-host world together (MeasureCollectives), and added to the file by rank 0. A world
//    over several hosts keeps the nominal link (its hosts' shared memory is not the link between
//    them).
// Every file write goes through core::WriteFileAtomic: a reader never sees half a profile.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "core/status.h"
#include "train/host_profile.h"
#include "train/run_config.h"

namespace pentamesh::train {

inline constexpr int kHostMeasureVersion = 1;

struct HostKey {
  std::string cpu_model;         // /proc/cpuinfo's first "model name"
  int cores = 0;                 // hardware threads
  std::string blas;              // kernels::BlasConfig()
  std::string mpi;               // comm::MpiLibraryVersion()
  std::string Text() const;      // every field, one "name: value" line each
  std::string FileName() const;  // host-<hash>.toml
};

HostKey ThisHostKey();

// $PENTAMESH_CACHE_DIR, else $XDG_CACHE_HOME/pentamesh, else $HOME/.cache/pentamesh; an error when
// none of them is set.
core::Result<std::string> HostCacheDir();

// What UseCachedHostProfile did, for the run's log.
struct HostCacheOutcome {
  std::string path;            // the cache file
  bool measured_host = false;  // this process measured the single-process part
  bool measured_comm = false;  // the job measured its collectives
  bool comm_nominal = false;   // a multi-host world: the link stays nominal
  double seconds = 0;          // spent measuring (this process)
};

// When config.run.auto_host_profile: sets config.run.host (and peak_gflops, mem_gbps) from the
// cache, measuring what is missing. `world` null: one process. Every rank of `world` must call it
// (the collectives are measured together). REQUIRES: config.run.ranks_per_host set (0 = every
// rank of the layout on this host).
core::Result<HostCacheOutcome> UseCachedHostProfile(RunConfig& config, comm::Communicator* world);

}  // namespace pentamesh::train

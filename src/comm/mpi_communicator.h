// The Open MPI backend: MpiWorld initialises MPI (RAII: MPI_Init_thread in Create, MPI_Finalize
// in the destructor), owns the "world" communicator and creates sub-communicators from rank
// lists. Launched without mpirun it runs as a single rank (MPI singleton init).
//
// Invariant: every operation is issued non-blocking (MPI_Iallreduce, MPI_Isend, ...) and then
// polled with MPI_Testall against a deadline of timeout_s; past the deadline the rank prints
//   pentamesh comm: timeout: world rank R (rank r of group NAME {ranks}) did not complete OP
//   (N bytes, DTYPE) within T s; aborting the job
// to stderr and calls MPI_Abort, so a missing peer never hangs the job silently.
// The header is free of <mpi.h>; the MPI types live in mpi_communicator.cc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace pentamesh::comm {

inline constexpr double kDefaultCommTimeoutS = 300.0;
inline constexpr const char* kCommTimeoutEnv = "PENTAMESH_COMM_TIMEOUT_S";

struct MpiOptions {
  // Seconds a single operation may take before the job aborts. Unset: the environment variable
  // PENTAMESH_COMM_TIMEOUT_S, else kDefaultCommTimeoutS.
  std::optional<double> timeout_s;
};

// The timeout from an explicit option, else from the environment variable's text (nullptr when
// unset), else the default. Errors name the option or variable and the bad value.
core::Result<double> ResolveCommTimeout(std::optional<double> option_s, const char* env_text);

// The MPI library's version string (MPI_Get_library_version; callable before MPI_Init), first
// line only, e.g. "Open MPI v4.1.4, package: Debian OpenMPI, ...".
std::string MpiLibraryVersion();

class MpiWorld final : public World {
 public:
  // Initialises MPI (MPI_THREAD_FUNNELED) unless the process already did; fails when MPI was
  // finalized already or the timeout setting is invalid. One MpiWorld per process.
  static core::Result<std::unique_ptr<MpiWorld>> Create(const MpiOptions& options = {});
  ~MpiWorld() override;  // frees the world communicator, then MPI_Finalize if Create initialised
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Ranks of this job on this rank's host (MPI_COMM_TYPE_SHARED), this rank included.
  int local_size() const { return local_size_; }
  Communicator& world() override { return *world_; }
  // Uses MPI_Comm_create_group (collective over the members only); a one-rank list gives a
  // SelfCommunicator without any MPI call. Communicators it returns must be destroyed before
  // this MpiWorld.
  std::unique_ptr<Communicator> CreateGroup(const std::string& name,
                                            const std::vector<int>& world_ranks) override;
  double timeout_s() const { return timeout_s_; }

 private:
  MpiWorld(bool owns_mpi, int rank, int size, double timeout_s);
  bool owns_mpi_;
  int rank_;
  int size_;
  int local_size_ = 1;
  double timeout_s_;
  int next_group_tag_ = 0;
  std::unique_ptr<Communicator> world_;
};

}  // namespace pentamesh::comm

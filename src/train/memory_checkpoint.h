// In-memory replicated checkpoints (ckpt.memory_interval): every N steps each rank writes its own
// state (a one-rank checkpoint: the same safetensors file, manifest and CRC32C as the durable
// ones, TrainerSnapshot with SnapshotScope::kOwnRank) to node-local memory, /dev/shm, and sends
// the same bytes over MPI to its partner on the next node, which keeps them as its partner's copy
// (ckpt/memory_copy.h has the paths). After a crash, `--resume auto` restores from the newest
// valid state among this rank's own copy, the copy its partner holds (fetched over MPI) and the
// durable checkpoint. Layout, partner rule and restore order: docs/checkpoint_format.md,
// "In-memory copies".
//
// Partner rule: partner(r) = (r + ranks_per_node) % world, ranks_per_node from the launcher
// (PENTAMESH_RANKS_PER_NODE, OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE, else the whole
// world: one node, and then no partner copies). Rank r holds the copy of
// (r - ranks_per_node) mod world.
//
// Invariants: a step is complete once every rank has its own copy and its partner's (an all-reduce
// after the writes); only then are older steps removed, so a crash at any moment leaves the last
// complete step on every node. A restore from memory happens only when every rank found the same
// newest step (own or partner copy) and it is at least as new as the newest durable checkpoint;
// otherwise the durable path runs. All calls are collective over the world (same order on every
// rank), on the training thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "train/trainer.h"

namespace pentamesh::train {

// Ranks per node as the launcher says (see above); errors name a variable that is not a positive
// integer.
core::Result<int> RanksPerNode(int world_size);
// The rank that keeps rank's copy: (rank + ranks_per_node) % world; -1 when the world is one node
// (ranks_per_node >= world).
int MemoryPartner(int rank, int ranks_per_node, int world);
// The rank whose copy `rank` keeps: (rank - ranks_per_node) mod world; -1 on one node.
int MemoryHeldFor(int rank, int ranks_per_node, int world);

// A restore from memory: the agreed step, the job directory and the ranks that restored from
// the copy their partner held (their own was missing, older or damaged).
struct MemoryRestore {
  int64_t step = 0;
  std::string dir;
  std::vector<int> from_partner;
};

class MemoryCheckpointer {
 public:
  using Log = std::function<void(const std::string&)>;
  // world: null on one process. shm_root: "/dev/shm" in `pentamesh train`; tests pass a temp dir.
  // run_id: the run's id (ckpt/owner.h); the copies live under
  // <shm_root>/pentamesh-<key>/run-<run_id>, so a run never sees another run's copies under the
  // same key. Errors: a bad ranks-per-node variable. `info` gets the start-up line (where the
  // copies go, or why there is no partner copy).
  static core::Result<MemoryCheckpointer> Create(const Trainer& trainer, comm::Communicator* world,
                                                 const std::string& shm_root,
                                                 const std::string& run_id, const Log& info);

  // Writes this rank's copy of the trainer's current step and the partner's copy it holds; then
  // removes older steps if every rank succeeded. A failure is returned (the previous complete
  // step stays); every rank calls it at the same step.
  core::Status Save(Trainer& trainer);

  // --resume auto: restores from memory when every rank has the same newest step (its own copy or
  // its partner's) and no durable checkpoint under ckpt.dir is newer. Returns what was restored
  // (every rank gets the same MemoryRestore), nullopt when the
  // durable path must run (the reason went to `warn`: no copy, steps that differ across ranks, a
  // copy that fails its checksum, a newer durable checkpoint). An error only when loading the
  // verified copies into the trainer failed on some rank (the trainer's state is then mixed).
  core::Result<std::optional<MemoryRestore>> Resume(Trainer& trainer, const Log& warn);

  // A clean finish: removes this run's whole directory (every rank's copies and anything a
  // resume passed over), then the key's directory once it is empty. Collective.
  void RemoveAll();

  const std::string& job_dir() const { return job_dir_; }
  int partner() const { return partner_; }
  int held_for() const { return held_for_; }

 private:
  // Sends `blob` to dst and returns what src sent (every rank calls it; "" on one node). Sizes
  // agreed on by an all-gather, sent in chunks of 1 GiB (MPI counts are int).
  std::string Exchange(const std::string& blob, int dst, int src);
  // The newest copy under root that verifies and was saved by rank `of_rank` of this world at
  // this layout; reasons for passing one over go to `warn`.
  std::optional<ckpt::Checkpoint> OpenNewest(const std::string& root, int of_rank,
                                             const Log& warn) const;
  bool AllOk(bool ok) const;

  comm::Communicator* world_ = nullptr;
  int rank_ = 0, world_size_ = 1;
  int partner_ = -1, held_for_ = -1;
  std::string job_dir_, own_root_, held_root_;
  std::string layout_;  // spec::ShortLayout of the run: a copy restores only into the same one
};

}  // namespace pentamesh::train

// A training job on this rank: the layout's mesh over the launcher's world and this rank's Trainer
// on it, built the same way for `pentamesh train` and the mpirun tests. Invariant: the mesh
// outlives the trainer (members are destroyed in reverse order: trainer first).
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "core/status.h"
#include "mesh/mesh.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace pentamesh::train {

class Job {
 public:
  // First, when config.run.auto_host_profile, this host's profile from its cache (measured once;
  // train/host_cache.h; rank 0 prints where it came from). world null: one process. Otherwise
  // the mesh of config.run.layout over `world` (errors name
  // run.layout), then, when the world has several ranks, rank 0 alone builds a missing dataset
  // (tokenizer training, tokenization) while the others wait for the outcome, and every rank
  // opens it in Trainer::Create. `world` must outlive the Job.
  static core::Result<Job> Create(const RunConfig& config, comm::World* world);

  Trainer& trainer() { return *trainer_; }
  // The layout's mesh (null on one process).
  mesh::Mesh* mesh() const { return mesh_.get(); }
  // The world communicator (null on one process): the run loop's checkpoint agreement.
  comm::Communicator* world() const { return world_; }

 private:
  std::unique_ptr<mesh::Mesh> mesh_;
  std::unique_ptr<Trainer> trainer_;
  comm::Communicator* world_ = nullptr;
};

}  // namespace pentamesh::train

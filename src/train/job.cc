#include "train/job.h"

#include <fmt/format.h>

#include <string>

namespace pentamesh::train {
namespace {

// Rank 0 builds the dataset if missing; the others learn the outcome from a broadcast, so a job
// trains one tokenizer instead of one per rank.
core::Status PrepareDatasetOnRankZero(const RunConfig& config, comm::Communicator& world) {
  int32_t ok = 1;
  std::string error;
  if (world.rank() == 0) {
    auto dataset = OpenOrBuildDataset(config.data, config.model.vocab);
    if (!dataset.ok()) {
      ok = 0;
      error = dataset.status().message();
    }
  }
  world.broadcast(&ok, 1, core::Dtype::kI32, 0);
  if (ok) return core::Status::Ok();
  return core::Status::Error(
      world.rank() == 0 ? error : "data.dataset: rank 0 could not prepare it (see its message)");
}

}  // namespace

core::Result<Job> Job::Create(const RunConfig& config, comm::World* world) {
  Job job;
  Distributed dist;
  if (world != nullptr) {
    auto mesh = mesh::Mesh::Create(config.run.layout, *world);
    if (!mesh.ok())
      return core::Status::Error(fmt::format("run.layout: {}", mesh.status().message()));
    job.mesh_ = std::make_unique<mesh::Mesh>(std::move(*mesh));
    job.world_ = &world->world();
    dist = {.mesh = job.mesh_.get(), .world = job.world_};
    if (world->size() > 1) PM_RETURN_IF_ERROR(PrepareDatasetOnRankZero(config, *job.world_));
  }
  PM_ASSIGN_OR_RETURN(job.trainer_, Trainer::Create(config, dist));
  return job;
}

}  // namespace pentamesh::train

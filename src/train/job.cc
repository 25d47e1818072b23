#include "train/job.h"

#include <fmt/format.h>

#include <string>

#include "train/host_cache.h"

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

// Prints, on the world's rank 0, where the run's host profile came from.
void PrintHostOutcome(const RunConfig& config, const HostCacheOutcome& o,
                      comm::Communicator* world) {
  if (!config.run.auto_host_profile || (world != nullptr && world->rank() != 0)) return;
  const HostProfile& h = *config.run.host;
  std::string comm;
  if (o.comm_nominal) {
    comm = "; the link between hosts stays nominal";
  } else if (world != nullptr && world->size() > 1) {
    comm = fmt::format("; collectives at {} ranks {}", world->size(),
                       o.measured_comm ? "measured now" : "from the cache");
  }
  const std::string how = o.measured_host || o.measured_comm
                              ? fmt::format("measured once, in {:.1f} s", o.seconds)
                              : std::string("cached");
  fmt::print("host: {} ({}): GEMM {:.1f} GFLOP/s on {} threads, triad {:.1f} GB/s{}\n", o.path, how,
             h.peak_gflops, h.threads, h.mem_gbps, comm);
}

}  // namespace

core::Result<Job> Job::Create(const RunConfig& run_config, comm::World* world) {
  Job job;
  Distributed dist;
  RunConfig config = run_config;
  {
    comm::Communicator* w = world != nullptr ? &world->world() : nullptr;
    PM_ASSIGN_OR_RETURN(const HostCacheOutcome host, UseCachedHostProfile(config, w));
    PrintHostOutcome(config, host, w);
  }
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

// Scaling studies built on plan::Search: the best layout at each GPU count of a list (`pentamesh
// scale`), and the best layout for each (model, node count) cell of a grid (`pentamesh sweep`).
// Invariant: each point is an independent full search with the same options; nothing is
// extrapolated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/search.h"

namespace pentamesh::plan {

struct ScalePoint {
  int64_t gpus = 0;
  std::optional<cost::Estimate> best;  // empty when nothing fits
  std::vector<std::string> why_not;    // ExplainNoFit lines when empty
  double efficiency = 0;               // (tokens/s per GPU) / that of the first point that fits
  // The term whose GPU-seconds per token grew most since the first point that fits (ideal
  // scaling keeps every term's GPU-seconds per token constant), and by how much, as a fraction of
  // the first point's GPU-seconds per token. The growths of all terms add up to 1/efficiency - 1.
  const cost::TimeTerm* limiting = nullptr;  // an entry of cost::kTimeTerms, or none
  double limiting_growth = 0;
};

core::Result<std::vector<ScalePoint>> Scale(const spec::ModelSpec& model,
                                            const spec::ClusterSpec& cluster,
                                            const spec::TrainSpec& train,
                                            const std::vector<int64_t>& gpu_counts,
                                            const SearchOptions& options);

struct SweepCell {
  std::string model;
  int64_t nodes = 0;
  std::optional<cost::Estimate> best;
  std::string why_not;  // first explanation line when nothing fits
};

struct SweepResult {
  std::vector<std::string> models;
  std::vector<int64_t> nodes;
  std::vector<SweepCell> cells;  // row-major: models x nodes
  const SweepCell& at(size_t model_index, size_t node_index) const {
    return cells[model_index * nodes.size() + node_index];
  }
};

core::Result<SweepResult> Sweep(const std::vector<spec::ModelSpec>& models,
                                const spec::ClusterSpec& cluster, const spec::TrainSpec& train,
                                const std::vector<int64_t>& nodes, const SearchOptions& options);

}  // namespace pentamesh::plan

namespace pentamesh::plan {

// Why `runner_up` ranks below `best`: its step-time gap and the terms that account for it
// ("+4.1% step: bubble +0.21 s, dp +0.05 s"), or "same step time, more memory".
std::string ExplainGap(const cost::Estimate& runner_up, const cost::Estimate& best);

}  // namespace pentamesh::plan

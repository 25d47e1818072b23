#include "plan/scale.h"

#include <fmt/format.h>

#include <algorithm>

#include "spec/limits.h"
#include "spec/load_toml.h"

namespace pentamesh::plan {

namespace {

// Efficiency and the term whose GPU-seconds per token grew most, relative to `first`. The
// batch is the same at every point, so GPU-seconds per token compare as seconds * GPUs.
void CompareWithFirst(ScalePoint& point, const ScalePoint& first) {
  const cost::Estimate& a = *first.best;
  const cost::Estimate& b = *point.best;
  const double gpus_a = static_cast<double>(first.gpus), gpus_b = static_cast<double>(point.gpus);
  point.efficiency = (b.tokens_per_s / gpus_b) / (a.tokens_per_s / gpus_a);
  if (&point == &first) return;
  double growth_max = 0;
  for (const cost::TimeTerm& term : cost::kTimeTerms) {
    const double growth =
        (b.time.*term.field * gpus_b - a.time.*term.field * gpus_a) / (a.time.step * gpus_a);
    if (growth > growth_max) {
      growth_max = growth;
      point.limiting = &term;
    }
  }
  point.limiting_growth = growth_max;
}

}  // namespace

core::Result<std::vector<ScalePoint>> Scale(const spec::ModelSpec& model,
                                            const spec::ClusterSpec& cluster,
                                            const spec::TrainSpec& train,
                                            const std::vector<int64_t>& gpu_counts,
                                            const SearchOptions& options) {
  if (gpu_counts.empty()) return core::Status::Error("scale: the GPU count list is empty");
  std::vector<ScalePoint> points;
  for (int64_t gpus : gpu_counts) {
    spec::ClusterSpec sized = cluster;
    PM_RETURN_IF_ERROR(spec::SetGpuCount(sized, gpus));
    PM_ASSIGN_OR_RETURN(SearchResult result, Search(model, sized, train, options));
    ScalePoint point;
    point.gpus = gpus;
    if (result.top.empty()) {
      point.why_not = ExplainNoFit(model, sized, train, options, result);
    } else {
      point.best = result.top.front();
    }
    points.push_back(std::move(point));
  }
  const ScalePoint* first = nullptr;
  for (ScalePoint& point : points) {
    if (!point.best) continue;
    if (first == nullptr) first = &point;
    CompareWithFirst(point, *first);
  }
  return points;
}

core::Result<SweepResult> Sweep(const std::vector<spec::ModelSpec>& models,
                                const spec::ClusterSpec& cluster, const spec::TrainSpec& train,
                                const std::vector<int64_t>& nodes, const SearchOptions& options) {
  if (models.empty() || nodes.empty()) {
    return core::Status::Error("sweep: needs at least one model and one node count");
  }
  SweepResult out;
  out.nodes = nodes;
  for (const spec::ModelSpec& model : models) {
    out.models.push_back(model.name);
    for (int64_t n : nodes) {
      spec::ClusterSpec sized = cluster;
      PM_ASSIGN_OR_RETURN(const int64_t gpus, spec::GpuProduct("sweep: nodes x gpus_per_node",
                                                               {n, cluster.gpus_per_node}));
      PM_RETURN_IF_ERROR(spec::SetGpuCount(sized, gpus));
      PM_ASSIGN_OR_RETURN(SearchResult result, Search(model, sized, train, options));
      SweepCell cell;
      cell.model = model.name;
      cell.nodes = n;
      if (result.top.empty()) {
        cell.why_not = ExplainNoFit(model, sized, train, options, result).front();
      } else {
        cell.best = result.top.front();
      }
      out.cells.push_back(std::move(cell));
    }
  }
  return out;
}

}  // namespace pentamesh::plan

namespace pentamesh::plan {

std::string ExplainGap(const cost::Estimate& runner_up, const cost::Estimate& best) {
  const double gap = runner_up.time.step - best.time.step;
  if (gap <= 0) {
    return fmt::format("same step time, {:.1f} GB more memory",
                       (runner_up.memory.total - best.memory.total) / 1e9);
  }
  std::vector<std::pair<double, size_t>> deltas;  // (seconds, index in cost::kTimeTerms)
  for (size_t i = 0; i < cost::kTimeTerms.size(); ++i) {
    const double d =
        runner_up.time.*cost::kTimeTerms[i].field - best.time.*cost::kTimeTerms[i].field;
    if (d > 0) deltas.emplace_back(d, i);
  }
  std::sort(deltas.rbegin(), deltas.rend());
  std::string out = fmt::format("+{:.1f}% step:", 100 * gap / best.time.step);
  for (size_t i = 0; i < deltas.size() && i < 3; ++i) {
    out += fmt::format("{} {} +{:.3f} s", i ? "," : "", cost::kTimeTerms[deltas[i].second].name,
                       deltas[i].first);
  }
  if (deltas.empty()) out += " less overlap";
  return out;
}

}  // namespace pentamesh::plan

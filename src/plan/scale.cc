#include "plan/scale.h"

#include "spec/load_toml.h"

namespace pentamesh::plan {

const char* ToString(Term term) {
  switch (term) {
    case Term::kCompute:
      return "compute";
    case Term::kTp:
      return "tp";
    case Term::kCp:
      return "cp";
    case Term::kEp:
      return "ep";
    case Term::kPp:
      return "pp";
    case Term::kDp:
      return "dp";
    case Term::kBubble:
      return "bubble";
    case Term::kCount:
      break;
  }
  return "?";
}

double TermSeconds(const cost::Time& t, Term term) {
  switch (term) {
    case Term::kCompute:
      return t.compute;
    case Term::kTp:
      return t.tp;
    case Term::kCp:
      return t.cp;
    case Term::kEp:
      return t.ep;
    case Term::kPp:
      return t.pp;
    case Term::kDp:
      return t.dp;
    case Term::kBubble:
      return t.bubble;
    case Term::kCount:
      break;
  }
  return 0;
}

namespace {

// Efficiency and the term whose share of the step grew most, relative to `first`.
void CompareWithFirst(ScalePoint& point, const ScalePoint& first) {
  const cost::Estimate& a = *first.best;
  const cost::Estimate& b = *point.best;
  point.efficiency = (b.tokens_per_s / static_cast<double>(point.gpus)) /
                     (a.tokens_per_s / static_cast<double>(first.gpus));
  if (&point == &first) return;
  double growth_max = 0;
  for (int i = static_cast<int>(Term::kTp); i < static_cast<int>(Term::kCount); ++i) {
    const Term term = static_cast<Term>(i);
    const double growth =
        TermSeconds(b.time, term) / b.time.step - TermSeconds(a.time, term) / a.time.step;
    if (growth > growth_max) {
      growth_max = growth;
      point.limiting = term;
    }
  }
  point.limiting_share_growth = growth_max;
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
      PM_RETURN_IF_ERROR(spec::SetGpuCount(sized, n * cluster.gpus_per_node));
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

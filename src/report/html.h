// The planner's report as one self-contained HTML page (report/page.h's skeleton; the charts are
// report/chart.h's, Vega inlined, nothing fetched). Sections (each only when its data is present):
// the best layout and runners-up (days with and without failures when goodput is given,
// cost/goodput.h); memory per GPU by category against capacity and step time by term (horizontal
// stacked bars walking cost::kMemoryCategories and cost::kTimeTerms, colour i = ChartColor(i));
// the best layout's pipeline timeline (report/timeline.h, SVG); the FSDP comparison; the scaling
// curve and its table; the sweep heatmap.
// Invariant: the page only presents numbers computed elsewhere (cost/, plan/, and schedule/'s
// simulator for the timeline).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "cost/goodput.h"
#include "plan/baseline.h"
#include "plan/scale.h"
#include "plan/search.h"

namespace pentamesh::report {

struct PlanReport {
  std::string model;  // names for the heading
  std::string cluster;
  std::string train;
  int64_t gpus = 0;
  std::vector<cost::Estimate> top;  // best first
  std::optional<plan::Counts> counts;
  double search_seconds = 0;
  std::optional<plan::BaselineComparison> baseline;
  std::vector<plan::ScalePoint> scale;
  std::optional<plan::SweepResult> sweep;
  std::vector<cost::Goodput> goodput;  // of each `top` entry, same order; empty = not computed
};

std::string RenderHtml(const PlanReport& report);

// Writes the page; the error names the path and the OS reason.
core::Status WriteHtml(const PlanReport& report, const std::string& path);

}  // namespace pentamesh::report

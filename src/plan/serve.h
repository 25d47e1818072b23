// plan::SearchServe: the serving layouts of a model (tp 1, 2, 4, 8 within a node; ep over the
// divisors of the expert count; pp 1, 2, 4, 8 dividing the layers; replicas 1 to the requests),
// each costed by cost::EstimateServe, kept when it fits and meets the latency targets, ranked by
// cost per request (then fewer GPUs, then lower p95 TTFT, then the layout's fields: a total order).
// When none meets the targets, the nearest miss (the fitting layout with the smallest p95 TTFT
// over target, then ITL) explains why.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cost/inference.h"

namespace pentamesh::plan {

struct ServeTargets {
  double ttft_p95_s = 0;  // 0 = no target
  double itl_s = 0;       // 0 = no target
};

struct ServeSearchResult {
  std::vector<cost::ServeEstimate> top;             // best first, at most `top_k`
  std::optional<cost::ServeEstimate> nearest_miss;  // fits, misses a target (when top is empty)
  int64_t costed = 0, fit = 0, met = 0;             // layouts costed, fitting, meeting targets
};

// The candidate layouts, in a fixed order (tp, ep, pp, replicas ascending).
std::vector<cost::ServeLayout> ServeLayouts(const cost::Context& ctx, const cost::ServeWorkload& w);

ServeSearchResult SearchServe(const cost::Context& ctx, const cost::ServeWorkload& w,
                              const ServeTargets& targets, int top_k);

}  // namespace pentamesh::plan

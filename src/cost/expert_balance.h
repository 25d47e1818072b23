// MoE load-balance facts shared by the engine and the run report (namespace pentamesh::cost).
// Invariant: each threshold is written here once; model/ (MoeStats::CollapseWarning) and
// train/metrics.cc (metrics.jsonl "expert_collapse" and "expert_collapse_share") read it from
// here; report/ (heatmap marks, threshold line) reads the share those keys carry.
#pragma once

#include <cstdint>

namespace pentamesh::cost {

// Expert collapse: the most loaded routed expert took more than this share of a step's routed
// assignments (exactly this share is not a collapse). The share lies between 1/E (every expert
// equally loaded) and 1/top_k (every token chose that expert: a token picks an expert at most
// once); collapse is past the midpoint, (1/E + 1/top_k) / 2. A fixed share cannot serve every
// router: 25% is the fair share of 4 experts (warning on every step of a balanced top-2 router)
// and the ceiling of a top-4 router (never warning for 128 experts). E = 128, top-4: 12.9%;
// E = 8, top-2: 31.25%; E = 4, top-2: 37.5%. E <= top_k: 1/E, never exceeded.
inline double ExpertCollapseShare(int64_t experts, int64_t top_k) {
  if (experts <= 0 || top_k <= 0) return 1.0;
  if (experts <= top_k) return 1.0 / static_cast<double>(experts);
  return 0.5 * (1.0 / static_cast<double>(experts) + 1.0 / static_cast<double>(top_k));
}

}  // namespace pentamesh::cost

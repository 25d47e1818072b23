// MoE load-balance facts shared by the engine and the run report (namespace pentamesh::cost).
// Invariant: each threshold is written here once; model/ (MoeStats::CollapseWarning, hence
// metrics.jsonl "expert_collapse") and report/ (heatmap marks, threshold line) read it from here.
#pragma once

namespace pentamesh::cost {

// Expert collapse: one routed expert took more than this share of a step's routed assignments
// (exactly this share is not a collapse).
inline constexpr double kExpertCollapseShare = 0.25;

}  // namespace pentamesh::cost

// What one pipeline rank holds under a layout, for the engines' start-up checks
// (`pentamesh estimate --json`'s "stages"; tests/launch/validate_engines.py compares them with the
// parameters torchtitan and megatron-core build). A separate header so that cost.h's many
// includers do not rebuild for it.
#pragma once

#include <cstdint>

#include "cost/cost.h"
#include "spec/layout.h"

namespace pentamesh::cost {

// Rank of pp stage `pp_rank` (internal::ComputeStage, the numbers the memory model uses): its
// layers (all its virtual chunks), MoE layers, and parameters before ZeRO sharding, split over
// tp (and etp x ep for the routed experts). REQUIRES: CheckLayout == kOk.
struct StageParams {
  double layers = 0, moe_layers = 0;
  double params_dense = 0, params_expert = 0;
};
StageParams ParamsForStage(const Context& ctx, const spec::Layout& layout, int64_t pp_rank);

}  // namespace pentamesh::cost

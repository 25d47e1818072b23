// JSON for a cost::Estimate, shared by `pentamesh estimate --json` and the planner's commands
// (plan, scale, sweep). Invariant: every key of an Estimate is listed here once; the commands add
// only what is theirs (warnings, parameter counts).
#pragma once

#include <nlohmann/json.hpp>

#include "cost/cost.h"
#include "spec/layout.h"

namespace pentamesh::cli {

// Degrees, options and the layout's text form.
nlohmann::json LayoutJson(const spec::Layout& l);

// layout, fits, violations, microbatches, memory (by category, stage), time (by term,
// critical_stage), bubble_fraction, mfu, mfu_causal, hfu, tokens_per_s, days, cost_usd,
// comm_bytes.
nlohmann::json EstimateJson(const cost::Estimate& e);

// Per pp rank (cost::ParamsForStage): layers, moe_layers, params_dense, params_expert on one rank
// (split over tp / etp x ep, before ZeRO). Empty when the layout breaks a structural rule.
nlohmann::json StagesJson(const cost::Context& ctx, const spec::Layout& l);

}  // namespace pentamesh::cli

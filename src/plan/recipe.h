// plan::PlanRecipe: the best layout per phase of a training recipe (spec/recipe.h), the cost of
// switching layouts between phases, the totals, and the best single layout for every phase, to
// say whether switching pays once its cost is counted.
//
// Each part of each phase (spec::PhaseParts: a ramped phase is costed as its ramp, at the ramp's
// token-weighted mean batch, then its steady rest) runs plan::Search on the same model and cluster
// with the part's train spec, so a part's best layout is what `plan --train` gives for that spec.
// Consecutive parts on different layouts pay a cost::Reshard (checkpoint, restart, reload); parts
// on the same layout pay nothing. The single layout: each candidate from the parts' top lists
// (RecipeOptions::single_candidates_per_part of each) costed on every part; the fastest that fits
// them all. It is a heuristic over those candidates, not a search of the whole space for the whole
// recipe.
//
// MFU in three conventions, the case study's first (cost::FlopsPerToken): 6N (6 x active
// params, no attention), with full attention (the square), with causal attention (half of it).
// The recipe's is total FLOPs / (peak x wall time, resharding included).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "cost/cost.h"
#include "cost/goodput.h"
#include "plan/search.h"
#include "spec/recipe.h"

namespace pentamesh::plan {

struct RecipeOptions {
  SearchOptions search;         // per part
  cost::GoodputParams goodput;  // storage bandwidths and restart for resharding; failures
  // Layouts each part's search contributes as candidates for the single layout: its top
  // max(search.top_k, single_candidates_per_part).
  int single_candidates_per_part = 64;
};

struct PartPlan {
  spec::PhasePart part;
  cost::Estimate best;  // the part's best layout (fits)
  cost::Goodput goodput;
  // Resharding from the previous part's layout; nullopt for the first part and when the layout
  // stays.
  std::optional<cost::Reshard> reshard_in;
};

struct MfuConventions {
  double six_n = 0;   // 6 x active params per token, no attention (the case study's)
  double full = 0;    // with full attention FLOPs
  double causal = 0;  // with causal attention FLOPs
};

struct RecipeTotals {
  double tokens = 0;
  double train_days = 0;          // the parts' days
  double reshard_days = 0;        // the switches'
  double days = 0;                // train_days + reshard_days
  double days_with_failures = 0;  // each part at its goodput, plus the switches
  double cost_usd = 0;            // days x 24 x GPUs x price
  double cost_with_failures_usd = 0;
  double tokens_per_s = 0;  // tokens / (days x 86,400)
  double goodput = 0;       // days / days_with_failures
  int switches = 0;
  MfuConventions mfu;
};

struct SingleLayoutPlan {
  std::vector<cost::Estimate> parts;  // the layout costed on each part
  std::vector<cost::Goodput> goodput;
  RecipeTotals totals;
};

struct RecipePlan {
  std::vector<PartPlan> parts;
  RecipeTotals totals;
  // The best single layout over all parts; nullopt when no candidate fits every part.
  std::optional<SingleLayoutPlan> single;
  int64_t single_candidates = 0;  // distinct layouts tried for it
  // Parts where nothing fits (their names and the search's explanation); the plan is incomplete
  // when this is not empty.
  std::vector<std::string> no_fit;
};

// MFU of the three conventions for `tokens` trained at the FLOPs of `flops` in `seconds` on the
// cluster (cost::Mfu), accumulated over parts by AddMfuWork.
struct MfuWork {
  double flops_6n = 0, flops_full = 0, flops_causal = 0;  // total FLOPs
  void Add(const cost::FlopsPerToken& f, double tokens);
  MfuConventions Over(double seconds, const spec::ClusterSpec& cluster) const;
};

// Errors only for invalid options (plan::Search's); parts that fit nothing are listed in no_fit.
core::Result<RecipePlan> PlanRecipe(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                                    const spec::Recipe& recipe, const RecipeOptions& options);

}  // namespace pentamesh::plan

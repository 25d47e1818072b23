// plan::PlanRecipe (recipe.h; docs/COST_MODEL.md, "Recipes").
#include "plan/recipe.h"

#include <fmt/format.h>

#include <algorithm>

namespace pentamesh::plan {
namespace {

constexpr double kSecondsPerDay = 86400;

std::vector<spec::PhasePart> AllParts(const spec::Recipe& recipe) {
  std::vector<spec::PhasePart> parts;
  for (size_t i = 0; i < recipe.phases.size(); ++i) {
    for (spec::PhasePart& p : spec::PhaseParts(recipe, i)) parts.push_back(std::move(p));
  }
  return parts;
}

// Totals of parts costed at `estimates` with `goodputs`, joined by `reshards`.
RecipeTotals Totals(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                    const spec::Recipe& recipe, const std::vector<spec::PhasePart>& parts,
                    const std::vector<const cost::Estimate*>& estimates,
                    const std::vector<cost::Goodput>& goodputs,
                    const std::vector<cost::Reshard>& reshards) {
  RecipeTotals t;
  MfuWork work;
  for (size_t i = 0; i < parts.size(); ++i) {
    t.tokens += parts[i].train.total_tokens;
    t.train_days += estimates[i]->days;
    t.days_with_failures += goodputs[i].days;
    work.Add(cost::Flops(model, parts[i].train.seq_len, spec::Recompute::kNone),
             parts[i].train.total_tokens);
  }
  for (const cost::Reshard& r : reshards) t.reshard_days += r.seconds / kSecondsPerDay;
  t.switches = static_cast<int>(reshards.size());
  t.days = t.train_days + t.reshard_days;
  t.days_with_failures += t.reshard_days;
  const double usd_per_day = 24.0 * static_cast<double>(cluster.gpus()) * recipe.usd_per_gpu_hour;
  t.cost_usd = t.days * usd_per_day;
  t.cost_with_failures_usd = t.days_with_failures * usd_per_day;
  const double seconds = t.days * kSecondsPerDay;
  t.tokens_per_s = seconds > 0 ? t.tokens / seconds : 0;
  t.goodput = t.days_with_failures > 0 ? t.days / t.days_with_failures : 0;
  t.mfu = work.Over(seconds, cluster);
  return t;
}

// The fastest layout among the parts' top lists that fits every part; nullopt when none does.
std::optional<SingleLayoutPlan> BestSingle(const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster,
                                           const spec::Recipe& recipe,
                                           const std::vector<spec::PhasePart>& parts,
                                           const std::vector<std::vector<cost::Estimate>>& tops,
                                           const RecipeOptions& options, int64_t& tried) {
  std::vector<spec::Layout> candidates;
  for (const auto& top : tops) {
    for (const cost::Estimate& e : top) {
      if (std::find(candidates.begin(), candidates.end(), e.layout) == candidates.end()) {
        candidates.push_back(e.layout);
      }
    }
  }
  tried = static_cast<int64_t>(candidates.size());
  std::vector<cost::Context> contexts;
  contexts.reserve(parts.size());
  for (const spec::PhasePart& p : parts) {
    contexts.emplace_back(model, cluster, p.train, options.search.cost);
  }
  std::optional<SingleLayoutPlan> best;
  for (const spec::Layout& layout : candidates) {
    SingleLayoutPlan plan;
    bool fits = true;
    for (const cost::Context& ctx : contexts) {
      if (cost::CheckLayout(ctx, layout) != cost::Rule::kOk) {
        fits = false;
        break;
      }
      cost::Estimate e = cost::EstimateLayout(ctx, layout);
      if (!e.fits) {
        fits = false;
        break;
      }
      plan.goodput.push_back(cost::EstimateGoodput(cluster, e, options.goodput));
      plan.parts.push_back(std::move(e));
    }
    if (!fits) continue;
    std::vector<const cost::Estimate*> estimates;
    for (const cost::Estimate& e : plan.parts) estimates.push_back(&e);
    plan.totals = Totals(model, cluster, recipe, parts, estimates, plan.goodput, {});
    // Fewest days first; the layout's fields break ties (plan::Better on the first part).
    if (!best || plan.totals.days < best->totals.days ||
        (plan.totals.days == best->totals.days && Better(plan.parts[0], best->parts[0]))) {
      best = std::move(plan);
    }
  }
  return best;
}

}  // namespace

void MfuWork::Add(const cost::FlopsPerToken& f, double tokens) {
  flops_6n += f.model_6n * tokens;
  flops_full += f.model * tokens;
  flops_causal += f.model_causal * tokens;
}

MfuConventions MfuWork::Over(double seconds, const spec::ClusterSpec& cluster) const {
  // cost::Mfu(FLOPs per token, tokens/s) with one "token" = the whole run: FLOPs / s / peak.
  if (seconds <= 0) return {};
  return MfuConventions{.six_n = cost::Mfu(flops_6n, 1.0 / seconds, cluster),
                        .full = cost::Mfu(flops_full, 1.0 / seconds, cluster),
                        .causal = cost::Mfu(flops_causal, 1.0 / seconds, cluster)};
}

core::Result<RecipePlan> PlanRecipe(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                                    const spec::Recipe& recipe, const RecipeOptions& options) {
  const std::vector<spec::PhasePart> parts = AllParts(recipe);
  RecipePlan plan;
  std::vector<std::vector<cost::Estimate>> tops;
  SearchOptions search = options.search;
  search.top_k = std::max(search.top_k, options.single_candidates_per_part);
  for (const spec::PhasePart& part : parts) {
    PM_ASSIGN_OR_RETURN(SearchResult result, Search(model, cluster, part.train, search));
    if (result.top.empty()) {
      std::string why;
      for (const std::string& line : ExplainNoFit(model, cluster, part.train, search, result)) {
        why += (why.empty() ? "" : "; ") + line;
      }
      plan.no_fit.push_back(fmt::format("{}: {}", part.name, why));
      continue;
    }
    PartPlan p{.part = part,
               .best = result.top.front(),
               .goodput = cost::EstimateGoodput(cluster, result.top.front(), options.goodput),
               .reshard_in = std::nullopt};
    if (!plan.parts.empty() && !(plan.parts.back().best.layout == p.best.layout)) {
      p.reshard_in =
          cost::EstimateReshard(cluster, plan.parts.back().best, p.best, options.goodput);
    }
    plan.parts.push_back(std::move(p));
    tops.push_back(std::move(result.top));
  }
  if (!plan.no_fit.empty()) return plan;
  std::vector<const cost::Estimate*> estimates;
  std::vector<cost::Goodput> goodputs;
  std::vector<cost::Reshard> reshards;
  for (const PartPlan& p : plan.parts) {
    estimates.push_back(&p.best);
    goodputs.push_back(p.goodput);
    if (p.reshard_in) reshards.push_back(*p.reshard_in);
  }
  plan.totals = Totals(model, cluster, recipe, parts, estimates, goodputs, reshards);
  plan.single = BestSingle(model, cluster, recipe, parts, tops, options, plan.single_candidates);
  return plan;
}

}  // namespace pentamesh::plan

// `pentamesh plan --recipe R` (plan_recipe.h): parse, plan::PlanRecipe, print.
#include "cli/plan_recipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "cli/commands.h"
#include "plan/recipe.h"
#include "spec/load_toml.h"
#include "spec/recipe.h"

namespace pentamesh::cli {
namespace {

constexpr double kTB = 1e12;

std::string Count(double v) {
  if (v >= 1e12) return fmt::format("{:.4g}T", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.4g}B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.4g}M", v / 1e6);
  return fmt::format("{:.4g}", v);
}

std::string RopeText(const spec::RopeScaling& r) {
  std::string s = spec::RopeScalingName(r.kind);
  if (r.kind == spec::RopeScalingKind::kLlama3 || r.kind == spec::RopeScalingKind::kYarn) {
    s += fmt::format(" x{:g} from {}", r.factor, r.original_max_positions);
  }
  if (r.theta > 0) s += fmt::format(" theta {:g}", r.theta);
  return s;
}

nlohmann::json MfuJson(const plan::MfuConventions& m) {
  return {{"6n", m.six_n}, {"full_attention", m.full}, {"causal_attention", m.causal}};
}
plan::MfuConventions MfuOf(const cost::Estimate& e) {
  return {.six_n = e.mfu_6n, .full = e.mfu, .causal = e.mfu_causal};
}

nlohmann::json ReshardJson(const cost::Reshard& r) {
  return {{"bytes_written", r.bytes_written},
          {"bytes_read", r.bytes_read},
          {"write_s", r.write_s},
          {"read_s", r.read_s},
          {"restart_s", r.restart_s},
          {"seconds", r.seconds}};
}

nlohmann::json TotalsJson(const plan::RecipeTotals& t) {
  return {{"tokens", t.tokens},
          {"train_days", t.train_days},
          {"reshard_days", t.reshard_days},
          {"days", t.days},
          {"days_with_failures", t.days_with_failures},
          {"cost_usd", t.cost_usd},
          {"cost_with_failures_usd", t.cost_with_failures_usd},
          {"tokens_per_s", t.tokens_per_s},
          {"goodput", t.goodput},
          {"switches", t.switches},
          {"mfu", MfuJson(t.mfu)}};
}

bool SingleBetter(const plan::RecipePlan& p) {
  return p.single && p.single->totals.days < p.totals.days;
}

// The recipe's interval: every phase at its own interval's bound at once (the phases' errors
// taken as fully correlated), so the bound on tokens/s over the recipe is the time-weighted
// harmonic mean of the phases' bounds.
inline constexpr const char* kRecipeIntervalRule =
    "every phase at its interval's bound together: sum(time) / sum(time / bound) over the parts";
struct RecipeInterval {
  double lo = 1, hi = 1;  // measured / predicted
  int uncalibrated = 0;   // parts in an uncalibrated regime
  std::vector<RegimeLookup> parts;
};
std::optional<RecipeInterval> RecipeIntervalOf(const Inputs& in, const plan::RecipePlan& p) {
  RecipeInterval out;
  double time = 0, time_lo = 0, time_hi = 0;
  for (const plan::PartPlan& part : p.parts) {
    std::optional<RegimeLookup> r = LookUpRegime(in, part.part.train);
    if (!r) return std::nullopt;
    const double t = static_cast<double>(part.part.train.total_tokens) / part.best.tokens_per_s;
    time += t;
    time_lo += t / r->iv.lo;
    time_hi += t / r->iv.hi;
    out.uncalibrated += !r->iv.calibrated;
    out.parts.push_back(std::move(*r));
  }
  if (time_lo <= 0 || time_hi <= 0) return std::nullopt;
  out.lo = time / time_lo;
  out.hi = time / time_hi;
  return out;
}

void PrintJson(const Inputs& in, const spec::Recipe& recipe, const GoodputInputs& goodput,
               const plan::RecipePlan& p) {
  nlohmann::json j = {{"recipe", recipe.name},
                      {"model", in.model.name},
                      {"cluster", in.cluster.name},
                      {"gpus", in.cluster.gpus()},
                      {"stack", in.stack.name},
                      {"ramp_costing",
                       "sub-phases: the ramp at its token-weighted mean batch, then "
                       "the steady rest"},
                      {"goodput_inputs", GoodputInputsJson(goodput)},
                      {"parts", nlohmann::json::array()}};
  for (const plan::PartPlan& part : p.parts) {
    const spec::Phase& ph = recipe.phases[part.part.phase];
    nlohmann::json pj = {{"phase", part.part.phase + 1},
                         {"name", part.part.name},
                         {"tokens", part.part.train.total_tokens},
                         {"seq_len", part.part.train.seq_len},
                         {"global_batch_tokens", part.part.train.global_batch_tokens},
                         {"precision", spec::PrecisionName(ph.train.precision)},
                         {"rope",
                          {{"kind", spec::RopeScalingName(ph.rope.kind)},
                           {"theta", ph.rope.theta},
                           {"factor", ph.rope.factor},
                           {"low_freq_factor", ph.rope.low_freq_factor},
                           {"high_freq_factor", ph.rope.high_freq_factor},
                           {"original_max_positions", ph.rope.original_max_positions}}},
                         {"best", EstimateJson(part.best)},
                         {"mfu", MfuJson(MfuOf(part.best))},
                         {"goodput", GoodputJson(part.goodput)},
                         {"interval", IntervalJson(in, part.part.train, part.best.tokens_per_s)}};
    if (part.reshard_in) pj["reshard_in"] = ReshardJson(*part.reshard_in);
    j["parts"].push_back(std::move(pj));
  }
  j["totals"] = TotalsJson(p.totals);
  if (const std::optional<RecipeInterval> iv = RecipeIntervalOf(in, p)) {
    j["totals"]["interval"] = {{"tokens_per_s_lo", p.totals.tokens_per_s * iv->lo},
                               {"tokens_per_s_hi", p.totals.tokens_per_s * iv->hi},
                               {"ratio_lo", iv->lo},
                               {"ratio_hi", iv->hi},
                               {"uncalibrated_parts", iv->uncalibrated},
                               {"rule", kRecipeIntervalRule}};
  }
  j["single_candidates"] = p.single_candidates;
  if (p.single) {
    j["single"] = {{"layout", spec::FormatLayout(p.single->parts.front().layout)},
                   {"totals", TotalsJson(p.single->totals)}};
  }
  j["better"] = SingleBetter(p) ? "single" : "per-phase";
  fmt::print("{}\n", j.dump(2));
}

void PrintTotals(const char* label, const plan::RecipeTotals& t) {
  fmt::print(
      "{}: {:.1f} days (training {:.1f} + {} switch{} {:.2f}), USD {:.4g}; with failures {:.1f} "
      "days (goodput {:.1f}%), USD {:.4g}\n",
      label, t.days, t.train_days, t.switches, t.switches == 1 ? "" : "es", t.reshard_days,
      t.cost_usd, t.days_with_failures, 100 * t.goodput, t.cost_with_failures_usd);
  fmt::print(
      "  {:.4g} tokens/s over {} tokens; MFU 6N {:.1f}%  full-attention {:.1f}%  "
      "causal-attention {:.1f}%\n",
      t.tokens_per_s, Count(t.tokens), 100 * t.mfu.six_n, 100 * t.mfu.full, 100 * t.mfu.causal);
}

// One interval per phase (the calibration runs nearest its regime) and the recipe's.
void PrintPhaseIntervals(const Inputs& in, const plan::RecipePlan& p) {
  const std::optional<RecipeInterval> iv = RecipeIntervalOf(in, p);
  if (!iv) {  // a user's profile: the stack-wide interval
    for (const std::string& line :
         IntervalLines(in, p.parts.front().part.train, p.totals.tokens_per_s))
      fmt::print("{}\n", line);
    return;
  }
  fmt::print(
      "\n80% intervals per phase (calibration runs nearest each phase's regime; "
      "docs/COST_MODEL.md \"Regime intervals\"):\n");
  for (size_t k = 0; k < p.parts.size(); ++k) {
    const plan::PartPlan& part = p.parts[k];
    const RegimeLookup& r = iv->parts[k];
    std::string ids;
    const size_t shown = std::min<size_t>(r.iv.used.size(), 3);
    for (size_t i = 0; i < shown; ++i) ids += (i == 0 ? "" : ", ") + r.iv.used[i].point->id;
    if (r.iv.used.size() > shown) ids += fmt::format(" +{}", r.iv.used.size() - shown);
    fmt::print("  {:>2}  {:<16} {:.4g}-{:.4g} tokens/s from {} runs, mean distance {:.2f}{}: {}\n",
               part.part.phase + 1, part.part.name, part.best.tokens_per_s * r.iv.lo,
               part.best.tokens_per_s * r.iv.hi, r.iv.used.size(), r.iv.mean_distance,
               r.iv.calibrated ? "" : " (uncalibrated)", ids);
    if (!r.iv.calibrated) {
      fmt::print("      uncalibrated regime: {}\n",
                 calib::UncalibratedNote(r.points, r.query, r.iv));
    }
  }
  fmt::print("{:.4g} tokens/s, 80% interval {:.4g}-{:.4g} (every phase at its bound together){}\n",
             p.totals.tokens_per_s, p.totals.tokens_per_s * iv->lo, p.totals.tokens_per_s * iv->hi,
             iv->uncalibrated > 0 ? fmt::format("; {} of {} parts in an uncalibrated regime",
                                                iv->uncalibrated, p.parts.size())
                                  : "");
}

void PrintText(const Inputs& in, const spec::Recipe& recipe, const plan::RecipePlan& p) {
  fmt::print("pentamesh plan --recipe {}: {} on {} x {}, {} phases ({} parts), {} tokens\n",
             recipe.name, in.model.name, in.cluster.gpus(), in.cluster.name, recipe.phases.size(),
             p.parts.size(), Count(recipe.total_tokens()));
  fmt::print(
      "MFU conventions: 6N = 6 x active params per token, no attention (the case study's); full = "
      "with full attention FLOPs; causal = with causal attention FLOPs.\n"
      "A batch ramp is costed as sub-phases: the ramp at its token-weighted mean batch, then the "
      "steady rest.\n\n");
  fmt::print("  {:>2}  {:<16} {:>7} {:>6} {:>7} {:<8} {:<50} {:>9} {:>6} {:>6} {:>6} {:>7} {:>7}\n",
             "#", "phase", "tokens", "seq", "batch", "rope", "layout", "tokens/s", "6N", "full",
             "causal", "days", "w/fail");
  for (const plan::PartPlan& part : p.parts) {
    const cost::Estimate& e = part.best;
    const spec::Phase& ph = recipe.phases[part.part.phase];
    fmt::print(
        "  {:>2}  {:<16} {:>7} {:>6} {:>7} {:<8} {:<50} {:>9.4g} {:>5.1f}% {:>5.1f}% {:>5.1f}% "
        "{:>7.3f} {:>7.3f}\n",
        part.part.phase + 1, part.part.name, Count(part.part.train.total_tokens),
        part.part.train.seq_len, Count(static_cast<double>(part.part.train.global_batch_tokens)),
        spec::RopeScalingName(ph.rope.kind), spec::ShortLayout(e.layout), e.tokens_per_s,
        100 * e.mfu_6n, 100 * e.mfu, 100 * e.mfu_causal, e.days, part.goodput.days);
  }
  fmt::print("\nRoPE per phase (no FLOP or byte changes; recorded for the engine and export):\n");
  for (size_t i = 0; i < recipe.phases.size(); ++i) {
    fmt::print("  {:>2}  {:<16} {}, {}\n", i + 1, recipe.phases[i].train.name,
               RopeText(recipe.phases[i].rope),
               spec::PrecisionName(recipe.phases[i].train.precision));
  }
  fmt::print("\nlayout switches (checkpoint of the old layout, restart, read by the new one):\n");
  bool any = false;
  for (const plan::PartPlan& part : p.parts) {
    if (!part.reshard_in) continue;
    any = true;
    const cost::Reshard& r = *part.reshard_in;
    fmt::print(
        "  into {:<16} write {:.2f} TB {:.0f} s + restart {:.0f} s + read {:.2f} TB {:.0f} s = "
        "{:.0f} s\n",
        part.part.name, r.bytes_written / kTB, r.write_s, r.restart_s, r.bytes_read / kTB, r.read_s,
        r.seconds);
  }
  if (!any) fmt::print("  none: one layout throughout\n");
  fmt::print("\n");
  PrintTotals("per-phase layouts", p.totals);
  if (!p.single) {
    fmt::print(
        "single layout: none of the {} candidates (the phases' top layouts) fits every "
        "phase\n",
        p.single_candidates);
    PrintPhaseIntervals(in, p);
    return;
  }
  fmt::print("single layout for every phase (best of {} candidates): {}\n", p.single_candidates,
             spec::ShortLayout(p.single->parts.front().layout));
  PrintTotals("  single layout", p.single->totals);
  const double gap = p.single->totals.days - p.totals.days;
  if (gap > 0) {
    fmt::print("=> per-phase layouts finish {:.2f} days sooner, switches counted\n", gap);
  } else {
    fmt::print("=> the single layout finishes {:.2f} days sooner: switching does not pay\n", -gap);
  }
  PrintPhaseIntervals(in, p);
}

}  // namespace

int RunPlanRecipe(const RecipeRunArgs& a) {
  auto recipe = spec::LoadRecipe(a.recipe);
  if (!recipe.ok()) return Fail(recipe.status().message());
  auto in = LoadInputs(a.search, /*with_train=*/false);
  if (!in.ok()) return Fail(in.status().message());
  auto search = MakeSearchOptions(a.search, *in, a.top);
  if (!search.ok()) return Fail(search.status().message());
  auto goodput = MakeGoodputInputs(a.goodput, in->cluster);
  if (!goodput.ok()) return Fail(goodput.status().message());
  const plan::RecipeOptions options{.search = *search, .goodput = goodput->params};
  auto p = plan::PlanRecipe(in->model, in->cluster, *recipe, options);
  if (!p.ok()) return Fail(p.status().message());
  if (!p->no_fit.empty()) return FailNoFit("plan --recipe", p->no_fit, a.search.json);
  if (a.search.json) {
    PrintJson(*in, *recipe, *goodput, *p);
  } else {
    PrintText(*in, *recipe, *p);
  }
  return 0;
}

}  // namespace pentamesh::cli

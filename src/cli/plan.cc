// `pentamesh plan`: searches every 5D layout for a model on a cluster, prints the best K with
// their memory and time breakdowns, optionally the Pareto front, the FSDP baseline and an HTML
// report. Exits non-zero with the nearest miss when no layout fits. Every listed layout also gets
// its goodput under failures and checkpoints (cost/goodput.h, cli/goodput_flags.h); `--rank
// goodput` orders the search by tokens/s x goodput instead of tokens/s.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/goodput_flags.h"
#include "cli/launch_cli.h"
#include "cli/plan_common.h"
#include "cli/plan_recipe.h"
#include "plan/baseline.h"
#include "plan/scale.h"
#include "report/html.h"
#include "spec/load_toml.h"
#include "spec/validate.h"

namespace pentamesh::cli {
namespace {

constexpr double kGB = 1e9;

struct PlanArgs {
  SearchArgs search;
  std::string recipe;
  int top = 5;
  bool pareto = false;
  bool distinct = false;
  std::string baseline;
  std::string engine;
  std::string rank = "throughput";
  GoodputArgs goodput;
  EmitArgs emit;
};

// What the plan adds to each estimate it lists: its goodput under failures and checkpoints.
struct Failures {
  GoodputInputs inputs;
  const spec::ClusterSpec& cluster;
  plan::Rank rank;
  cost::Goodput Of(const cost::Estimate& e) const {
    return cost::EstimateGoodput(cluster, e, inputs.params);
  }
};

// The last column of the table: why a layout ranks below the best.
std::string RankGap(const Failures& f, const cost::Estimate& e, const cost::Estimate& best) {
  if (f.rank == plan::Rank::kGoodput && e.time.step < best.time.step) {
    return fmt::format("faster step, goodput {:.1f}% vs {:.1f}%", 100 * f.Of(e).goodput,
                       100 * f.Of(best).goodput);
  }
  return plan::ExplainGap(e, best);
}

void PrintBreakdown(const cost::Estimate& e) {
  const cost::Memory& m = e.memory;
  const cost::Time& t = e.time;
  fmt::print("  memory GB");
  for (const cost::MemoryCategory& c : cost::kMemoryCategories) {
    fmt::print("  {} {:.2f}", c.label, m.*c.field / kGB);
  }
  fmt::print("\n             total {:.2f} of capacity {:.2f}\n", m.total / kGB, m.capacity / kGB);
  fmt::print(
      "  time s     compute {:.4f}  tp {:.4f}  cp {:.4f}  ep {:.4f}  pp {:.4f}  dp {:.4f}  "
      "bubble {:.4f}  optimizer {:.4f}  step {:.4f}\n",
      t.compute, t.tp, t.cp, t.ep, t.pp, t.dp, t.bubble, t.optimizer, t.step);
  fmt::print(
      "  {:.0f} tokens/s  MFU {:.1f}% (causal-half {:.1f}%)  HFU {:.1f}%  bubble {:.1f}%  "
      "micro-batches {}  {:.1f} days  USD {:.4g}\n",
      e.tokens_per_s, 100 * e.mfu, 100 * e.mfu_causal, 100 * e.hfu, 100 * e.bubble_fraction,
      e.microbatches, e.days, e.cost_usd);
}

// The commonest reasons layouts did not fit (pruned or costed), most frequent first.
void PrintReasons(const plan::Counts& c) {
  std::vector<std::pair<int64_t, size_t>> sorted;
  for (size_t i = 0; i < plan::kReasonCount; ++i) {
    if (c.reasons[i] > 0) sorted.emplace_back(c.reasons[i], i);
  }
  std::sort(sorted.rbegin(), sorted.rend());
  for (size_t i = 0; i < sorted.size() && i < 4; ++i) {
    fmt::print("  {:>9} did not fit: {}\n", sorted[i].first,
               plan::Describe(static_cast<plan::Reason>(sorted[i].second)));
  }
}

void PrintTable(const std::vector<cost::Estimate>& list, const cost::Estimate& best,
                const Failures& failures) {
  fmt::print("  {:>3}  {:<46} {:>7} {:>8} {:>11} {:>6} {:>7} {:>6} {:>8}  {}\n", "#", "layout",
             "mem GB", "step s", "tokens/s", "MFU", "bubble", "days", "w/ fail", "vs best");
  for (size_t i = 0; i < list.size(); ++i) {
    const cost::Estimate& e = list[i];
    fmt::print(
        "  {:>3}  {:<46} {:>7.1f} {:>8.3f} {:>11.0f} {:>5.1f}% {:>6.1f}% {:>6.1f} {:>8.1f}  {}\n",
        i + 1, spec::ShortLayout(e.layout), e.memory.total / kGB, e.time.step, e.tokens_per_s,
        100 * e.mfu, 100 * e.bubble_fraction, e.days, failures.Of(e).days,
        &e == &best || e.layout == best.layout ? "best" : RankGap(failures, e, best));
  }
}

void PrintBaseline(const plan::BaselineComparison& b) {
  auto seq = [&](int64_t s) {
    return s == 0 ? std::string("none") : fmt::format("{}{}", s, s >= b.seq_len_cap ? "+" : "");
  };
  fmt::print("\nFSDP baseline (ZeRO-3, dp = GPUs) vs best:\n");
  fmt::print("  {:<44} {:>16} {:>16}\n", "", "FSDP", "best");
  auto row = [](const std::string& name, const std::string& a, const std::string& c) {
    fmt::print("  {:<44} {:>16} {:>16}\n", name, a, c);
  };
  const cost::Estimate& f = b.fsdp;
  const cost::Estimate& o = b.best;
  auto gb = [](double bytes) { return fmt::format("{:.2f} GB", bytes / kGB); };
  row("memory: weights + grads + optimizer",
      gb(f.memory.weights + f.memory.grads + f.memory.optimizer),
      gb(o.memory.weights + o.memory.grads + o.memory.optimizer));
  row("memory: activations + scores + logits",
      gb(f.memory.activations + f.memory.attention_scores + f.memory.logits),
      gb(o.memory.activations + o.memory.attention_scores + o.memory.logits));
  row("memory: comm + framework + fragmentation",
      gb(f.memory.comm_buffers + f.memory.framework + f.memory.fragmentation),
      gb(o.memory.comm_buffers + o.memory.framework + o.memory.fragmentation));
  row("memory: total", gb(f.memory.total), gb(o.memory.total));
  row("runs at the requested sequence and batch", f.fits ? "yes" : "no", "yes");
  row("longest sequence held (mbs 1, full recompute)", seq(b.fsdp_max_seq_len),
      seq(b.best_max_seq_len));
  for (const auto& v : f.violations) fmt::print("    FSDP: {}\n", v);
  const cost::Estimate* ref = f.fits ? &f : (b.fsdp_runnable ? &*b.fsdp_runnable : nullptr);
  if (ref == nullptr) {
    fmt::print("  FSDP cannot run at any sequence of 512 tokens or more\n");
    return;
  }
  const std::string at = f.fits ? "" : fmt::format(" (FSDP at seq {})", b.fsdp_runnable_seq_len);
  row("MFU" + at, fmt::format("{:.1f}%", 100 * ref->mfu), fmt::format("{:.1f}%", 100 * o.mfu));
  row("tokens/s" + at, fmt::format("{:.0f}", ref->tokens_per_s),
      fmt::format("{:.0f}", o.tokens_per_s));
  const std::string work = b.fsdp_priced_at_equal_work ? " (same work at FSDP's MFU)" : "";
  row("days" + work, fmt::format("{:.1f}", b.fsdp_days), fmt::format("{:.1f}", o.days));
  row("cost USD" + work, fmt::format("{:.4g}", b.fsdp_usd), fmt::format("{:.4g}", o.cost_usd));
  fmt::print("  saved by the best layout: {:.1f} days, USD {:.4g}\n", b.days_saved, b.usd_saved);
}

nlohmann::json BaselineJson(const plan::BaselineComparison& b) {
  nlohmann::json j = {{"fsdp", EstimateJson(b.fsdp)},
                      {"best", EstimateJson(b.best)},
                      {"fsdp_max_seq_len", b.fsdp_max_seq_len},
                      {"best_max_seq_len", b.best_max_seq_len},
                      {"seq_len_cap", b.seq_len_cap},
                      {"fsdp_days", b.fsdp_days},
                      {"fsdp_usd", b.fsdp_usd},
                      {"fsdp_priced_at_equal_work", b.fsdp_priced_at_equal_work},
                      {"days_saved", b.days_saved},
                      {"usd_saved", b.usd_saved}};
  if (b.fsdp_runnable) {
    j["fsdp_runnable"] = EstimateJson(*b.fsdp_runnable);
    j["fsdp_runnable_seq_len"] = b.fsdp_runnable_seq_len;
  }
  return j;
}

// The HTML page of a plan: the search, the FSDP comparison, scaling over GPUs/8 .. GPUs, and the
// seeds' sweep grid.
core::Status WritePlanHtml(const PlanArgs& a, const Inputs& in, const plan::SearchOptions& options,
                           const plan::SearchResult& result,
                           const plan::BaselineComparison& baseline, const Failures& failures) {
  report::PlanReport r{.model = in.model.name,
                       .cluster = in.cluster.name,
                       .train = in.train.name,
                       .gpus = in.cluster.gpus(),
                       .top = result.top,
                       .counts = result.counts,
                       .search_seconds = result.seconds,
                       .baseline = baseline,
                       .scale = {},
                       .sweep = std::nullopt,
                       .goodput = {}};
  for (const cost::Estimate& e : result.top) r.goodput.push_back(failures.Of(e));
  std::vector<int64_t> counts;
  for (int64_t div : {8, 4, 2, 1}) {
    const int64_t g = in.cluster.gpus() / div;
    if (g >= in.cluster.gpus_per_node && g % in.cluster.gpus_per_node == 0) counts.push_back(g);
  }
  PM_ASSIGN_OR_RETURN(r.scale, plan::Scale(in.model, in.cluster, in.train, counts, options));
  PM_ASSIGN_OR_RETURN(spec::TrainSpec sweep_train, spec::LoadTrain(kSweepTrain));
  sweep_train.global_batch_tokens = kSweepBatchTokens;
  PM_ASSIGN_OR_RETURN(auto nodes, ParseIntList("--nodes", kSweepNodes, spec::kMaxGpus));
  PM_ASSIGN_OR_RETURN(r.sweep, RunSweep(kSweepModels, in.cluster, sweep_train, nodes, options));
  return report::WriteHtml(r, a.search.html);
}

// The config of --baseline FILE costed on the plan's model, cluster and batch (the file's own
// model and batch must agree with them, so the comparison is like for like).
core::Result<cost::Estimate> ImportedBaseline(const std::string& file, const Inputs& in,
                                              std::optional<launch::Engine> engine) {
  if (!std::filesystem::exists(file)) {
    return core::Status::Error(fmt::format(
        "--baseline: '{}' is not a known baseline (known: fsdp) nor an engine config file", file));
  }
  launch::ImportOptions o;
  o.gpus = in.cluster.gpus();
  o.seq_len = in.train.seq_len;
  if (engine) o.engine = *engine;
  PM_ASSIGN_OR_RETURN(launch::Imported im, launch::ImportConfig(file, o));
  if (im.gpus && *im.gpus != in.cluster.gpus()) {
    return core::Status::Error(fmt::format("--baseline {}: runs on {} GPUs, the plan on {}", file,
                                           *im.gpus, in.cluster.gpus()));
  }
  const spec::ModelSpec& m = im.model;
  if (m.layers != in.model.layers || m.hidden != in.model.hidden || m.heads != in.model.heads ||
      m.kv_heads != in.model.kv_heads || m.ffn_hidden != in.model.ffn_hidden ||
      m.vocab != in.model.vocab || m.moe.experts != in.model.moe.experts ||
      m.mla.kv_lora_rank != in.model.mla.kv_lora_rank ||
      m.sliding_window != in.model.sliding_window) {
    return core::Status::Error(fmt::format(
        "--baseline {}: its model ({} layers, hidden {}, {} heads, vocab {}, {} experts) is not "
        "--model {} ({} layers, hidden {}, {} heads, vocab {}, {} experts)",
        file, m.layers, m.hidden, m.heads, m.vocab, m.moe.experts, in.model.name, in.model.layers,
        in.model.hidden, in.model.heads, in.model.vocab, in.model.moe.experts));
  }
  if (im.train.seq_len != in.train.seq_len ||
      im.train.global_batch_tokens != in.train.global_batch_tokens) {
    return core::Status::Error(fmt::format(
        "--baseline {}: sequence {} and {} tokens per step differ from --train's {} and {}", file,
        im.train.seq_len, im.train.global_batch_tokens, in.train.seq_len,
        in.train.global_batch_tokens));
  }
  const std::vector<std::string> invalid =
      spec::Validate(in.model, in.cluster, in.train, im.layout);
  if (!invalid.empty()) {
    return core::Status::Error(
        fmt::format("--baseline {}: its layout is not valid for --model: {}", file, invalid[0]));
  }
  cost::CostParams params = in.params;
  launch::CostAsImported(im, params);
  return cost::EstimateLayout(in.model, in.cluster, in.train, im.layout, params);
}

void PrintFileBaseline(const std::string& file, const cost::Estimate& b,
                       const cost::Estimate& best) {
  fmt::print("\nbaseline {} vs best:\n", file);
  fmt::print("  {:<10} {}\n  {:<10} {}\n", "baseline", spec::FormatLayout(b.layout), "best",
             spec::FormatLayout(best.layout));
  fmt::print("  {:<28} {:>14} {:>14}\n", "", "baseline", "best");
  fmt::print("  {:<28} {:>11.2f} GB {:>11.2f} GB\n", "memory per GPU", b.memory.total / kGB,
             best.memory.total / kGB);
  fmt::print("  {:<28} {:>14} {:>14}\n", "fits", b.fits ? "yes" : "no", "yes");
  fmt::print("  {:<28} {:>12.3f} s {:>12.3f} s\n", "step time", b.time.step, best.time.step);
  fmt::print("  {:<28} {:>14.0f} {:>14.0f}\n", "tokens/s", b.tokens_per_s, best.tokens_per_s);
  fmt::print("  {:<28} {:>13.1f}% {:>13.1f}%\n", "MFU", 100 * b.mfu, 100 * best.mfu);
  fmt::print("  {:<28} {:>14.1f} {:>14.1f}\n", "days", b.days, best.days);
  for (const auto& v : b.violations) fmt::print("    baseline: {}\n", v);
  if (b.fits && b.tokens_per_s > 0) {
    fmt::print("  the best layout is {:.2f}x the baseline's throughput\n",
               best.tokens_per_s / b.tokens_per_s);
  }
}

int EmitBest(const PlanArgs& a, const Inputs& in, const cost::Estimate& best,
             const launch::StackChoice& stack) {
  return EmitAndWrite(a.emit,
                      launch::EmitInput{.model = in.model,
                                        .cluster = in.cluster,
                                        .train = in.train,
                                        .layout = best.layout,
                                        .estimate = best,
                                        .command = CommandLine(),
                                        .stack = stack,
                                        .ep_dispatch_per_node = in.params.ep_dispatch_per_node,
                                        .ep_overlap = in.params.ep_overlap > 0});
}

// --engine (or --emit's engine); none when neither names one.
core::Result<std::optional<launch::Engine>> NamedEngine(const PlanArgs& a) {
  std::string engine_name = a.engine.empty() ? a.emit.engine : a.engine;
  if (!a.engine.empty() && !a.emit.engine.empty() && a.engine != a.emit.engine) {
    return core::Status::Error(
        fmt::format("--engine {} and --emit {} name different engines", a.engine, a.emit.engine));
  }
  if (engine_name.empty()) return std::optional<launch::Engine>();
  PM_ASSIGN_OR_RETURN(const launch::Engine engine, launch::ParseEngine("--engine", engine_name));
  return std::optional<launch::Engine>(engine);
}

// Restricts the search space to what the engine can run; refuses a model it runs no layout of.
core::Status RestrictToEngine(launch::Engine engine, const Inputs& in,
                              plan::SearchOptions& options) {
  // Rules about the model alone: the engine runs no layout of it.
  const auto model_rules = launch::Violations(engine, in.model, spec::Layout{});
  if (!model_rules.empty()) {
    return core::Status::Error(launch::DescribeViolations(engine, model_rules));
  }
  launch::RestrictToEngine(engine, in.model, options.space.allow);
  return core::Status::Ok();
}

// What a plan compares its best layout with: a --baseline FILE costed on the plan's inputs, or
// the FSDP comparison (for --baseline fsdp and for the HTML report).
struct PlanBaselines {
  std::optional<cost::Estimate> file;
  std::optional<plan::BaselineComparison> fsdp;
};

void PrintPlanJson(const PlanArgs& a, const Inputs& in, const plan::SearchResult& result,
                   const PlanBaselines& baselines, const Failures& failures) {
  const cost::Estimate& best = result.top.front();
  nlohmann::json j = {{"model", in.model.name},
                      {"cluster", in.cluster.name},
                      {"train", in.train.name},
                      {"gpus", in.cluster.gpus()},
                      {"seconds", result.seconds},
                      {"counts", CountsJson(result.counts)},
                      {"top", nlohmann::json::array()},
                      {"stack", in.stack.name},
                      {"interval", IntervalJson(in, in.train, best.tokens_per_s)},
                      {"rank", a.rank},
                      {"goodput_inputs", GoodputInputsJson(failures.inputs)}};
  for (const auto& e : result.top) {
    j["top"].push_back(EstimateJson(e));
    j["top"].back()["goodput"] = GoodputJson(failures.Of(e));
  }
  if (a.pareto) {
    j["pareto"] = nlohmann::json::array();
    for (const auto& e : result.pareto) j["pareto"].push_back(EstimateJson(e));
  }
  if (baselines.file) {
    j["baseline_file"] = EstimateJson(*baselines.file);
  } else if (!a.baseline.empty()) {
    j["baseline"] = BaselineJson(*baselines.fsdp);
  }
  fmt::print("{}\n", j.dump(2));
}

void PrintPlanText(const PlanArgs& a, const Inputs& in, const plan::SearchResult& result,
                   const PlanBaselines& baselines, const Failures& failures) {
  const cost::Estimate& best = result.top.front();
  const plan::Counts& c = result.counts;
  fmt::print("pentamesh plan: {} on {} x {} ({}: seq {}, {} tokens/step)\n", in.model.name,
             in.cluster.gpus(), in.cluster.name, in.train.name, in.train.seq_len,
             in.train.global_batch_tokens);
  fmt::print(
      "space: {} layouts; costed {} ({} fit, {} did not); pruned {}; {:.3f} s "
      "({:.2f}M layouts/s)\n",
      c.space, c.evaluated, c.fit, c.did_not_fit, c.pruned, result.seconds,
      static_cast<double>(c.space) / std::max(result.seconds, 1e-9) / 1e6);
  PrintReasons(c);
  fmt::print("\nbest: {}\n", spec::FormatLayout(best.layout));
  PrintBreakdown(best);
  for (const std::string& line : IntervalLines(in, in.train, best.tokens_per_s)) {
    fmt::print("  {}\n", line);
  }
  PrintGoodput(failures.inputs, best, failures.Of(best), "  ");
  fmt::print("\ntop {}{}:\n", result.top.size(),
             failures.rank == plan::Rank::kGoodput ? ", by tokens/s x goodput" : "");
  PrintTable(result.top, best, failures);
  if (a.pareto) {
    fmt::print("\nPareto front (no other layout is both faster and smaller), {} layouts:\n",
               result.pareto.size());
    PrintTable(result.pareto, best, failures);
  }
  if (baselines.file) {
    PrintFileBaseline(a.baseline, *baselines.file, best);
  } else if (baselines.fsdp && !a.baseline.empty()) {
    PrintBaseline(*baselines.fsdp);
  }
  if (!a.search.html.empty()) fmt::print("\nreport: {}\n", a.search.html);
}

// --recipe: the plan per phase (cli/plan_recipe.cc). The single-run options do not apply.
int RunRecipe(const PlanArgs& a) {
  if (!a.search.train.empty()) return Fail("--recipe and --train: give one of them");
  const std::vector<std::pair<bool, const char*>> single_run = {
      {a.pareto, "--pareto"},
      {!a.baseline.empty(), "--baseline"},
      {!a.engine.empty(), "--engine"},
      {!a.emit.engine.empty() || !a.emit.out.empty(), "--emit/--out"},
      {!a.search.html.empty(), "--html"},
      {a.rank != "throughput", "--rank"},
      {a.distinct, "--distinct"}};
  for (const auto& [given, flag] : single_run) {
    if (given) return Fail(fmt::format("{} is not supported with --recipe", flag));
  }
  return RunPlanRecipe(
      RecipeRunArgs{.search = a.search, .recipe = a.recipe, .top = a.top, .goodput = a.goodput});
}

int RunPlan(const PlanArgs& a) {
  if (!a.recipe.empty()) return RunRecipe(a);
  if (a.search.train.empty()) return Fail("plan: give --train (one run) or --recipe (phases)");
  if (const core::Status s = CheckEmitArgs(a.emit); !s.ok()) return Fail(s.message());
  auto engine = NamedEngine(a);
  if (!engine.ok()) return Fail(engine.status().message());
  // The engine's stack profile chooses and costs the layouts unless --stack names another.
  SearchArgs search = a.search;
  const launch::StackChoice stack = StackFor(a.search.stack, *engine);
  search.stack = stack.profile;
  auto in = LoadInputs(search);
  if (!in.ok()) return Fail(in.status().message());
  auto options = MakeSearchOptions(a.search, *in, a.top);
  if (!options.ok()) return Fail(options.status().message());
  options->pareto = a.pareto;
  options->one_per_mesh = a.distinct;
  auto goodput = MakeGoodputInputs(a.goodput, in->cluster);
  if (!goodput.ok()) return Fail(goodput.status().message());
  options->goodput = goodput->params;
  options->rank = a.rank == "goodput" ? plan::Rank::kGoodput : plan::Rank::kThroughput;
  const Failures failures{*goodput, in->cluster, options->rank};
  if (*engine) {
    if (const core::Status s = RestrictToEngine(**engine, *in, *options); !s.ok()) {
      return Fail(s.message());
    }
  }
  // --baseline FILE: an engine config the user runs today, imported and costed on these inputs.
  PlanBaselines baselines;
  if (!a.baseline.empty() && a.baseline != "fsdp") {
    auto b = ImportedBaseline(a.baseline, *in, *engine);
    if (!b.ok()) return Fail(b.status().message());
    baselines.file = std::move(*b);
  }
  auto result = plan::Search(in->model, in->cluster, in->train, *options);
  if (!result.ok()) return Fail(result.status().message());
  if (result->top.empty()) {
    return FailNoFit("plan",
                     plan::ExplainNoFit(in->model, in->cluster, in->train, *options, *result),
                     a.search.json, result->nearest_miss ? &*result->nearest_miss : nullptr);
  }
  const cost::Estimate& best = result->top.front();
  if ((!a.baseline.empty() && !baselines.file) || !a.search.html.empty()) {
    auto b = plan::CompareWithFsdp(in->model, in->cluster, in->train, best, *options);
    if (!b.ok()) return Fail(b.status().message());
    baselines.fsdp = std::move(*b);
  }
  if (!a.search.html.empty()) {
    auto status = WritePlanHtml(a, *in, *options, *result, *baselines.fsdp, failures);
    if (!status.ok()) return Fail(status.message());
  }
  if (a.search.json) {
    PrintPlanJson(a, *in, *result, baselines, failures);
  } else {
    PrintPlanText(a, *in, *result, baselines, failures);
  }
  return EmitBest(a, *in, best, stack);
}

}  // namespace

RunFn AddPlanCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("plan", "Search every 5D layout and rank those that fit");
  auto args = std::make_shared<PlanArgs>();
  AddSearchOptions(*sub, args->search, /*with_model=*/true);
  sub->add_option("--train", args->search.train, "train preset or TOML file");
  sub->add_option("--recipe", args->recipe,
                  "plan each phase of a recipe (preset or TOML file) instead of one --train run");
  sub->add_option("--top", args->top, "how many layouts to list")
      ->capture_default_str()
      ->transform(IntIn(1, 100000));
  sub->add_flag("--pareto", args->pareto, "also list the step-time / memory Pareto front");
  sub->add_option("--baseline", args->baseline,
                  "compare with a baseline: fsdp, or an engine config file (import-config)");
  sub->add_option("--engine", args->engine,
                  "search only layouts this engine can run: megatron, torchtitan, deepspeed");
  sub->add_option("--rank", args->rank,
                  "order layouts by throughput (tokens/s) or goodput (tokens/s x goodput under "
                  "failures and checkpoints)")
      ->capture_default_str()
      ->check(CLI::IsMember({"throughput", "goodput"}));
  AddGoodputOptions(*sub, args->goodput);
  AddEmitOptions(*sub, args->emit);
  sub->add_flag("--distinct", args->distinct,
                "list only the best layout of each mesh (dp, tp, pp, cp, ep, placement)");
  return [args]() { return RunPlan(*args); };
}

}  // namespace pentamesh::cli

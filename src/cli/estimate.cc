// `pentamesh estimate`: costs one layout of one model on one cluster with the cost model and
// prints memory by component, step-time terms, MFU/HFU, throughput, days and cost (table or JSON).
// A layout breaking a rule exits 2 naming it; when the only broken rule is "tp must divide
// gpus_per_node", it also prints what the layout would cost with TP across nodes
// (cost::EstimateTpAcrossNodes; JSON "tp_across_nodes"). A layout that runs also gets its goodput
// under failures and checkpoints (cost/goodput.h; the flags of cli/goodput_flags.h, JSON
// "goodput" with the inputs and which of them are defaults).
// Invariant: thin: parse, call cost::EstimateLayout, print; no formula lives here.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/flags.h"
#include "cli/goodput_flags.h"
#include "cli/launch_cli.h"
#include "cli/plan_common.h"
#include "cost/cost.h"
#include "cost/goodput.h"
#include "spec/load_toml.h"

namespace pentamesh::cli {
namespace {

struct EstimateArgs {
  std::string model, cluster, train, layout;
  std::optional<int64_t> gpus;  // --gpus: overrides the cluster's count
  bool json = false;
  bool materialize_scores = false;
  double moe_imbalance = 1.0;
  std::string stack;  // empty: --emit's engine's profile, else calib::kDefaultStack
  GoodputArgs goodput;
  EmitArgs emit;
};

nlohmann::json ToJson(const cost::Context& ctx, const cost::Estimate& e,
                      const std::vector<std::string>& warnings) {
  const cost::ParamCounts& c = ctx.counts();
  nlohmann::json j = EstimateJson(e);
  j["warnings"] = warnings;
  j["params"] = {{"total", c.total},
                 {"active", c.active},
                 {"expert", c.expert()},
                 {"non_expert", c.non_expert()}};
  j["stages"] = StagesJson(ctx, e.layout);
  j["flops_per_token"] = {{"model", ctx.flops_none.model},
                          {"model_causal", ctx.flops_none.model_causal}};
  return j;
}

void PrintTable(const cost::Context& ctx, const cost::Estimate& e,
                const std::vector<std::string>& warnings) {
  const cost::ParamCounts& c = ctx.counts();
  for (const auto& w : warnings) fmt::print("WARNING: {}\n", w);
  fmt::print(
      "model {}: {:.1f}B params ({:.1f}B active, {:.1f}B in experts); cluster {} x {}; "
      "train {} (seq {}, {} tokens/step)\n",
      ctx.model().name, c.total / 1e9, c.active / 1e9, c.expert() / 1e9, ctx.cluster().gpus(),
      ctx.cluster().gpu, ctx.train().name, ctx.train().seq_len, ctx.train().global_batch_tokens);
  fmt::print("layout: {}\n", spec::FormatLayout(e.layout));
  if (e.microbatches == 0 && !e.violations.empty()) {
    fmt::print("fits: no\n");
    for (const auto& v : e.violations) fmt::print("  violation: {}\n", v);
    return;
  }
  const cost::Memory& m = e.memory;
  fmt::print("\nmemory per GPU, pp stage {} (GB)\n", e.memory_stage);
  const auto mem_rows = m.components();
  for (const auto& [name, bytes] : mem_rows) fmt::print("  {:<18}{:>10.2f}\n", name, bytes / 1e9);
  fmt::print("  {:<18}{:>10.2f}  of capacity {:.2f} ({:.0f}%)\n", "total", m.total / 1e9,
             m.capacity / 1e9, 100.0 * m.total / m.capacity);
  const cost::Time& t = e.time;
  fmt::print("\nstep time (s), {} micro-batches, critical pp stage {}\n", e.microbatches,
             e.critical_stage);
  for (const cost::TimeTerm& term : cost::kTimeTerms) {
    const double s = t.*term.field;
    fmt::print("  {:<18}{:>10.3f}  {:>5.1f}%\n", term.name, s, 100.0 * s / t.step);
  }
  fmt::print("  {:<18}{:>10.3f}\n", "step", t.step);
  fmt::print(
      "\nMFU {:.1f}% (causal-half attention: {:.1f}%), HFU {:.1f}%, {:.0f} TFLOP/s per GPU\n",
      100 * e.mfu, 100 * e.mfu_causal, 100 * e.hfu, e.mfu * ctx.cluster().peak_tflops);
  fmt::print("tokens/s {:.4g}; {:.1f} days for {:.3g} tokens; cost USD {:.4g}\n", e.tokens_per_s,
             e.days, ctx.train().total_tokens, e.cost_usd);
  fmt::print("fits: {}\n", e.fits ? "yes" : "no");
  for (const auto& v : e.violations) fmt::print("  violation: {}\n", v);
}

// The cost of the refused layout with its tp group spanning nodes (not a valid layout).
void PrintTpAcrossNodes(const cost::Context& ctx, const cost::Estimate& e) {
  const int64_t gpn = ctx.cluster().gpus_per_node;
  fmt::print(
      "\nwhat the rule prevents: tp={} across {} nodes of {} GPUs (TP collectives on the "
      "inter-node link, {} GB/s x {} NICs per node):\n",
      e.layout.tp, (e.layout.tp + gpn - 1) / gpn, gpn, ctx.cluster().inter_node_gbps,
      ctx.cluster().nics_per_node);
  const cost::Time& t = e.time;
  fmt::print("  tp term {:.4g} s of a {:.4g} s step ({:.1f}%); MFU {:.1f}%\n", t.tp, t.step,
             100.0 * t.tp / t.step, 100.0 * e.mfu);
}

int RunEstimate(const EstimateArgs& a) {
  if (const core::Status s = CheckEmitArgs(a.emit); !s.ok()) return Fail(s.message());
  Inputs in;
  auto model = spec::LoadModel(a.model);
  if (!model.ok()) return Fail(fmt::format("--model: {}", model.status().message()));
  in.model = *model;
  auto cluster = spec::LoadCluster(a.cluster, a.gpus);
  if (!cluster.ok()) return Fail(fmt::format("--cluster: {}", cluster.status().message()));
  in.cluster = *cluster;
  auto train = spec::LoadTrain(a.train);
  if (!train.ok()) return Fail(fmt::format("--train: {}", train.status().message()));
  in.train = *train;
  auto layout = spec::ParseLayout(a.layout);
  if (!layout.ok()) return Fail(fmt::format("--layout: {}", layout.status().message()));
  // With --emit, the engine's stack profile unless --stack names another (docs/launch.md).
  std::optional<launch::Engine> engine;
  if (!a.emit.engine.empty()) {
    auto parsed = launch::ParseEngine("--emit", a.emit.engine);
    if (!parsed.ok()) return Fail(parsed.status().message());
    engine = *parsed;
  }
  const launch::StackChoice stack = StackFor(a.stack, engine);
  if (const core::Status s = ApplyStack(stack.profile, in); !s.ok()) return Fail(s.message());
  cost::CostParams params = in.params;
  params.materialize_scores = params.materialize_scores || a.materialize_scores;
  params.moe_imbalance = a.moe_imbalance;
  auto goodput_in = MakeGoodputInputs(a.goodput, in.cluster);
  if (!goodput_in.ok()) return Fail(goodput_in.status().message());
  const cost::Context ctx(in.model, in.cluster, in.train, params);
  const cost::Estimate e = cost::EstimateLayout(ctx, *layout, /*explain=*/true);
  const std::vector<std::string> warnings = cost::CheckStatedParams(*model);
  const bool structural = e.microbatches == 0 && !e.violations.empty();
  // Refused only for TP leaving a node: what that would cost (cost::EstimateTpAcrossNodes).
  const std::optional<cost::Estimate> across =
      structural ? cost::EstimateTpAcrossNodes(ctx, *layout) : std::nullopt;
  // Days with failures: only for a layout that runs (fits, so it has days).
  const std::optional<cost::Goodput> goodput =
      e.fits ? std::optional(cost::EstimateGoodput(in.cluster, e, goodput_in->params))
             : std::nullopt;
  if (a.json) {
    nlohmann::json j = ToJson(ctx, e, warnings);
    j["stack"] = in.stack.name;
    if (!structural) j["interval"] = IntervalJson(in, in.train, e.tokens_per_s);
    if (goodput) {
      j["goodput"] = GoodputJson(*goodput);
      j["goodput"]["inputs"] = GoodputInputsJson(*goodput_in);
    }
    if (across) j["tp_across_nodes"] = EstimateJson(*across);
    fmt::print("{}\n", j.dump(2));
  } else {
    PrintTable(ctx, e, warnings);
    if (!structural) {
      const std::vector<std::string> lines = IntervalLines(in, in.train, e.tokens_per_s);
      fmt::print("stack {}: {}\n", in.stack.name, lines.front());
      for (size_t i = 1; i < lines.size(); ++i) fmt::print("{}\n", lines[i]);
    }
    if (goodput) {
      fmt::print("\n");
      PrintGoodput(*goodput_in, e, *goodput, "");
    }
    if (across) PrintTpAcrossNodes(ctx, *across);
  }
  if (structural) {
    for (const auto& v : e.violations) std::fprintf(stderr, "pentamesh: error: %s\n", v.c_str());
    return 2;
  }
  return EmitAndWrite(a.emit, launch::EmitInput{.model = *model,
                                                .cluster = *cluster,
                                                .train = *train,
                                                .layout = *layout,
                                                .estimate = e,
                                                .command = CommandLine(),
                                                .stack = stack,
                                                .ep_dispatch_per_node = params.ep_dispatch_per_node,
                                                .ep_overlap = params.ep_overlap > 0});
}

}  // namespace

RunFn AddEstimateCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("estimate", "Cost one layout: memory, step time, MFU, cost");
  auto args = std::make_shared<EstimateArgs>();
  sub->add_option("--model", args->model, "model preset or TOML file")->required();
  sub->add_option("--cluster", args->cluster, "cluster preset or TOML file")->required();
  sub->add_option("--gpus", args->gpus, "GPU count (nodes = gpus / gpus_per_node)")
      ->transform(IntIn(1, spec::kMaxGpus));
  sub->add_option("--train", args->train, "train preset or TOML file")->required();
  sub->add_option("--layout", args->layout,
                  "\"dp=.. tp=.. pp=.. cp=.. ep=.. zero=.. mbs=.. recompute=.. schedule=..\"")
      ->required();
  sub->add_flag("--json", args->json, "print JSON instead of a table");
  sub->add_flag("--materialize-scores", args->materialize_scores,
                "attention without flash: keep the s x s scores");
  sub->add_option("--moe-imbalance", args->moe_imbalance,
                  "worst EP rank's tokens / mean (default 1.0)")
      ->check(NumberIn(1, spec::kMaxMoeImbalance));
  sub->add_option("--stack", args->stack,
                  "software stack profile (megatron, torchtitan, maxtext, llm-foundry, deepspeed) "
                  "or a profile TOML from `pentamesh calibrate` (default: the engine's of --emit, "
                  "else megatron)");
  AddGoodputOptions(*sub, args->goodput);
  AddEmitOptions(*sub, args->emit);
  return [args]() { return RunEstimate(*args); };
}

}  // namespace pentamesh::cli

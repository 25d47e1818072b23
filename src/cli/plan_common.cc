#include "cli/plan_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>

#include "calib/fit.h"
#include "calib/regime_interval.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "spec/load_toml.h"

namespace pentamesh::cli {

void AddSearchOptions(CLI::App& sub, SearchArgs& a, bool with_model) {
  if (with_model) sub.add_option("--model", a.model, "model preset or TOML file")->required();
  sub.add_option("--cluster", a.cluster, "cluster preset or TOML file")->capture_default_str();
  sub.add_option("--gpus", a.gpus, "GPU count (nodes = GPUs / gpus_per_node)")
      ->transform(IntIn(1, spec::kMaxGpus));
  sub.add_option("--allow", a.allow, "constraints, e.g. \"tp<=8 pp>=2 schedule=1f1b|zb\"");
  sub.add_option("--threads", a.threads, "search threads (0 = all cores)")
      ->transform(IntIn(0, kMaxThreads));
  sub.add_option("--mbs-max", a.mbs_max, "largest micro-batch size tried (0 = all divisors)")
      ->transform(IntIn(0));
  sub.add_flag("--no-gpipe", a.no_gpipe, "leave GPipe out of the schedules searched");
  sub.add_flag("--json", a.json, "machine-readable output");
  sub.add_option("--html", a.html, "write a self-contained HTML report to this file")
      ->check(OutputFile());
  sub.add_option("--stack", a.stack,
                 "software stack profile (megatron, torchtitan, maxtext, llm-foundry, deepspeed) "
                 "or a profile TOML from `pentamesh calibrate` (default: the engine's of --emit "
                 "or --engine, else megatron)");
}

core::Status ApplyStack(const std::string& stack, Inputs& in) {
  auto profile = calib::LoadProfile(stack);
  if (!profile.ok()) return profile.status();
  in.stack = *profile;
  const std::vector<std::string> shipped = calib::StackNames();
  in.shipped_stack = std::find(shipped.begin(), shipped.end(), stack) != shipped.end();
  in.params = cost::CostParams{};
  calib::ApplyProfile(in.stack, in.cluster, in.params);
  return core::Status::Ok();
}

std::optional<RegimeLookup> LookUpRegime(const Inputs& in, const spec::TrainSpec& train) {
  if (!in.shipped_stack) return std::nullopt;
  auto points = calib::ShippedPoints();
  if (!points.ok()) return std::nullopt;
  RegimeLookup r{
      std::move(*points), calib::RegimeOf(in.model, in.cluster, train, in.stack.stack), {}};
  r.iv = calib::IntervalNear(r.points, r.query);
  return r;
}

namespace {

std::string StackWideText(const Inputs& in, double tokens_per_s) {
  const calib::Interval* iv = calib::IntervalFor(in.stack, in.cluster.name);
  if (iv == nullptr) {
    return fmt::format("no calibration covers stack {} on {}: no interval", in.stack.name,
                       in.cluster.name);
  }
  return fmt::format("80% interval {:.4g}-{:.4g} from {} runs ({} on {})", tokens_per_s * iv->lo,
                     tokens_per_s * iv->hi, iv->runs, in.stack.name,
                     calib::GpuClass(in.cluster.name));
}

}  // namespace

std::vector<std::string> IntervalLines(const Inputs& in, const spec::TrainSpec& train,
                                       double tokens_per_s) {
  const std::optional<RegimeLookup> r = LookUpRegime(in, train);
  if (!r)
    return {fmt::format("{:.4g} tokens/s ({})", tokens_per_s, StackWideText(in, tokens_per_s))};
  const calib::RegimeInterval& iv = r->iv;
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "{:.4g} tokens/s, 80% interval {:.4g}-{:.4g} from the {} calibration runs nearest ({}; mean "
      "distance {:.2f}{})",
      tokens_per_s, tokens_per_s * iv.lo, tokens_per_s * iv.hi, iv.used.size(),
      calib::Describe(r->query), iv.mean_distance,
      iv.widen > 1 ? fmt::format(", widened x{:.2f}", iv.widen) : ""));
  std::string ids;
  const size_t shown = std::min<size_t>(iv.used.size(), 4);
  for (size_t i = 0; i < shown; ++i) ids += (i == 0 ? "" : ", ") + iv.used[i].point->id;
  if (iv.used.size() > shown)
    ids += fmt::format(" and {} more (--json lists them)", iv.used.size() - shown);
  lines.push_back("  runs: " + ids);
  lines.push_back("  stack-wide: " + StackWideText(in, tokens_per_s));
  if (!iv.calibrated) {
    lines.push_back("uncalibrated regime: " + calib::UncalibratedNote(r->points, r->query, iv));
  }
  return lines;
}

nlohmann::json IntervalJson(const Inputs& in, const spec::TrainSpec& train, double tokens_per_s) {
  nlohmann::json j = {{"stack", in.stack.name}, {"gpu_class", calib::GpuClass(in.cluster.name)}};
  nlohmann::json stack_wide = {{"covered", false}};
  if (const calib::Interval* iv = calib::IntervalFor(in.stack, in.cluster.name)) {
    stack_wide = {{"covered", true},
                  {"runs", iv->runs},
                  {"tokens_per_s_lo", tokens_per_s * iv->lo},
                  {"tokens_per_s_hi", tokens_per_s * iv->hi}};
  }
  const std::optional<RegimeLookup> r = LookUpRegime(in, train);
  if (!r) {  // a user's profile: its stack-wide interval, as before
    j.update(stack_wide);
    j["regime"] = nullptr;
    return j;
  }
  const calib::RegimeInterval& iv = r->iv;
  const calib::Regime& q = r->query;
  j["covered"] = true;
  j["calibrated"] = iv.calibrated;
  j["regime"] = {{"seq_len", q.seq_len}, {"moe", q.moe},     {"fp8", q.fp8},
                 {"gpus", q.gpus},       {"stack", q.stack}, {"gpu_class", q.gpu_class}};
  j["rule"] = fmt::format(
      "the {} nearest calibration runs (and ties) by regime distance, order statistics r_(i), "
      "r_(n+1-i) of measured/predicted with i = max(1, floor((n+1)/10)), widened in log space by "
      "max(1, mean distance / {:.0f}); docs/COST_MODEL.md \"Regime intervals\"",
      calib::kNeighbours, calib::kNearDistance);
  j["runs"] = iv.used.size();
  j["tokens_per_s_lo"] = tokens_per_s * iv.lo;
  j["tokens_per_s_hi"] = tokens_per_s * iv.hi;
  j["ratio_lo"] = iv.lo;
  j["ratio_hi"] = iv.hi;
  j["mean_distance"] = iv.mean_distance;
  j["widen"] = iv.widen;
  j["used"] = nlohmann::json::array();
  for (const calib::Neighbour& nb : iv.used) {
    j["used"].push_back({{"id", nb.point->id},
                         {"group", nb.point->group},
                         {"distance", nb.distance},
                         {"error", nb.point->error},
                         {"error_from", nb.point->error_from}});
  }
  if (!iv.calibrated) j["uncalibrated"] = calib::UncalibratedNote(r->points, q, iv);
  j["stack_wide"] = stack_wide;
  return j;
}

core::Result<Inputs> LoadInputs(const SearchArgs& a, bool with_train) {
  Inputs in;
  if (!a.model.empty()) {
    PM_ASSIGN_OR_RETURN(in.model, spec::LoadModel(a.model));
  }
  PM_ASSIGN_OR_RETURN(in.cluster, spec::LoadCluster(a.cluster, a.gpus));
  if (with_train) {
    PM_ASSIGN_OR_RETURN(in.train, spec::LoadTrain(a.train));
  }
  PM_RETURN_IF_ERROR(ApplyStack(a.stack.empty() ? calib::kDefaultStack : a.stack, in));
  return in;
}

core::Result<plan::SearchOptions> MakeSearchOptions(const SearchArgs& a, const Inputs& in,
                                                    int top_k) {
  plan::SearchOptions o;
  o.cost = in.params;
  PM_ASSIGN_OR_RETURN(o.space.allow, plan::Constraints::Parse(a.allow));
  o.space.include_gpipe = !a.no_gpipe;
  if (a.mbs_max < 0) return core::Status::Error("--mbs-max: must be >= 0");
  o.space.mbs_max = a.mbs_max;
  if (a.threads < 0) return core::Status::Error("--threads: must be >= 0");
  o.threads = a.threads;
  if (top_k < 1) return core::Status::Error(fmt::format("--top: must be >= 1 (got {})", top_k));
  o.top_k = top_k;
  return o;
}

core::Result<std::vector<int64_t>> ParseIntList(const std::string& option, const std::string& text,
                                                int64_t max_value) {
  std::vector<int64_t> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || ptr != item.data() + item.size() || v <= 0) {
      return core::Status::Error(
          fmt::format("{}: '{}' is not a positive integer (expected e.g. 128,256)", option, item));
    }
    PM_RETURN_IF_ERROR(spec::CheckInt(option, v, 1, max_value));
    out.push_back(v);
  }
  if (out.empty()) return core::Status::Error(fmt::format("{}: empty list", option));
  return out;
}

nlohmann::json CountsJson(const plan::Counts& c) {
  nlohmann::json reasons = nlohmann::json::object();
  for (size_t i = 0; i < plan::kReasonCount; ++i) {
    if (c.reasons[i] > 0) reasons[plan::Describe(static_cast<plan::Reason>(i))] = c.reasons[i];
  }
  return {{"space", c.space},   {"evaluated", c.evaluated},
          {"pruned", c.pruned}, {"did_not_fit", c.did_not_fit},
          {"fit", c.fit},       {"reasons", reasons}};
}

int FailNoFit(const std::string& command, const std::vector<std::string>& lines, bool json,
              const cost::Estimate* nearest_miss) {
  if (json) {
    nlohmann::json j = {{"fits", false}, {"explanation", lines}};
    if (nearest_miss != nullptr) j["nearest_miss"] = EstimateJson(*nearest_miss);
    fmt::print("{}\n", j.dump(2));
  }
  std::string message = command + ": no layout fits";
  for (const auto& line : lines) message += "\n  " + line;
  return Fail(message);
}

}  // namespace pentamesh::cli

namespace pentamesh::cli {

core::Result<plan::SweepResult> RunSweep(const std::string& models,
                                         const spec::ClusterSpec& cluster,
                                         const spec::TrainSpec& train,
                                         const std::vector<int64_t>& nodes,
                                         const plan::SearchOptions& options) {
  std::vector<spec::ModelSpec> specs;
  std::istringstream in(models);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name.empty()) continue;
    PM_ASSIGN_OR_RETURN(spec::ModelSpec m, spec::LoadModel(name));
    specs.push_back(std::move(m));
  }
  if (specs.empty()) return core::Status::Error("--models: empty list");
  return plan::Sweep(specs, cluster, train, nodes, options);
}

}  // namespace pentamesh::cli

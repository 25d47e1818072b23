// tune::Plan: the candidates of a tune, predicted. The planner's search over the host as a cluster
// of np ranks, restricted to what the CPU engine runs; then the FSDP baseline and the
// single-process layout, each the search's best of its kind.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/input.h"
#include "core/quote.h"
#include "plan/allow.h"
#include "plan/baseline.h"
#include "plan/search.h"
#include "spec/layout.h"
#include "train/engine_rules.h"
#include "train/host_cost.h"
#include "tune/tune.h"

namespace pentamesh::tune {
namespace {

// The config as one run of `layout` (ranks = layout.gpus()).
train::RunConfig WithLayout(const train::RunConfig& config, const spec::Layout& layout) {
  train::RunConfig c = config;
  c.run.layout = layout;
  return c;
}

struct Search {
  std::vector<cost::Estimate> top;  // runnable, best first
  int64_t space = 0, runnable = 0;
};

// Every layout of `ranks` ranks the engine runs, ranked by the planner (tokens/s).
core::Result<Search> SearchHost(const train::RunConfig& config, int ranks,
                                const std::string& allow) {
  const train::RunConfig probe = WithLayout(config, plan::FsdpLayout(ranks));
  plan::SearchOptions options;
  PM_ASSIGN_OR_RETURN(options.space.allow, plan::Constraints::Parse(allow));
  // The CPU engine's selective recomputation is core attention's (train::CheckCombined refuses a
  // module list): the space's recomputation choices, which the filter does not see, say so.
  options.space.allow.AddClauses(*plan::Constraints::Parse("recompute_modules=core_attn"));
  options.space.allow.AddFilter("the CPU engine runs it", [config](const spec::Layout& l) {
    return train::EngineLayoutViolations(WithLayout(config, l)).empty();
  });
  options.top_k = 100000;
  options.threads = 1;
  options.cost = train::EngineCostParams(probe);
  const spec::ClusterSpec cluster = train::HostCluster(probe);
  PM_ASSIGN_OR_RETURN(plan::SearchResult r,
                      plan::Search(config.model, cluster, config.train, options));
  if (r.top.empty()) {
    std::string why = fmt::format("no layout of {} ranks that the CPU engine runs fits", ranks);
    for (const std::string& line :
         plan::ExplainNoFit(config.model, cluster, config.train, options, r)) {
      why += "\n  " + line;
    }
    return core::Status::Error(why);
  }
  // Re-cost with explain = true: the same numbers, with the violations' text for the table.
  for (cost::Estimate& e : r.top) {
    e = cost::EstimateLayout(config.model, cluster, config.train, e.layout, options.cost, true);
  }
  return Search{std::move(r.top), r.counts.space, r.counts.fit};
}

// The injections' outcomes file: a JSON array of objects with string name, command and outcome.
core::Result<nlohmann::json> ReadInjections(const std::string& path) {
  auto text = core::ReadInputFile(path, core::kMaxConfigFileBytes, "--injections file");
  if (!text.ok()) return core::Status::Error("--injections: " + text.status().message());
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) {
    return core::Status::Error(fmt::format("--injections: {}: not a JSON array", path));
  }
  for (size_t i = 0; i < j.size(); ++i) {
    for (const char* key : {"name", "command", "outcome"}) {
      if (!j[i].is_object() || !j[i].contains(key) || !j[i][key].is_string()) {
        return core::Status::Error(
            fmt::format("--injections: {}: entry {}: '{}' must be a string", path, i, key));
      }
    }
  }
  return j;
}

bool IsFsdp(const spec::Layout& l, int ranks) {
  return l.dp == ranks && l.zero == 3 && l.tp == 1 && l.pp == 1 && l.cp == 1 && l.ep == 1;
}

Row MakeRow(Kind kind, int ranks, const cost::Estimate& e) {
  Row row;
  row.kind = kind;
  row.ranks = ranks;
  row.layout = e.layout;
  row.predicted = e;
  return row;
}

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kPlanned:
      return "planned";
    case Kind::kFsdp:
      return "fsdp";
    case Kind::kSingle:
      return "single";
  }
  return "?";
}

std::vector<std::string> RunSets(const Options& options) {
  std::vector<std::string> sets = options.sets;
  // A timing run: S steps, the learning-rate warm-up shortened to fit them, one evaluation batch
  // at the end, no checkpoints, no progress lines.
  for (const std::string& s :
       {fmt::format("run.steps={}", options.steps), std::string("optim.warmup_steps=1"),
        std::string("run.eval_every=0"), std::string("run.eval_batches=1"),
        std::string("run.log_every=1000000"), std::string("ckpt.dir=\"\"")}) {
    sets.push_back(s);
  }
  if (!options.host_profile.empty()) {
    sets.push_back("run.host_profile=" + core::TomlString(options.host_profile));
  }
  return sets;
}

core::Result<Result> Plan(const Options& options) {
  if (options.np < 2 || options.np > kMaxRanks) {
    return core::Status::Error(
        fmt::format("--np: {} ranks; tune measures 2 to {} ranks", options.np, kMaxRanks));
  }
  if (options.top_k < 1) return core::Status::Error("--top: must be at least 1");
  if (options.steps < 4) return core::Status::Error("--steps: must be at least 4");
  PM_ASSIGN_OR_RETURN(train::RunConfig config,
                      train::LoadRunConfig(options.config, RunSets(options)));
  Result result;
  result.options = options;
  result.model_name = config.model.name;
  result.host_profile = config.run.host_profile;
  if (!options.injections.empty()) {
    PM_ASSIGN_OR_RETURN(result.injections, ReadInjections(options.injections));
  }
  PM_ASSIGN_OR_RETURN(Search n, SearchHost(config, options.np, options.allow));
  result.space = n.space;
  result.runnable = n.runnable;
  const spec::ClusterSpec host =
      train::HostCluster(WithLayout(config, plan::FsdpLayout(options.np)));
  result.host = fmt::format("{} ranks on one host, {:.1f} GFLOP/s and {:.1f} GB/s per rank ({})",
                            options.np, host.peak_tflops * 1e3, host.hbm_gbps,
                            config.run.host ? "measured: " + config.run.host_profile
                                            : "run.peak_gflops and run.mem_gbps, not measured");
  for (const cost::Estimate& e : n.top) {
    if (static_cast<int>(result.rows.size()) == options.top_k) break;
    result.rows.push_back(MakeRow(Kind::kPlanned, options.np, e));
  }
  if (options.fsdp) {
    auto it = std::find_if(n.top.begin(), n.top.end(),
                           [&](const cost::Estimate& e) { return IsFsdp(e.layout, options.np); });
    const bool listed = std::any_of(result.rows.begin(), result.rows.end(),
                                    [&](const Row& r) { return IsFsdp(r.layout, options.np); });
    if (it != n.top.end() && !listed) result.rows.push_back(MakeRow(Kind::kFsdp, options.np, *it));
    for (Row& r : result.rows) {
      if (IsFsdp(r.layout, options.np)) r.kind = Kind::kFsdp;
    }
  }
  for (size_t i = 0; i < result.rows.size(); ++i) {
    const cost::Estimate& e = result.rows[i].predicted;
    result.rows[i].predicted_rank = 1 + static_cast<int>(std::find_if(n.top.begin(), n.top.end(),
                                                                      [&](const cost::Estimate& x) {
                                                                        return x.layout == e.layout;
                                                                      }) -
                                                         n.top.begin());
    result.rows[i].tied_rank =
        1 + static_cast<int>(std::count_if(n.top.begin(), n.top.end(), [&](const auto& x) {
          return x.time.step < e.time.step * (1 - kTie);
        }));
  }
  if (options.single) {
    PM_ASSIGN_OR_RETURN(Search one, SearchHost(config, 1, ""));
    result.rows.push_back(MakeRow(Kind::kSingle, 1, one.top.front()));
  }
  return result;
}

}  // namespace pentamesh::tune

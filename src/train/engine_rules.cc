#include "train/engine_rules.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "schedule/generate.h"
#include "spec/validate.h"
#include "train/host_cost.h"

namespace pentamesh::train {
namespace {

struct Row {
  EngineRule rule;
  bool (*broken)(const RunConfig&);
  std::string (*message)(const RunConfig&);
};

bool PipelineProgramFails(const RunConfig& c) {
  const spec::Layout& l = c.run.layout;
  const int64_t m = spec::MicroBatches(c.train, l);
  return l.pp > 1 && m > 0 && !schedule::FromLayout(l, m).ok();
}

const Row kEngineRows[] = {
    {EngineRule::kTiedPipeline,
     [](const RunConfig& c) { return c.run.layout.pp > 1 && c.model.tied_embeddings; },
     [](const RunConfig& c) {
       return fmt::format(
           "run.layout: pp={} with model.tied_embeddings=true is not implemented by the engine "
           "(the head on the last stage would share stage 0's embedding); set "
           "model.tied_embeddings=false",
           c.run.layout.pp);
     }},
    {EngineRule::kSchedule, PipelineProgramFails,
     [](const RunConfig& c) {
       const auto spec =
           schedule::FromLayout(c.run.layout, spec::MicroBatches(c.train, c.run.layout));
       return fmt::format("run.layout: {}", spec.status().message());
     }},
    {EngineRule::kVocabTp, [](const RunConfig& c) { return c.model.vocab % c.run.layout.tp != 0; },
     [](const RunConfig& c) {
       return fmt::format(
           "model.vocab: {} must be divisible by tp={} (the engine splits the embedding and the "
           "head over tp)",
           c.model.vocab, c.run.layout.tp);
     }},
};

}  // namespace

const char* EngineRuleName(EngineRule rule) {
  switch (rule) {
    case EngineRule::kTiedPipeline:
      return "pp > 1 with tied embeddings";
    case EngineRule::kSchedule:
      return "a pipeline program for the schedule and micro-batches";
    case EngineRule::kVocabTp:
      return "vocab divisible by tp";
  }
  return "?";
}

std::vector<std::string> EngineLayoutViolations(const RunConfig& config) {
  // The host as one node of every rank: mpirun places the ranks; TP spans them freely.
  spec::ClusterSpec host = HostCluster(config);
  host.gpus_per_node = config.run.layout.gpus();
  host.nodes = 1;
  std::vector<std::string> out;
  for (spec::Violation& v : spec::Violations(config.model, host, config.train, config.run.layout))
    out.push_back(v.message.starts_with("layout:") ? "run." + v.message : v.message);
  if (!out.empty()) return out;  // the engine's rows assume the planner's hold
  for (const Row& row : kEngineRows) {
    if (row.broken(config)) out.push_back(row.message(config));
  }
  return out;
}

core::Status CheckEngineLayout(const RunConfig& config) {
  const std::vector<std::string> errors = EngineLayoutViolations(config);
  if (errors.empty()) return core::Status::Ok();
  std::string msg = errors.front();
  for (size_t i = 1; i < errors.size(); ++i) msg += "\n" + errors[i];
  return core::Status::Error(msg);
}

}  // namespace pentamesh::train

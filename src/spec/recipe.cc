#include "spec/recipe.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"
#include "spec/field_reader.h"
#include "spec/limits.h"
#include "spec/rope_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::spec {
namespace {

// One [[recipe.phase]]; `number` counts from 1.
Phase ReadPhase(const toml::table& t, size_t number, std::vector<std::string>& errors) {
  const std::string prefix = fmt::format("recipe.phase[{}]", number);
  FieldReader r(&t, prefix, &errors);
  Phase p;
  TrainSpec& train = p.train;
  r.String("name", train.name);
  if (train.name.empty()) train.name = fmt::format("phase {}", number);
  r.Double("tokens", train.total_tokens, true, 0, true, 1e18);
  ReadTrainShape(t, r, train);
  std::string layout;
  r.String("layout", layout);
  if (!layout.empty()) {
    core::Result<Layout> l = ParseLayout(layout);
    if (l.ok()) {
      p.layout = *l;
    } else {
      r.Error("layout", l.status().message());
    }
  }
  std::vector<std::string> sub_tables;
  if (const toml::node* ramp = t.get("batch_ramp")) {
    sub_tables.push_back("batch_ramp");
    if (!ramp->is_table()) {
      r.Error("batch_ramp", "must be a table");
    } else {
      FieldReader rr(ramp->as_table(), prefix + ".batch_ramp", &errors);
      rr.Int("start_tokens", p.ramp.start_tokens, true, 1, kMaxBatchTokens);
      rr.Double("over_tokens", p.ramp.over_tokens, true, 0, true, 1e18);
      rr.Int("increment_tokens", p.ramp.increment_tokens, false, 1, kMaxBatchTokens);
      if (train.seq_len > 0 && p.ramp.increment_tokens % train.seq_len != 0) {
        rr.Error("increment_tokens", fmt::format("{} is not a multiple of seq_len={}",
                                                 p.ramp.increment_tokens, train.seq_len));
      }
      rr.RejectUnknown();
      if (train.seq_len > 0 && p.ramp.start_tokens % train.seq_len != 0) {
        rr.Error("start_tokens", fmt::format("{} is not a multiple of seq_len={}",
                                             p.ramp.start_tokens, train.seq_len));
      }
      if (p.ramp.start_tokens >= train.global_batch_tokens && train.global_batch_tokens > 0) {
        rr.Error("start_tokens",
                 fmt::format("{} must be below global_batch_tokens={} (the batch it grows to)",
                             p.ramp.start_tokens, train.global_batch_tokens));
      }
      if (p.ramp.over_tokens > train.total_tokens && train.total_tokens > 0) {
        rr.Error("over_tokens", fmt::format("{:.4g} exceeds the phase's tokens={:.4g}",
                                            p.ramp.over_tokens, train.total_tokens));
      }
    }
  }
  if (const toml::node* rope = t.get("rope")) {
    sub_tables.push_back("rope");
    if (!rope->is_table()) {
      r.Error("rope", "must be a table");
    } else {
      ReadRopeScaling(*rope->as_table(), prefix + ".rope", errors, p.rope);
    }
  }
  r.RejectUnknown(sub_tables);
  return p;
}

// The phase's TrainSpec at one batch over `tokens`, named recipe/part.
TrainSpec PartTrain(const Recipe& recipe, const Phase& phase, int64_t batch_tokens, double tokens,
                    const std::string& name) {
  TrainSpec t = phase.train;
  t.name = recipe.name + "/" + name;
  t.global_batch_tokens = batch_tokens;
  t.total_tokens = tokens;
  return t;
}

}  // namespace

const char* RopeScalingName(RopeScalingKind kind) {
  switch (kind) {
    case RopeScalingKind::kNone:
      return "none";
    case RopeScalingKind::kLlama3:
      return "llama3";
    case RopeScalingKind::kYarn:
      return "yarn";
    case RopeScalingKind::kBaseChange:
      return "base";
  }
  return "?";
}

double Recipe::total_tokens() const {
  double sum = 0;
  for (const Phase& p : phases) sum += p.train.total_tokens;
  return sum;
}

int64_t RampMeanBatchTokens(int64_t start_tokens, int64_t end_tokens, int64_t seq_len) {
  PM_CHECK(seq_len > 0 && start_tokens > 0 && end_tokens >= start_tokens)
      << "ramp " << start_tokens << " -> " << end_tokens << " at seq_len " << seq_len;
  const double mean_seqs = (static_cast<double>(start_tokens) + static_cast<double>(end_tokens)) /
                           2.0 / static_cast<double>(seq_len);
  const int64_t seqs = std::max<int64_t>(1, std::llround(mean_seqs));
  return seqs * seq_len;
}

std::vector<PhasePart> PhaseParts(const Recipe& recipe, size_t index) {
  PM_CHECK(index < recipe.phases.size()) << "phase " << index;
  const Phase& p = recipe.phases[index];
  const TrainSpec& t = p.train;
  if (p.ramp.over_tokens <= 0) {
    return {PhasePart{index, t.name,
                      PartTrain(recipe, p, t.global_batch_tokens, t.total_tokens, t.name)}};
  }
  std::vector<PhasePart> parts;
  const std::string ramp_name = t.name + "/ramp";
  parts.push_back(PhasePart{
      index, ramp_name,
      PartTrain(recipe, p,
                RampMeanBatchTokens(p.ramp.start_tokens, t.global_batch_tokens, t.seq_len),
                p.ramp.over_tokens, ramp_name)});
  const double rest = t.total_tokens - p.ramp.over_tokens;
  if (rest > 0) {
    const std::string steady_name = t.name + "/steady";
    parts.push_back(PhasePart{index, steady_name,
                              PartTrain(recipe, p, t.global_batch_tokens, rest, steady_name)});
  }
  return parts;
}

core::Result<Recipe> RecipeFromTomlText(const std::string& text, const std::string& source) {
  PM_ASSIGN_OR_RETURN(toml::table root, ParseTomlText(text, source));
  const toml::node* node = root.get("recipe");
  if (!node) return core::Status::Error(fmt::format("{}: has no [recipe] table", source));
  if (!node->is_table()) {
    return core::Status::Error(fmt::format("{}: 'recipe' must be a table", source));
  }
  const toml::table& t = *node->as_table();
  Recipe recipe;
  std::vector<std::string> errors;
  FieldReader r(&t, "recipe", &errors);
  r.String("name", recipe.name);
  r.Double("usd_per_gpu_hour", recipe.usd_per_gpu_hour, false, 0, false);
  const toml::node* phases = t.get("phase");
  if (phases == nullptr) {
    r.Error("phase", "missing (required): at least one [[recipe.phase]]");
  } else if (!phases->is_array_of_tables()) {
    r.Error("phase", "must be an array of tables ([[recipe.phase]])");
  } else {
    const toml::array& list = *phases->as_array();
    if (list.empty()) r.Error("phase", "has no phase");
    for (size_t i = 0; i < list.size(); ++i) {
      recipe.phases.push_back(ReadPhase(*list.get(i)->as_table(), i + 1, errors));
    }
  }
  r.RejectUnknown({"phase"});
  PM_RETURN_IF_ERROR(JoinFieldErrors(source, errors));
  if (recipe.name.empty()) recipe.name = source;
  for (Phase& p : recipe.phases) p.train.usd_per_gpu_hour = recipe.usd_per_gpu_hour;
  return recipe;
}

}  // namespace pentamesh::spec

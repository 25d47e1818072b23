#include "train/recipe_run.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <utility>

#include "ckpt/checkpoint.h"
#include "core/check.h"
#include "spec/rope_toml.h"
#include "spec/toml_parse.h"
#include "train/engine_rules.h"
#include "train/job.h"

namespace pentamesh::train {
namespace {

// A segment before its config is built.
struct Stretch {
  size_t phase = 0;
  std::string name;
  int64_t batch_seqs = 0;
  int64_t steps = 0;
};

std::string PhaseLabel(const spec::Recipe& recipe, size_t phase) {
  return fmt::format("recipe.phase[{}] ({})", phase + 1, recipe.phases[phase].train.name);
}

// The run's TOML with [train], the run's steps, layout and data start, and the model's RoPE
// scaling replaced by the phase's; then read like any run config (every check by field name).
core::Result<RunConfig> PhaseConfig(const RunConfig& base, const spec::Recipe& recipe,
                                    const Stretch& s, const spec::Layout& layout, int64_t last_step,
                                    int64_t lr_steps, int64_t data_start) {
  const spec::Phase& ph = recipe.phases[s.phase];
  const std::string label = PhaseLabel(recipe, s.phase);
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(base.toml, label));
  toml::table train;
  train.insert("seq_len", ph.train.seq_len);
  train.insert("global_batch_seqs", s.batch_seqs);
  train.insert("precision", spec::PrecisionName(ph.train.precision));
  train.insert("total_tokens", ph.train.total_tokens);
  root.insert_or_assign("train", std::move(train));
  if (!root.contains("run")) root.insert("run", toml::table{});
  toml::table& run = *root["run"].as_table();
  run.insert_or_assign("steps", last_step);
  run.insert_or_assign("lr_steps", lr_steps);
  run.insert_or_assign("data_start_step", data_start);
  run.insert_or_assign("layout", spec::FormatLayout(layout));
  toml::table& model = *root["model"].as_table();  // a RunConfig has a [model]
  if (ph.rope.kind == spec::RopeScalingKind::kNone && ph.rope.theta == 0) {
    model.erase("rope_scaling");
  } else {
    model.insert_or_assign("rope_scaling", spec::RopeScalingTable(ph.rope));
  }
  std::ostringstream text;
  text << root;
  PM_ASSIGN_OR_RETURN(RunConfig c, RunConfigFromToml(text.str(), label));
  if (core::Status st = CheckEngineLayout(c); !st.ok())
    return core::Status::Error(label + ": " + st.message());
  return c;
}

// The batch levels of phase `p`'s ramp: start, start + increment, ... below the phase's batch,
// each one the layout must run (`steady` is the phase's config at its full batch).
core::Result<std::vector<int64_t>> RampLevels(const spec::Recipe& recipe, size_t i,
                                              const RunConfig& steady) {
  const spec::Phase& p = recipe.phases[i];
  const int64_t end = p.train.global_batch_tokens / p.train.seq_len;
  const int64_t step = std::max<int64_t>(1, p.ramp.increment_tokens / p.train.seq_len);
  constexpr int64_t kMaxLevels = 4096;
  if ((end - p.ramp.start_tokens / p.train.seq_len) / step >= kMaxLevels) {
    return core::Status::Error(
        fmt::format("{}: batch_ramp.increment_tokens: the ramp would have over {} levels; raise it",
                    PhaseLabel(recipe, i), kMaxLevels));
  }
  std::vector<int64_t> levels;
  RunConfig c = steady;
  for (int64_t b = p.ramp.start_tokens / p.train.seq_len; b < end; b += step) {
    c.train.global_batch_tokens = b * p.train.seq_len;
    // The planner's rules include the batch's: data ranks x mbs divide it.
    const std::vector<std::string> broken = EngineLayoutViolations(c);
    if (!broken.empty()) {
      return core::Status::Error(fmt::format(
          "{}: batch_ramp: the level of {} sequences ({} tokens) does not run on layout '{}' "
          "({}); choose start_tokens and increment_tokens (default: one sequence) so every level "
          "does",
          PhaseLabel(recipe, i), b, b * p.train.seq_len, spec::ShortLayout(c.run.layout),
          broken.front()));
    }
    levels.push_back(b);
  }
  return levels;
}

// A run's steps are at most run.steps' limit (2^31 - 1), so their sums cannot overflow.
constexpr int64_t kMaxSteps = std::numeric_limits<int32_t>::max();

// Rounded; kMaxSteps + 1 when more (the caller refuses it).
int64_t StepsOf(double tokens, int64_t batch_seqs, int64_t seq_len) {
  const double steps = std::round(tokens / static_cast<double>(batch_seqs * seq_len));
  return steps > static_cast<double>(kMaxSteps) ? kMaxSteps + 1 : static_cast<int64_t>(steps);
}

// The stretches of phase `i` (its ramp's levels, then the steady rest).
core::Status PhaseStretches(const spec::Recipe& recipe, size_t i, const RunConfig& steady,
                            std::vector<Stretch>& out) {
  const spec::Phase& p = recipe.phases[i];
  const int64_t end = p.train.global_batch_tokens / p.train.seq_len;
  double steady_tokens = p.train.total_tokens;
  if (p.ramp.over_tokens > 0) {
    PM_ASSIGN_OR_RETURN(const std::vector<int64_t> levels, RampLevels(recipe, i, steady));
    const double share = p.ramp.over_tokens / static_cast<double>(levels.size());
    for (int64_t b : levels) {
      out.push_back({.phase = i,
                     .name = fmt::format("{}/ramp {}", p.train.name, b),
                     .batch_seqs = b,
                     .steps = std::max<int64_t>(1, StepsOf(share, b, p.train.seq_len))});
    }
    steady_tokens -= p.ramp.over_tokens;
  }
  const int64_t steps = StepsOf(steady_tokens, end, p.train.seq_len);
  if (steps >= 1) {
    out.push_back({.phase = i, .name = p.train.name, .batch_seqs = end, .steps = steps});
  } else if (p.ramp.over_tokens <= 0) {
    return core::Status::Error(
        fmt::format("{}: tokens: {:.6g} gives no step at global_batch_tokens={}",
                    PhaseLabel(recipe, i), p.train.total_tokens, p.train.global_batch_tokens));
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<std::vector<RecipeSegment>> RecipeSegments(const RunConfig& base,
                                                        const spec::Recipe& recipe,
                                                        const std::optional<spec::Layout>& layout) {
  auto layout_of = [&](const spec::Phase& p) {
    return layout ? *layout : p.layout ? *p.layout : base.run.layout;
  };
  // First the stretches (a ramp's levels are checked against the phase's layout), then the
  // configs, which need the recipe's total steps (the learning-rate schedule's length).
  std::vector<Stretch> stretches;
  std::vector<std::string> errors;
  for (size_t i = 0; i < recipe.phases.size(); ++i) {
    const spec::Phase& p = recipe.phases[i];
    const Stretch whole{.phase = i,
                        .name = p.train.name,
                        .batch_seqs = p.train.global_batch_tokens / p.train.seq_len};
    core::Result<RunConfig> steady = PhaseConfig(base, recipe, whole, layout_of(p), 1, 0, 0);
    core::Status st = steady.ok() ? PhaseStretches(recipe, i, *steady, stretches) : steady.status();
    if (!st.ok()) errors.push_back(st.message());
  }
  if (!errors.empty()) {
    std::string all = errors.front();
    for (size_t i = 1; i < errors.size(); ++i) all += "\n" + errors[i];
    return core::Status::Error(all);
  }
  int64_t total = 0;
  for (const Stretch& s : stretches) {
    total += s.steps;  // each <= kMaxSteps + 1: no overflow before the check
    if (total > kMaxSteps)
      return core::Status::Error(fmt::format(
          "{}: tokens: the recipe would run over {} steps by this phase; the engine runs at most "
          "that many",
          PhaseLabel(recipe, s.phase), kMaxSteps));
  }
  std::vector<RecipeSegment> segments;
  int64_t step = 0, data_start = 0;
  for (const Stretch& s : stretches) {
    const spec::Phase& p = recipe.phases[s.phase];
    // A phase that changes the sequence length starts its own data order at its first step.
    if (s.phase > 0 && p.train.seq_len != recipe.phases[s.phase - 1].train.seq_len &&
        (segments.empty() || segments.back().phase != s.phase)) {
      data_start = step;
    }
    PM_ASSIGN_OR_RETURN(
        RunConfig c, PhaseConfig(base, recipe, s, layout_of(p), step + s.steps, total, data_start));
    segments.push_back({.phase = s.phase,
                        .name = s.name,
                        .first_step = step,
                        .last_step = step + s.steps,
                        .config = std::move(c)});
    step += s.steps;
  }
  return segments;
}

core::Result<std::vector<RunSummary>> RunRecipe(const std::vector<RecipeSegment>& segments,
                                                comm::World* world, const LoopOptions& options,
                                                RecipeObserver* observer) {
  PM_CHECK(!segments.empty()) << "a recipe has at least one segment";
  RecipeObserver silent;
  RecipeObserver& obs = observer ? *observer : silent;
  const CkptConfig& ckpt = segments.front().config.ckpt;
  if (segments.size() > 1) {
    if (ckpt.dir.empty())
      return core::Status::Error(fmt::format(
          "ckpt.dir: a recipe run of {} segments hands its state from one to the next through "
          "checkpoints; set ckpt.dir",
          segments.size()));
    if (ckpt.memory_interval > 0)
      return core::Status::Error(
          "ckpt.memory_interval: in-memory copies hold one layout's shards and are not used with "
          "--recipe; set it to 0");
    if (!options.trace.empty())
      return core::Status::Error(fmt::format(
          "--trace records one run; this recipe runs {} (trace one phase's run instead)",
          segments.size()));
  }
  const int ranks = world ? world->size() : 1;
  for (const RecipeSegment& s : segments) {
    if (s.config.run.layout.gpus() != ranks)
      return core::Status::Error(fmt::format(
          "{} (phase {}): layout '{}' needs {} ranks; this run has {}", s.name, s.phase + 1,
          spec::ShortLayout(s.config.run.layout), s.config.run.layout.gpus(), ranks));
  }
  // The step the run resumes at picks the segment: one ending there hands over to the next.
  int64_t resumed_at = 0;
  if (!options.resume.empty()) {
    PM_ASSIGN_OR_RETURN(auto found,
                        ckpt::ResolveResume(options.resume, ckpt.dir, [](const std::string&) {}));
    if (found) resumed_at = found->step();
  }
  size_t first = segments.size() - 1;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].last_step > resumed_at) {
      first = i;
      break;
    }
  }
  std::vector<RunSummary> summaries;
  for (size_t i = first; i < segments.size(); ++i) {
    const RecipeSegment& s = segments[i];
    LoopOptions o = options;
    o.process_first_step = resumed_at;
    if (i != first) {
      o.resume = ckpt.dir + "/" + ckpt::StepDirName(s.first_step);
      o.overwrite = false;
    }
    PM_ASSIGN_OR_RETURN(Job job, Job::Create(s.config, world));
    o.world = job.world();
    obs.OnSegment(s, i, segments.size(), job.trainer());
    PM_ASSIGN_OR_RETURN(RunSummary summary, RunTraining(job.trainer(), o, &obs));
    obs.OnSegmentDone(s, summary, job.trainer());
    summaries.push_back(std::move(summary));
  }
  return summaries;
}

}  // namespace pentamesh::train

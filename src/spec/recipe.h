// Recipe: a training run as the field runs it, a list of phases (Llama 3 405B: 4K then 8K
// pre-training with a growing batch, six context-extension stages to 128K, annealing). Each phase
// has its tokens, sequence length, global batch (optionally ramped), RoPE base and scaling, and
// precision, and optionally the engine's layout. Loaded from a [recipe] table with [[recipe.phase]]
// entries (configs/presets/recipes/). Phases are numbered from 1 in errors and output:
// "recipe.phase[2].seq_len: missing (required)".
//
// Usage:
//   PM_ASSIGN_OR_RETURN(spec::Recipe r, spec::LoadRecipe("llama3-405b"));
//   for (size_t i = 0; i < r.phases.size(); ++i) {
//     for (const spec::PhasePart& part : spec::PhaseParts(r, i)) Plan(part.train);
//   }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::spec {

// The global batch grows linearly in tokens from start_tokens to the phase's global_batch_tokens
// over the phase's first over_tokens tokens (Megatron-LM's --rampup-batch-size, in tokens); then
// it stays there. over_tokens = 0: no ramp.
struct BatchRamp {
  int64_t start_tokens = 0;
  double over_tokens = 0;
  // The step the batch grows by (Megatron-LM's increment): the engine runs levels start,
  // start + increment, ... below the phase's batch, each for an equal share of over_tokens.
  // 0 = one sequence (seq_len). The planner costs the ramp at its mean batch either way.
  int64_t increment_tokens = 0;
};

struct Phase {
  // The phase as a training run: its name, seq_len, global_batch_tokens (the batch after the
  // ramp), precision, total_tokens (the phase's tokens) and the recipe's usd_per_gpu_hour.
  TrainSpec train;
  BatchRamp ramp;
  RopeScaling rope;  // spec/model_spec.h; the engine applies it as ModelSpec::rope_scaling
  // The engine's layout for this phase (`train --recipe`: the run's run.layout when absent).
  // `plan --recipe` searches every phase's layout itself: a CPU run's layout says nothing of the
  // cluster's.
  std::optional<Layout> layout;
};

struct Recipe {
  std::string name;
  double usd_per_gpu_hour = 0;
  std::vector<Phase> phases;
  double total_tokens() const;
};

// A part of a phase costed at one constant batch: the whole phase, or, for a ramped phase, the
// ramp (at the ramp's token-weighted mean batch, RampMeanBatchTokens) and the steady rest.
struct PhasePart {
  size_t phase = 0;  // index into Recipe::phases
  std::string name;  // "8k", "8k/ramp", "8k/steady"
  TrainSpec train;   // seq_len, batch, precision, tokens of this part; the recipe's price
};

// The token-weighted mean batch of a linear ramp from start to end: a batch that grows linearly
// in tokens t has mean (start + end) / 2 over the ramp's tokens; rounded to the nearest multiple
// of seq_len (at least seq_len).
int64_t RampMeanBatchTokens(int64_t start_tokens, int64_t end_tokens, int64_t seq_len);

// The parts of phase `index`: one part, or the ramp and the steady rest (the ramp alone when it
// spans the whole phase). REQUIRES: index < recipe.phases.size().
std::vector<PhasePart> PhaseParts(const Recipe& recipe, size_t index);

// Every error names the source, the phase (numbered from 1) and the key.
core::Result<Recipe> RecipeFromTomlText(const std::string& text, const std::string& source);
// A preset name (configs/presets/recipes/NAME.toml) or a .toml path.
core::Result<Recipe> LoadRecipe(const std::string& preset_or_path);

}  // namespace pentamesh::spec

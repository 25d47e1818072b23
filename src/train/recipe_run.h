// A recipe on the engine (`pentamesh train --config run.toml --recipe R`): the phases of a
// spec::Recipe (spec/recipe.h) run one after another, each as an ordinary run of RunTraining on
// its own Job, handing the state over through the run's checkpoints (ckpt.dir), which reshard
// into the next phase's layout. The run's TOML gives the model, optimizer, data, run and ckpt
// tables; each phase replaces [train] (seq_len, batch, precision), run.layout (the phase's
// `layout`, else the run's) and [model.rope_scaling] (the phase's `rope`), so the config a
// checkpoint saves is the phase's own and generate / HF export see its RoPE scaling.
//
// The run is cut into segments of one batch size: a phase without a ramp is one segment; a
// ramped phase is one segment per batch level (start, start + increment, ... below the phase's
// batch, each for an equal share of the ramp's tokens, as Megatron-LM's --rampup-batch-size grows
// in increments; each level must run on the phase's layout), then the steady rest. Steps of a
// segment: its tokens / its batch tokens, rounded, at least 1.
//
// Across segments: one learning-rate schedule over the whole recipe (run.lr_steps); the data
// order of a sequence length continues where the last segment left it, and a phase that changes
// the sequence length starts its own order (windows of its length, keyed by run.seed) at its
// first sequence (run.data_start_step). Resumable at any step: --resume picks the checkpoint,
// and the segment it belongs to (a checkpoint at a segment's last step starts the next one).
// A SIGKILL anywhere, a phase boundary included, resumes bitwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "spec/layout.h"
#include "spec/recipe.h"
#include "train/run_config.h"
#include "train/run_loop.h"

namespace pentamesh::train {

// One constant-batch stretch of a recipe run.
struct RecipeSegment {
  size_t phase = 0;        // index into Recipe::phases
  std::string name;        // "long", or "short/ramp 8" for a ramp's level of 8 sequences
  int64_t first_step = 0;  // optimizer steps done before it
  int64_t last_step = 0;   // the step it ends at (and saves its checkpoint at)
  RunConfig config;        // the run's config for this segment (config.toml says it all)
};

// The segments of `recipe` on the run `base` (its merged TOML: base.toml). `layout`, when given,
// replaces every phase's layout (`train --layout` with --recipe). Errors name the phase
// ("recipe.phase[2] (long): train.seq_len: 512 exceeds model.max_seq_len=256"), and are given
// for every phase at once.
core::Result<std::vector<RecipeSegment>> RecipeSegments(const RunConfig& base,
                                                        const spec::Recipe& recipe,
                                                        const std::optional<spec::Layout>& layout);

// What RunRecipe reports besides the run loop's lines.
class RecipeObserver : public RunObserver {
 public:
  // Before segment `index` (of `count`) trains, once its trainer is built (every rank).
  virtual void OnSegment(const RecipeSegment& /*segment*/, size_t /*index*/, size_t /*count*/,
                         Trainer& /*trainer*/) {}
  // After it trained to its last step.
  virtual void OnSegmentDone(const RecipeSegment& /*segment*/, const RunSummary& /*summary*/,
                             Trainer& /*trainer*/) {}
};

// Runs the segments from the one `options.resume` lands in (all of them on a fresh run). Every
// segment after the first resumes from the checkpoint its predecessor saved at its last step.
// Several segments need ckpt.dir (the hand-over) and refuse ckpt.memory_interval (in-memory
// copies are of one layout). `world` is null on one process; every segment's layout must use
// all of its ranks. Returns one summary per segment run.
core::Result<std::vector<RunSummary>> RunRecipe(const std::vector<RecipeSegment>& segments,
                                                comm::World* world, const LoopOptions& options,
                                                RecipeObserver* observer = nullptr);

}  // namespace pentamesh::train

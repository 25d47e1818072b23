// The bridge between a Trainer and a checkpoint: what a resumed run needs to continue bitwise
// where the saved one stopped. Model and optimizer state are the parameters' fp32 master weights
// and Adam m, v (bf16 compute weights are re-rounded from the masters, exactly as after an
// update); the rest goes into the manifest's "state": the step, the sampler's global position
// (rank independent, so it reshards across dp), the RNG (the engine's randomness is counter based
// on (seed, name, index): the seed is the whole RNG state), and the full run config.
#pragma once

#include "ckpt/checkpoint.h"
#include "train/trainer.h"

namespace pentamesh::ckpt {

// A host copy of the trainer's state (cheap: done between steps; written later, in background).
Snapshot TrainerSnapshot(train::Trainer& trainer, int rank = 0, int world = 1);

// Loads weights, optimizer state, step and data position. Errors name the field that does not
// match (a different model, dataset or seed), or run.layout when zero >= 1 (not covered yet).
// TrainerSnapshot REQUIRES zero=0 (the CLI refuses ckpt.dir otherwise).
core::Status RestoreTrainer(const Checkpoint& ckpt, train::Trainer& trainer);

}  // namespace pentamesh::ckpt

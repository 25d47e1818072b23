// The bridge between a Trainer and ckpt/'s checkpoints (ckpt/ knows nothing of the trainer): what a
// resumed run needs to continue bitwise where the saved one stopped. Model and optimizer state are
// the parameters' fp32 master weights and Adam m, v (bf16 compute weights are re-rounded from the
// masters, exactly as after an update); the rest goes into the manifest's "state": the step, the
// sampler's global position (rank independent, so it reshards across dp), the RNG (the engine's
// randomness is counter based on (seed, name, index): the seed is the whole RNG state), and the
// full run config.
#pragma once

#include "ckpt/checkpoint.h"
#include "train/trainer.h"

namespace pentamesh::train {

// The global name of MoE layer `layer`'s aux-loss-free routing bias (E floats; not a parameter).
inline std::string MoeBiasName(int64_t layer) {
  return "layers." + std::to_string(layer) + ".moe.router_bias";
}

// The run config a checkpoint was saved with (its manifest's state.config_toml): the model of its
// weights. Errors name the manifest field.
core::Result<RunConfig> RunConfigOfCheckpoint(const ckpt::Checkpoint& ckpt);

// Which slices a rank puts into its snapshot.
enum class SnapshotScope {
  kShared,   // a shard of one checkpoint all ranks write together: each element once per tp/ep
             // shard (the rule below)
  kOwnRank,  // everything this rank alone needs to restore itself at the same layout: its whole
             // model shard at ZeRO 0 (replicas too) and the routing biases on every rank (the
             // in-memory copies, train/memory_checkpoint.h)
};

// A host copy of the trainer's state (cheap: done between steps; written later, in background).
ckpt::Snapshot TrainerSnapshot(Trainer& trainer, int rank = 0, int world = 1,
                               SnapshotScope scope = SnapshotScope::kShared);

// What a rank writes: at ZeRO stage 0 the first rank of each gradient group (dp x cp) writes its
// model shard's master, m and v (the replicas are identical); at stages >= 1 every rank writes
// the part of each tensor inside its range of the flat buffers, as boxes of the global tensors
// (FlatRangeBoxes). So a checkpoint holds every element once per tp/ep shard whatever the layout.
//
// Loads weights, optimizer state, step and data position into any layout (dp, tp, zero stage):
// each rank reads the boxes it needs. Errors name the field that does not match (a different
// model, dataset or seed).
core::Status RestoreTrainer(const ckpt::Checkpoint& ckpt, Trainer& trainer);

}  // namespace pentamesh::train

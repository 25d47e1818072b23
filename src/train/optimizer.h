// AdamW over a ParamSet: global grad-norm clipping, then decoupled weight decay (only parameters
// whose ParamInfo says weight_decay: matrices and embeddings, never norms or biases) and the Adam
// update on the fp32 master weights; in bf16 mode the master is then rounded into the bf16 weights.
// Invariant: grads are read, never modified (clipping is a scale applied inside the update).
#pragma once

#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "model/param_set.h"

namespace pentamesh::train {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // max global L2 norm; 0 = no clipping
};

// sqrt(sum of squares of every gradient), accumulated in double in ParamSet order.
double GlobalGradNorm(model::ParamSet& params);

// Clip scale for a measured norm: min(1, clip / norm) (1 when clip = 0).
double ClipScale(double grad_norm, double grad_clip);

// The kernel's hyper-parameters for one parameter: the config at learning rate lr, weight decay
// only where the parameter takes it (ParamInfo::weight_decay), gradients scaled by grad_scale.
// The one place AdamWStep and ZeroOptimizer's shard update build them.
kernels::AdamWHyper AdamWHyperFor(const AdamWConfig& config, bool weight_decay, double lr,
                                  double grad_scale);

// One AdamW step at learning rate lr; `step` is 1-based. Returns nothing; grads are untouched.
void AdamWStep(model::ParamSet& params, const AdamWConfig& config, double lr, double grad_scale,
               int64_t step);

}  // namespace pentamesh::train

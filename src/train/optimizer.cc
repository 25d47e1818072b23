#include "train/optimizer.h"

#include <cmath>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/elementwise.h"

namespace pentamesh::train {

double GlobalGradNorm(model::ParamSet& params) {
  double sum = 0;
  params.ForEach([&](const model::ParamInfo&, core::Tensor, core::Tensor g, core::Tensor,
                     core::Tensor) { sum += kernels::sum_squares(g); });
  return std::sqrt(sum);
}

double ClipScale(double grad_norm, double grad_clip) {
  if (grad_clip <= 0 || grad_norm <= grad_clip) return 1.0;
  return grad_clip / (grad_norm + 1e-6);
}

kernels::AdamWHyper AdamWHyperFor(const AdamWConfig& c, bool weight_decay, double lr,
                                  double grad_scale) {
  return {.lr = static_cast<float>(lr),
          .beta1 = static_cast<float>(c.beta1),
          .beta2 = static_cast<float>(c.beta2),
          .eps = static_cast<float>(c.eps),
          .weight_decay = weight_decay ? static_cast<float>(c.weight_decay) : 0.0f,
          .grad_scale = static_cast<float>(grad_scale)};
}

void AdamWStep(model::ParamSet& params, const AdamWConfig& c, double lr, double grad_scale,
               int64_t step) {
  params.ForEach([&](const model::ParamInfo& info, core::Tensor w, core::Tensor g, core::Tensor m,
                     core::Tensor v) {
    kernels::adamw_update(w, m, v, g, AdamWHyperFor(c, info.weight_decay, lr, grad_scale), step);
  });
  params.SyncWeightsFromMaster();
}

}  // namespace pentamesh::train

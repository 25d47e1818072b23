// AdamW update (decoupled weight decay, PyTorch's torch.optim.AdamW arithmetic):
//   w *= 1 - lr * wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// step is 1-based. All of w, g, m, v are fp32 and the same size.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;  // g is multiplied by this first (clipping)
};

void adamw_update(Tensor w, Tensor m, Tensor v, ConstTensor g, const AdamWHyper& hyper,
                  int64_t step);

}  // namespace pentamesh::kernels

// RMSNorm: y = x / sqrt(mean(x^2) + eps) * w, per row of H elements.
// T = rows (tokens), H = hidden. rstd (T) is the only thing backward needs besides x and w.
#pragma once

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

// y (T, H), rstd (T); x (T, H), w (H).
void rmsnorm_forward(Tensor y, Tensor rstd, ConstTensor x, ConstTensor w, float eps);
// dx (T, H) = ...; dw (H) += ...
void rmsnorm_backward(Tensor dx, Tensor dw, ConstTensor dy, ConstTensor x, ConstTensor w,
                      ConstTensor rstd);

}  // namespace pentamesh::kernels

// SwiGLU gate: g = silu(a) * b element-wise, silu(a) = a * sigmoid(a).
// a, b, g: (T, F). In backward da and db are written (not accumulated).
#pragma once

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

void swiglu_forward(Tensor g, ConstTensor a, ConstTensor b);
void swiglu_backward(Tensor da, Tensor db, ConstTensor dg, ConstTensor a, ConstTensor b);

}  // namespace pentamesh::kernels

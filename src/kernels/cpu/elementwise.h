// Small element-wise and row helpers the layers share: residual adds, row gather/scatter for MoE
// dispatch, row softmax for routers. Shapes are checked; rows are the leading dim.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

void copy(Tensor y, ConstTensor x);                // y = x
void add(Tensor y, ConstTensor a, ConstTensor b);  // y = a + b (y may alias a or b)
void add_inplace(Tensor y, ConstTensor x);         // y += x
void scale_inplace(Tensor y, float s);             // y *= s
void fill(Tensor y, float value);
// y[r] = x[index[r]] for r < rows(y); x and y have the same row width.
void gather_rows(Tensor y, ConstTensor x, const int32_t* index);
// y[index[r]] += scale[r] * x[r]  (scale may be null for 1).
void scatter_add_rows(Tensor y, ConstTensor x, const int32_t* index, const float* scale);
// Row-wise softmax of (T, E); probs may alias logits. lse (T) optional (may be empty).
void softmax_rows(Tensor probs, Tensor lse, ConstTensor logits);
// Sum of squares in double (for the global grad norm).
double sum_squares(ConstTensor x);

}  // namespace pentamesh::kernels

// Dense fp32 matrix multiply on CPU through OpenBLAS: sgemm, or sgemv when op(a) is one row (a
// decode step; OpenBLAS 0.3.21 packs b for an M = 1 sgemm and reads it at half the rate).
// A tensor of any rank is read as a 2-D matrix (numel / last_dim, last_dim), row-major.
// Invariant: the result is bitwise reproducible for a fixed thread count (OpenBLAS partitions
// deterministically), which the determinism test relies on.
#pragma once

#include <string>

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

enum class Trans { kNo, kYes };

// c = alpha * op(a) @ op(b) + beta * c.  op(a): (M, K), op(b): (K, N), c: (M, N).
void matmul(Tensor c, ConstTensor a, ConstTensor b, Trans trans_a, Trans trans_b,
            float alpha = 1.0f, float beta = 0.0f);

// Linear layer with PyTorch's weight layout w: (out, in). w may be f32 or bf16; a bf16 w is widened
// to fp32 in tiles of rows just before sgemm (Debian's OpenBLAS has no bf16 GEMM).
// y (T, out) = x (T, in) @ w^T  [+ y when accumulate]
void linear_forward(Tensor y, ConstTensor x, ConstTensor w, bool accumulate = false);
// dx (T, in) = dy @ w  [+ dx when accumulate_dx];  dw (out, in) += dy^T @ x.
void linear_backward_input(Tensor dx, ConstTensor dy, ConstTensor w, bool accumulate_dx = false);
void linear_backward_weight(Tensor dw, ConstTensor dy, ConstTensor x);

// Sets the BLAS thread count (0 = leave OpenBLAS's default).
void SetBlasThreads(int threads);
int BlasThreads();
// OpenBLAS's build description (version, target core, threading), e.g. "OpenBLAS 0.3.21 ...".
std::string BlasConfig();

}  // namespace pentamesh::kernels

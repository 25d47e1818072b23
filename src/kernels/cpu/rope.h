// Rotary position embedding (rotate-half convention of Llama/HF): for i < D/2 the pair
// (x_i, x_{i+D/2}) at position p rotates by angle p * f_i, with the inverse frequencies
// f_i = theta^(-2i/D) (RopeDefaultInverseFrequencies) or any others (a scaled RoPE:
// model/rope_frequencies.h).
// x is (T = B*S, N, D) with N heads; the position of row t is pos0 + t % S.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

// f_i = theta^(-2i/D) for i < D/2. REQUIRES: head_dim even.
std::vector<double> RopeDefaultInverseFrequencies(int64_t head_dim, double theta);

// cos/sin tables for positions [0, max_positions) and head dim D.
struct RopeTable {
  RopeTable(int64_t max_positions, int64_t head_dim, double theta);
  // REQUIRES: inv_freq holds D/2 values.
  RopeTable(int64_t max_positions, const std::vector<double>& inv_freq);
  int64_t max_positions, head_dim;
  std::vector<float> cos, sin;  // (max_positions, D/2)
};

// In place allowed (y may alias x). seq_len = S; pos0 = position of the first row of each sequence.
void rope_forward(Tensor y, ConstTensor x, const RopeTable& table, int64_t seq_len,
                  int64_t pos0 = 0);
// The inverse rotation applied to dy.
void rope_backward(Tensor dx, ConstTensor dy, const RopeTable& table, int64_t seq_len,
                   int64_t pos0 = 0);

}  // namespace pentamesh::kernels

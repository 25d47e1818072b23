#include "kernels/cpu/rope.h"

#include <cmath>

namespace pentamesh::kernels {

std::vector<double> RopeDefaultInverseFrequencies(int64_t head_dim, double theta) {
  PM_CHECK(head_dim % 2 == 0) << "rope head_dim must be even, got " << head_dim;
  std::vector<double> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  return f;
}

RopeTable::RopeTable(int64_t max_pos, int64_t dim, double theta)
    : RopeTable(max_pos, RopeDefaultInverseFrequencies(dim, theta)) {}

RopeTable::RopeTable(int64_t max_pos, const std::vector<double>& inv_freq)
    : max_positions(max_pos), head_dim(2 * static_cast<int64_t>(inv_freq.size())) {
  const int64_t half = head_dim / 2;
  cos.resize(static_cast<size_t>(max_pos * half));
  sin.resize(cos.size());
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv_freq[static_cast<size_t>(i)];
      cos[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      sin[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  }
}

namespace {

// sign = +1 rotates forward, -1 rotates back (the transpose).
void Rotate(Tensor y, ConstTensor x, const RopeTable& table, int64_t seq_len, int64_t pos0,
            float sign) {
  const int64_t D = table.head_dim, half = D / 2;
  PM_CHECK(x.numel() == y.numel()) << "rope x/y";
  PM_CHECK(x.numel() % (seq_len * D) == 0) << "rope: numel not a multiple of S*D";
  PM_CHECK(x.shape().rank == 3 && x.dim(2) == D)
      << "rope x must be (T, N, D), got " << x.shape().ToString();
  const int64_t T = x.dim(0), N = x.dim(1);
  PM_CHECK(pos0 + seq_len <= table.max_positions) << "rope position beyond table";
  const float* px = x.f32();
  float* py = y.f32();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = pos0 + t % seq_len;
    const float* c = table.cos.data() + pos * half;
    const float* s = table.sin.data() + pos * half;
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = px + (t * N + n) * D;
      float* yr = py + (t * N + n) * D;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = xr[i], x2 = xr[i + half];
        yr[i] = x1 * c[i] - sign * x2 * s[i];
        yr[i + half] = x2 * c[i] + sign * x1 * s[i];
      }
    }
  }
}

}  // namespace

void rope_forward(Tensor y, ConstTensor x, const RopeTable& table, int64_t seq_len, int64_t pos0) {
  Rotate(y, x, table, seq_len, pos0, 1.0f);
}
void rope_backward(Tensor dx, ConstTensor dy, const RopeTable& table, int64_t seq_len,
                   int64_t pos0) {
  Rotate(dx, dy, table, seq_len, pos0, -1.0f);
}

}  // namespace pentamesh::kernels

#include "kernels/cpu/matmul.h"

#include <cblas.h>

namespace pentamesh::kernels {
namespace {

struct Mat {
  int64_t rows, cols;
};
Mat As2D(const core::Shape& s) {
  PM_CHECK(s.rank >= 1) << "matmul of a scalar";
  const int64_t cols = s.dims[s.rank - 1];
  return {cols > 0 ? s.numel() / cols : 0, cols};
}

}  // namespace

void matmul(Tensor c, ConstTensor a, ConstTensor b, Trans trans_a, Trans trans_b, float alpha,
            float beta) {
  const Mat ma = As2D(a.shape()), mb = As2D(b.shape()), mc = As2D(c.shape());
  const bool ta = trans_a == Trans::kYes, tb = trans_b == Trans::kYes;
  const int64_t m = ta ? ma.cols : ma.rows, k = ta ? ma.rows : ma.cols;
  const int64_t kb = tb ? mb.cols : mb.rows, n = tb ? mb.rows : mb.cols;
  PM_CHECK(k == kb) << "inner dims " << a.shape().ToString() << " x " << b.shape().ToString();
  PM_CHECK(mc.rows == m && mc.cols == n)
      << "c " << c.shape().ToString() << " want (" << m << ", " << n << ")";
  if (m == 0 || n == 0) return;
  if (k == 0) {
    float* pc = c.f32();
    for (int64_t i = 0; i < m * n; ++i) pc[i] = beta == 0.0f ? 0.0f : beta * pc[i];
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a.f32(),
              static_cast<int>(ma.cols), b.f32(), static_cast<int>(mb.cols), beta, c.f32(),
              static_cast<int>(n));
}

void linear_forward(Tensor y, ConstTensor x, ConstTensor w, bool accumulate) {
  matmul(y, x, w, Trans::kNo, Trans::kYes, 1.0f, accumulate ? 1.0f : 0.0f);
}

void linear_backward_input(Tensor dx, ConstTensor dy, ConstTensor w, bool accumulate_dx) {
  matmul(dx, dy, w, Trans::kNo, Trans::kNo, 1.0f, accumulate_dx ? 1.0f : 0.0f);
}

void linear_backward_weight(Tensor dw, ConstTensor dy, ConstTensor x) {
  matmul(dw, dy, x, Trans::kYes, Trans::kNo, 1.0f, 1.0f);
}

void SetBlasThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}
int BlasThreads() { return openblas_get_num_threads(); }

}  // namespace pentamesh::kernels

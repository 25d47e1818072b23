#include "kernels/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "core/bf16.h"

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
  if (m == 1) {
    // One row (a decode step): a matrix-vector product. Debian's OpenBLAS (0.3.21) packs the whole
    // of b for an M = 1 sgemm, which halves the rate of reading b; sgemv streams it once.
    // op(a) is one row of K contiguous elements (a: (1, K), or (K, 1) with ld 1).
    float* pc = c.f32();
    if (beta == 0.0f) std::fill(pc, pc + n, 0.0f);  // beta 0 must not read c (it may hold NaN)
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, static_cast<int>(mb.rows),
                static_cast<int>(mb.cols), alpha, b.f32(), static_cast<int>(mb.cols), a.f32(), 1,
                beta, pc, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a.f32(),
              static_cast<int>(ma.cols), b.f32(), static_cast<int>(mb.cols), beta, c.f32(),
              static_cast<int>(n));
}

namespace {

// Rows of a bf16 weight widened per tile, so a bf16 weight never exists whole in fp32.
constexpr int64_t kWidenRows = 128;

std::vector<float>& WidenScratch() {
  thread_local std::vector<float> scratch;
  return scratch;
}

// Calls fn(tile_f32 (rows, in), row_begin, row_end) for tiles of a bf16 weight (out, in).
template <typename Fn>
void ForEachWidenedTile(ConstTensor w, Fn fn) {
  const Mat mw = As2D(w.shape());
  std::vector<float>& scratch = WidenScratch();
  scratch.resize(static_cast<size_t>(std::min(kWidenRows, mw.rows) * mw.cols));
  for (int64_t r0 = 0; r0 < mw.rows; r0 += kWidenRows) {
    const int64_t r1 = std::min(mw.rows, r0 + kWidenRows);
    core::Bf16ToFloat(scratch.data(), w.bf16() + r0 * mw.cols, (r1 - r0) * mw.cols);
    fn(ConstTensor(scratch.data(), {r1 - r0, mw.cols}), r0, r1);
  }
}

}  // namespace

void linear_forward(Tensor y, ConstTensor x, ConstTensor w, bool accumulate) {
  if (w.dtype() == core::Dtype::kF32) {
    matmul(y, x, w, Trans::kNo, Trans::kYes, 1.0f, accumulate ? 1.0f : 0.0f);
    return;
  }
  const Mat mx = As2D(x.shape()), my = As2D(y.shape()), mw = As2D(w.shape());
  PM_CHECK(mw.cols == mx.cols && my.cols == mw.rows && my.rows == mx.rows) << "linear shapes";
  ForEachWidenedTile(w, [&](ConstTensor tile, int64_t r0, int64_t r1) {
    if (mx.rows == 0) return;
    if (mx.rows == 1) {  // a decode step: the tile's outputs are contiguous, matmul's sgemv
      matmul(Tensor(y.f32() + r0, {1, r1 - r0}), x, tile, Trans::kNo, Trans::kYes, 1.0f,
             accumulate ? 1.0f : 0.0f);
      return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(mx.rows),
                static_cast<int>(r1 - r0), static_cast<int>(mx.cols), 1.0f, x.f32(),
                static_cast<int>(mx.cols), tile.f32(), static_cast<int>(mx.cols),
                accumulate ? 1.0f : 0.0f, y.f32() + r0, static_cast<int>(my.cols));
  });
}

void linear_backward_input(Tensor dx, ConstTensor dy, ConstTensor w, bool accumulate_dx) {
  if (w.dtype() == core::Dtype::kF32) {
    matmul(dx, dy, w, Trans::kNo, Trans::kNo, 1.0f, accumulate_dx ? 1.0f : 0.0f);
    return;
  }
  const Mat mdx = As2D(dx.shape()), mdy = As2D(dy.shape()), mw = As2D(w.shape());
  PM_CHECK(mw.rows == mdy.cols && mdx.cols == mw.cols && mdx.rows == mdy.rows) << "linear shapes";
  if (!accumulate_dx) std::fill(dx.f32(), dx.f32() + dx.numel(), 0.0f);
  ForEachWidenedTile(w, [&](ConstTensor tile, int64_t r0, int64_t r1) {
    if (mdy.rows == 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(mdy.rows),
                static_cast<int>(mw.cols), static_cast<int>(r1 - r0), 1.0f, dy.f32() + r0,
                static_cast<int>(mdy.cols), tile.f32(), static_cast<int>(mw.cols), 1.0f, dx.f32(),
                static_cast<int>(mdx.cols));
  });
}

void linear_backward_weight(Tensor dw, ConstTensor dy, ConstTensor x) {
  matmul(dw, dy, x, Trans::kYes, Trans::kNo, 1.0f, 1.0f);
}

void SetBlasThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}
int BlasThreads() { return openblas_get_num_threads(); }
std::string BlasConfig() { return openblas_get_config(); }

}  // namespace pentamesh::kernels

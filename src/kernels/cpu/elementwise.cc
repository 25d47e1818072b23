#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pentamesh::kernels {
namespace {
int64_t RowWidth(const core::Shape& s) {
  return s.rank >= 1 && s.dims[0] > 0 ? s.numel() / s.dims[0] : 0;
}
}  // namespace

void copy(Tensor y, ConstTensor x) {
  PM_CHECK(y.numel() == x.numel()) << "copy " << y.numel() << " vs " << x.numel();
  if (x.numel() > 0) std::memmove(y.f32(), x.f32(), static_cast<size_t>(x.numel()) * 4);
}

void add(Tensor y, ConstTensor a, ConstTensor b) {
  const int64_t n = y.numel();
  PM_CHECK(a.numel() == n && b.numel() == n) << "add sizes";
  float* py = y.f32();
  const float* pa = a.f32();
  const float* pb = b.f32();
  for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
}

void add_inplace(Tensor y, ConstTensor x) {
  const int64_t n = y.numel();
  PM_CHECK(x.numel() == n) << "add_inplace sizes";
  float* py = y.f32();
  const float* px = x.f32();
  for (int64_t i = 0; i < n; ++i) py[i] += px[i];
}

void scale_inplace(Tensor y, float s) {
  float* py = y.f32();
  for (int64_t i = 0; i < y.numel(); ++i) py[i] *= s;
}

void fill(Tensor y, float value) {
  float* py = y.f32();
  std::fill(py, py + y.numel(), value);
}

void gather_rows(Tensor y, ConstTensor x, const int32_t* index) {
  const int64_t w = RowWidth(y.shape()), rows = y.numel() > 0 ? y.dim(0) : 0;
  PM_CHECK(RowWidth(x.shape()) == w) << "gather row widths";
  const int64_t x_rows = x.numel() / std::max<int64_t>(w, 1);
  for (int64_t r = 0; r < rows; ++r) {
    PM_CHECK(index[r] >= 0 && index[r] < x_rows) << "gather index " << index[r];
    std::memcpy(y.f32() + r * w, x.f32() + index[r] * w, static_cast<size_t>(w) * 4);
  }
}

void scatter_add_rows(Tensor y, ConstTensor x, const int32_t* index, const float* scale) {
  const int64_t w = RowWidth(x.shape()), rows = x.numel() > 0 ? x.dim(0) : 0;
  PM_CHECK(RowWidth(y.shape()) == w) << "scatter row widths";
  const int64_t y_rows = y.numel() / std::max<int64_t>(w, 1);
  for (int64_t r = 0; r < rows; ++r) {
    PM_CHECK(index[r] >= 0 && index[r] < y_rows) << "scatter index " << index[r];
    float* dst = y.f32() + index[r] * w;
    const float* src = x.f32() + r * w;
    const float s = scale ? scale[r] : 1.0f;
    for (int64_t i = 0; i < w; ++i) dst[i] += s * src[i];
  }
}

void softmax_rows(Tensor probs, Tensor lse, ConstTensor logits) {
  const int64_t rows = logits.dim(0), w = RowWidth(logits.shape());
  PM_CHECK(probs.numel() == logits.numel()) << "softmax sizes";
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = logits.f32() + r * w;
    float* out = probs.f32() + r * w;
    const float mx = *std::max_element(in, in + w);
    double sum = 0;
    for (int64_t i = 0; i < w; ++i) sum += static_cast<double>(std::exp(in[i] - mx));
    const float l = mx + static_cast<float>(std::log(sum));
    for (int64_t i = 0; i < w; ++i) out[i] = std::exp(in[i] - l);
    if (!lse.empty()) lse.f32()[r] = l;
  }
}

double sum_squares(ConstTensor x) {
  double s = 0;
  const float* p = x.f32();
  for (int64_t i = 0; i < x.numel(); ++i) s += static_cast<double>(p[i]) * p[i];
  return s;
}

}  // namespace pentamesh::kernels

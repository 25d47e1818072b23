#include "kernels/cpu/rmsnorm.h"

#include <cmath>

namespace pentamesh::kernels {

void rmsnorm_forward(Tensor y, Tensor rstd, ConstTensor x, ConstTensor w, float eps) {
  const int64_t H = w.numel(), T = x.numel() / H;
  PM_CHECK(x.numel() == T * H && y.numel() == T * H) << "x/y not (T, " << H << ")";
  PM_CHECK(rstd.numel() == T) << "rstd " << rstd.numel() << " want " << T;
  const float* px = x.f32();
  const float* pw = w.f32();
  float* py = y.f32();
  float* pr = rstd.f32();
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = px + t * H;
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(H) + eps));
    pr[t] = r;
    float* yr = py + t * H;
    for (int64_t i = 0; i < H; ++i) yr[i] = xr[i] * r * pw[i];
  }
}

void rmsnorm_backward(Tensor dx, Tensor dw, ConstTensor dy, ConstTensor x, ConstTensor w,
                      ConstTensor rstd) {
  const int64_t H = w.numel(), T = x.numel() / H;
  PM_CHECK(dy.numel() == T * H && dx.numel() == T * H && dw.numel() == H) << "shapes";
  const float* px = x.f32();
  const float* pw = w.f32();
  const float* pdy = dy.f32();
  const float* pr = rstd.f32();
  float* pdx = dx.f32();
  float* pdw = dw.f32();
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = px + t * H;
    const float* dyr = pdy + t * H;
    const float r = pr[t];
    double dot = 0;  // sum_i dy_i * w_i * x_i
    for (int64_t i = 0; i < H; ++i) dot += static_cast<double>(dyr[i]) * pw[i] * xr[i];
    const float c = static_cast<float>(dot / static_cast<double>(H)) * r * r * r;
    float* dxr = pdx + t * H;
    for (int64_t i = 0; i < H; ++i) {
      dxr[i] = dyr[i] * pw[i] * r - xr[i] * c;
      pdw[i] += dyr[i] * xr[i] * r;
    }
  }
}

}  // namespace pentamesh::kernels

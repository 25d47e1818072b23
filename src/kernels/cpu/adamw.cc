#include "kernels/cpu/adamw.h"

#include <cmath>

namespace pentamesh::kernels {

void adamw_update(Tensor w, Tensor m, Tensor v, ConstTensor g, const AdamWHyper& h, int64_t step) {
  const int64_t n = w.numel();
  PM_CHECK(m.numel() == n && v.numel() == n && g.numel() == n) << "adamw sizes";
  PM_CHECK(step >= 1) << "adamw step is 1-based, got " << step;
  const double t = static_cast<double>(step);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), t));
  const float bc2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), t)));
  const float step_size = h.lr / bc1;
  const float decay = 1.0f - h.lr * h.weight_decay;
  float* pw = w.f32();
  float* pm = m.f32();
  float* pv = v.f32();
  const float* pg = g.f32();
  for (int64_t i = 0; i < n; ++i) {
    const float gi = pg[i] * h.grad_scale;
    pm[i] = h.beta1 * pm[i] + (1.0f - h.beta1) * gi;
    pv[i] = h.beta2 * pv[i] + (1.0f - h.beta2) * gi * gi;
    const float denom = std::sqrt(pv[i]) / bc2_sqrt + h.eps;
    pw[i] = pw[i] * decay - step_size * pm[i] / denom;
  }
}

}  // namespace pentamesh::kernels

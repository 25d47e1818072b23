#include "kernels/cpu/swiglu.h"

#include <cmath>

#include "kernels/cpu/fast_math.h"

namespace pentamesh::kernels {

void swiglu_forward(Tensor g, ConstTensor a, ConstTensor b) {
  const int64_t n = a.numel();
  PM_CHECK(b.numel() == n && g.numel() == n) << "swiglu shapes";
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* pg = g.f32();
  for (int64_t i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + FastExp(-pa[i]));
    pg[i] = pa[i] * sig * pb[i];
  }
}

void swiglu_backward(Tensor da, Tensor db, ConstTensor dg, ConstTensor a, ConstTensor b) {
  const int64_t n = a.numel();
  PM_CHECK(b.numel() == n && dg.numel() == n && da.numel() == n && db.numel() == n)
      << "swiglu shapes";
  const float* pa = a.f32();
  const float* pb = b.f32();
  const float* pdg = dg.f32();
  float* pda = da.f32();
  float* pdb = db.f32();
  for (int64_t i = 0; i < n; ++i) {
    const float x = pa[i];
    const float sig = 1.0f / (1.0f + FastExp(-x));
    const float silu = x * sig;
    const float dsilu = sig * (1.0f + x * (1.0f - sig));
    const float d = pdg[i];
    pdb[i] = d * silu;
    pda[i] = d * pb[i] * dsilu;
  }
}

}  // namespace pentamesh::kernels

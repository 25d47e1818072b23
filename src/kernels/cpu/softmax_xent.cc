#include "kernels/cpu/softmax_xent.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/fast_math.h"

namespace pentamesh::kernels {

double softmax_xent_forward(Tensor lse, ConstTensor logits, ConstTensor targets) {
  const int64_t T = targets.numel(), V = logits.numel() / std::max<int64_t>(T, 1);
  PM_CHECK(logits.numel() == T * V && lse.numel() == T) << "xent shapes";
  const float* pl = logits.f32();
  const int32_t* pt = targets.i32();
  float* plse = lse.f32();
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = pl + t * V;
    const float mx = *std::max_element(row, row + V);
    float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // independent partial sums: vectorizes
    int64_t i = 0;
    for (; i + 8 <= V; i += 8) {
      for (int j = 0; j < 8; ++j) lanes[j] += FastExp(row[i + j] - mx);
    }
    double sum = 0;
    for (; i < V; ++i) sum += static_cast<double>(FastExp(row[i] - mx));
    for (float l : lanes) sum += static_cast<double>(l);
    plse[t] = mx + static_cast<float>(std::log(sum));
    if (pt[t] >= 0) {
      PM_CHECK(pt[t] < V) << "target " << pt[t] << " >= vocab " << V;
      loss += static_cast<double>(plse[t]) - row[pt[t]];
    }
  }
  return loss;
}

void softmax_xent_backward(Tensor dlogits, ConstTensor logits, ConstTensor lse, ConstTensor targets,
                           float scale) {
  const int64_t T = targets.numel(), V = logits.numel() / std::max<int64_t>(T, 1);
  PM_CHECK(dlogits.numel() == T * V && lse.numel() == T) << "xent shapes";
  const float* pl = logits.f32();
  const float* plse = lse.f32();
  const int32_t* pt = targets.i32();
  float* pd = dlogits.f32();
  for (int64_t t = 0; t < T; ++t) {
    float* drow = pd + t * V;
    const float* row = pl + t * V;
    if (pt[t] < 0) {
      std::fill(drow, drow + V, 0.0f);
      continue;
    }
    const float lse_t = plse[t];
    for (int64_t i = 0; i < V; ++i) drow[i] = FastExp(row[i] - lse_t) * scale;
    drow[pt[t]] -= scale;
  }
}

}  // namespace pentamesh::kernels

// Tensor views, the tagged allocator's live/peak accounting, the counter RNG and bf16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/allocator.h"
#include "core/bf16.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace pentamesh::core {
namespace {

TEST(Tensor, ShapeRowsReshape) {
  float data[24];
  for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
  Tensor t(data, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 96);
  Tensor r = t.Rows(1, 2);
  EXPECT_EQ(r.shape(), Shape({1, 3, 4}));
  EXPECT_EQ(r.f32()[0], 12.0f);
  EXPECT_EQ(t.Reshape({6, 4}).dim(0), 6);
  EXPECT_EQ(Shape({2, 3}).ToString(), "(2, 3)");
  EXPECT_DEATH(t.Reshape({5, 5}), "check failed");
  EXPECT_DEATH(t.Rows(1, 3), "check failed");
  EXPECT_DEATH((void)t.i32(), "want i32");
}

TEST(Allocator, LiveAndPeakPerTag) {
  Allocator alloc;
  {
    Buffer w(alloc, MemTag::kWeights, Dtype::kF32, {10, 10});
    Buffer a(alloc, MemTag::kActivations, Dtype::kBF16, {8});
    EXPECT_EQ(alloc.live_bytes(MemTag::kWeights), 400);
    EXPECT_EQ(alloc.live_bytes(MemTag::kActivations), 16);
    EXPECT_EQ(alloc.live_bytes_total(), 416);
    EXPECT_EQ(w.f32()[99], 0.0f);  // zero-filled
    { Buffer b(alloc, MemTag::kActivations, Dtype::kF32, {100}); }
    EXPECT_EQ(alloc.live_bytes(MemTag::kActivations), 16);
    EXPECT_EQ(alloc.peak_bytes(MemTag::kActivations), 416);
    Buffer moved = std::move(a);
    EXPECT_EQ(alloc.live_bytes(MemTag::kActivations), 16);
    EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move)
  }
  EXPECT_EQ(alloc.live_bytes_total(), 0);
  EXPECT_EQ(alloc.peak_bytes_total(), 816);
  EXPECT_EQ(alloc.peak_bytes(MemTag::kGrads), 0);
  alloc.ResetPeaks();
  EXPECT_EQ(alloc.peak_bytes(MemTag::kActivations), 0);
}

TEST(CounterRng, PureAndNormal) {
  EXPECT_EQ(CounterRng::Normal(1, 2, 3), CounterRng::Normal(1, 2, 3));
  EXPECT_NE(CounterRng::Normal(1, 2, 3), CounterRng::Normal(1, 2, 4));
  EXPECT_NE(CounterRng::Normal(1, 2, 3), CounterRng::Normal(2, 2, 3));
  EXPECT_NE(HashName("layers.0.attention.wq"), HashName("layers.0.attention.wk"));
  double sum = 0, sum2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = CounterRng::Normal(7, HashName("w"), static_cast<uint64_t>(i));
    sum += x;
    sum2 += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.01);
}

TEST(Bf16, RoundToNearestEven) {
  EXPECT_EQ(RoundBf16(1.0f), 1.0f);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(RoundBf16(1.0f + 0x1.0p-8f), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(RoundBf16(1.0f + 3 * 0x1.0p-8f), 1.0f + 0x1.0p-6f);
  EXPECT_EQ(RoundBf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 1.0f + 0x1.0p-7f);  // above half: up
  EXPECT_EQ(RoundBf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(RoundBf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(RoundBf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  for (float x : {0.1f, 3.14159f, -1e-3f, 65504.f}) {
    EXPECT_EQ(RoundBf16(RoundBf16(x)), RoundBf16(x));
    EXPECT_LE(std::fabs(RoundBf16(x) - x), std::fabs(x) * 0x1.0p-8f);
  }
}

}  // namespace
}  // namespace pentamesh::core

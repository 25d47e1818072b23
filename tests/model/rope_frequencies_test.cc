// RoPE's inverse frequencies with a model's rope_scaling, against Llama 3.1's rule worked by hand
// on its released configuration (head_dim 128, rope_theta 500,000, rope_scaling llama3: factor 8,
// low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192): the wavelength
// 2 pi 500000^(i/64) is below 8192/4 = 2048 for i <= 28 (kept), above 8192 for i >= 35 (divided by
// 8), and smoothly interpolated for i = 29..34.
#include "model/rope_frequencies.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace pentamesh::model {
namespace {

spec::RopeScaling Llama31() {
  return {.kind = spec::RopeScalingKind::kLlama3,
          .factor = 8,
          .low_freq_factor = 1,
          .high_freq_factor = 4,
          .original_max_positions = 8192};
}

double Unscaled(int i) { return std::pow(500000.0, -static_cast<double>(i) / 64.0); }

TEST(RopeFrequencies, NoneIsTheDefaultAndBaseChangesTheta) {
  const std::vector<double> none = RopeInverseFrequencies(128, 500000, {});
  ASSERT_EQ(none.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_DOUBLE_EQ(none[static_cast<size_t>(i)], Unscaled(i)) << i;
  const std::vector<double> base = RopeInverseFrequencies(
      128, 10000, {.kind = spec::RopeScalingKind::kBaseChange, .theta = 500000});
  for (int i = 0; i < 64; ++i) EXPECT_DOUBLE_EQ(base[static_cast<size_t>(i)], Unscaled(i)) << i;
}

TEST(RopeFrequencies, Llama31ByHand) {
  const std::vector<double> f = RopeInverseFrequencies(128, 500000, Llama31());
  ASSERT_EQ(f.size(), 64u);
  for (int i = 0; i <= 28; ++i) EXPECT_DOUBLE_EQ(f[static_cast<size_t>(i)], Unscaled(i)) << i;
  for (int i = 35; i < 64; ++i) EXPECT_DOUBLE_EQ(f[static_cast<size_t>(i)], Unscaled(i) / 8) << i;
  // i = 30: wavelength 2 pi 500000^(30/64) = 2 pi x 469.2 = 2948.3; smooth = (8192 / 2948.3 - 1)
  // / (4 - 1) = 0.5928; f = (1 - smooth) f / 8 + smooth f = 0.6437 f.
  const double w30 = 2 * std::numbers::pi / Unscaled(30);
  EXPECT_NEAR(w30, 2948.3, 0.05);
  EXPECT_NEAR((8192.0 / w30 - 1) / 3, 0.5928, 1e-4);
  EXPECT_NEAR(f[30] / Unscaled(30), 0.6437, 1e-4);
  // Monotone: the interpolation never reorders the frequencies.
  for (size_t i = 1; i < f.size(); ++i) EXPECT_LT(f[i], f[i - 1]) << i;
}

}  // namespace
}  // namespace pentamesh::model

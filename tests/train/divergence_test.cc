// LossSpikeDetector: a loss above factor x the running median is a spike, only once enough losses
// are known; factor 0 is off.
#include "train/divergence.h"

#include <gtest/gtest.h>

namespace pentamesh::train {
namespace {

TEST(LossSpike, FlagsALossAboveFactorTimesTheMedian) {
  LossSpikeDetector d(3.0, 16);
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(d.Observe(100.0)) << i;  // too few to judge
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(d.Observe(2.0 + 0.01 * i)) << i;
  // The window now holds seven 100s and eight ~2s: median 2.07 < 6.3.
  EXPECT_TRUE(d.Observe(6.3));
  EXPECT_NEAR(d.last_median(), 2.07, 1e-9);
  EXPECT_FALSE(d.Observe(6.0));  // below 3 x the median (which the spike itself joined)
}

TEST(LossSpike, FactorZeroIsOff) {
  LossSpikeDetector d(0, 4);
  for (int i = 0; i < 8; ++i) d.Observe(1.0);
  EXPECT_FALSE(d.Observe(1e30));
}

TEST(LossSpike, WindowForgetsOldLosses) {
  LossSpikeDetector d(2.0, 8);
  for (int i = 0; i < 8; ++i) d.Observe(10.0);
  for (int i = 0; i < 8; ++i) d.Observe(1.0);  // the 10s have left the window
  EXPECT_TRUE(d.Observe(2.5));
  EXPECT_DOUBLE_EQ(d.last_median(), 1.0);
}

}  // namespace
}  // namespace pentamesh::train

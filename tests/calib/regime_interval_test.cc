// The regime intervals (calib/regime_interval.h): the distance's closed form, which runs a query
// picks, the order statistics the interval is made of, the widening where no run is near, the
// table's TOML round trip and bad rows, and the leave-one-out coverage count.
#include "calib/regime_interval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace pentamesh::calib {
namespace {

Regime R(int64_t seq, bool moe, bool fp8, int64_t gpus, const std::string& stack = "megatron",
         const std::string& gpu = "h100") {
  return {seq, moe, fp8, gpus, stack, gpu};
}

CalibrationPoint P(const std::string& id, const Regime& r, double error) {
  return {id, "g", r, error, "5-fold"};
}

// A table like the shipped one: many dense 4K-8K runs with small errors, a few MoE runs at 4K and
// dense runs at 32K with larger ones, and runs of another stack and GPU.
std::vector<CalibrationPoint> Table() {
  std::vector<CalibrationPoint> t;
  const int64_t gpus[] = {64, 128, 256, 512, 1024, 2048};
  for (int i = 0; i < 12; ++i) {  // dense 4K megatron h100: errors -5%..+5%
    t.push_back(P("dense4k-" + std::to_string(i), R(4096, false, false, gpus[i % 6]),
                  -0.05 + 0.01 * (i % 11)));
  }
  for (int i = 0; i < 6; ++i) {  // dense 8K
    t.push_back(P("dense8k-" + std::to_string(i), R(8192, false, false, gpus[i]), 0.02));
  }
  for (int i = 0; i < 6; ++i) {  // MoE 4K: -20%..+25%
    t.push_back(P("moe4k-" + std::to_string(i), R(4096, true, false, gpus[i]), -0.2 + 0.09 * i));
  }
  for (int i = 0; i < 4; ++i) {  // dense 32K FP8
    t.push_back(P("long32k-" + std::to_string(i), R(32768, false, true, 16 << i), 0.15 + 0.03 * i));
  }
  for (int i = 0; i < 5; ++i) {  // torchtitan a100
    t.push_back(P("tt-" + std::to_string(i), R(4096, false, false, 64, "torchtitan", "a100"), 0.1));
  }
  return t;
}

TEST(RegimeDistance, ClosedForm) {
  const Regime a = R(4096, false, false, 128);
  EXPECT_DOUBLE_EQ(RegimeDistance(a, a), 0);
  // Sequence x32 = 5 doublings / 2; GPUs x8 = 3 doublings / 3; MoE, FP8, stack, GPU: 1 each.
  EXPECT_DOUBLE_EQ(RegimeDistance(a, R(131072, false, false, 128)), 2.5);
  EXPECT_DOUBLE_EQ(RegimeDistance(a, R(4096, false, false, 1024)), 1.0);
  EXPECT_DOUBLE_EQ(RegimeDistance(a, R(4096, true, true, 128, "torchtitan", "a100")), 4.0);
  EXPECT_DOUBLE_EQ(RegimeDistance(R(131072, true, false, 1024), a), 2.5 + 1 + 1);
  EXPECT_DOUBLE_EQ(RegimeDistance(a, R(8192, false, false, 64)),
                   RegimeDistance(R(8192, false, false, 64), a));
}

TEST(RegimeInterval, Dense4kQueryPicksDense4kRuns) {
  const std::vector<CalibrationPoint> t = Table();
  const RegimeInterval iv = IntervalNear(t, R(4096, false, false, 256));
  EXPECT_TRUE(iv.calibrated);
  ASSERT_GE(iv.used.size(), static_cast<size_t>(kNeighbours));
  for (const Neighbour& nb : iv.used) {
    EXPECT_FALSE(nb.point->regime.moe) << nb.point->id;
    EXPECT_EQ(nb.point->regime.stack, "megatron") << nb.point->id;
    EXPECT_LE(nb.point->regime.seq_len, 8192) << nb.point->id;
  }
  // The nearest are the 4K runs at 256 GPUs (distance 0), then 4K at 128 and 512 (1/3).
  EXPECT_EQ(iv.used[0].point->regime.seq_len, 4096);
  EXPECT_EQ(iv.used[0].point->regime.gpus, 256);
  EXPECT_DOUBLE_EQ(iv.used[0].distance, 0);
  for (size_t i = 1; i < iv.used.size(); ++i)
    EXPECT_GE(iv.used[i].distance, iv.used[i - 1].distance);
  EXPECT_DOUBLE_EQ(iv.widen, 1.0);  // mean distance < 1: not widened
  EXPECT_DOUBLE_EQ(iv.lo, iv.raw_lo);
  // Order statistics: n used, i = max(1, floor((n + 1) / 10)); measured / predicted = 1/(1+e).
  std::vector<double> ratios;
  for (const Neighbour& nb : iv.used) ratios.push_back(1 / (1 + nb.point->error));
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  const size_t i = std::max<size_t>(1, (n + 1) / 10);
  EXPECT_DOUBLE_EQ(iv.raw_lo, ratios[i - 1]);
  EXPECT_DOUBLE_EQ(iv.raw_hi, ratios[n - i]);
  EXPECT_GT(iv.lo, 1 / 1.06);  // the dense runs' errors are within +-5%
  EXPECT_LT(iv.hi, 1 / 0.94);
}

TEST(RegimeInterval, Moe128kWithNoSuchRunIsUncalibratedAndWider) {
  const std::vector<CalibrationPoint> t = Table();
  const RegimeInterval dense = IntervalNear(t, R(4096, false, false, 256));
  const Regime q = R(131072, true, false, 1024);
  const RegimeInterval moe = IntervalNear(t, q);
  EXPECT_FALSE(moe.calibrated);
  EXPECT_GT(moe.used.front().distance, kNearDistance);
  EXPECT_GT(moe.mean_distance, kNearDistance);
  EXPECT_DOUBLE_EQ(moe.widen, moe.mean_distance / kNearDistance);
  EXPECT_NEAR(std::log(moe.hi / moe.lo), moe.widen * std::log(moe.raw_hi / moe.raw_lo), 1e-12);
  EXPECT_GT(moe.hi / moe.lo, 2 * dense.hi / dense.lo);
  // The MoE runs at 4K and the long runs are among the ones used; the note says what is missing.
  std::set<std::string> kinds;
  for (const Neighbour& nb : moe.used) kinds.insert(nb.point->id.substr(0, 4));
  EXPECT_TRUE(kinds.count("moe4")) << moe.used.front().point->id;
  const std::string note = UncalibratedNote(t, q, moe);
  EXPECT_NE(note.find("no calibration run with MoE, seq >= 32K, >= 1,024 GPUs on h100"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("nearest: "), std::string::npos) << note;
}

// One regime step away is no longer near: a MoE query whose only runs are dense runs of the same
// sequence, GPUs, stack and GPU (distance exactly 1) is uncalibrated; one doubling less is not.
TEST(RegimeInterval, OneFullStepAwayIsUncalibrated) {
  std::vector<CalibrationPoint> t;
  for (int i = 0; i < 10; ++i)
    t.push_back(P("d" + std::to_string(i), R(8192, false, false, 512), 0.01 * i));
  const RegimeInterval moe = IntervalNear(t, R(8192, true, false, 512));
  EXPECT_DOUBLE_EQ(moe.used.front().distance, 1.0);
  EXPECT_FALSE(moe.calibrated);
  EXPECT_EQ(UncalibratedNote(t, R(8192, true, false, 512), moe)
                .rfind("no calibration run with MoE on h100", 0),
            0u);
  const RegimeInterval longer = IntervalNear(t, R(16384, false, false, 512));
  EXPECT_DOUBLE_EQ(longer.used.front().distance, 0.5);
  EXPECT_TRUE(longer.calibrated);
}

TEST(RegimeInterval, TiesAreAllUsedAndSkipLeavesOneOut) {
  std::vector<CalibrationPoint> t;
  for (int i = 0; i < 15; ++i)
    t.push_back(P("a" + std::to_string(i), R(4096, false, false, 64), 0.01 * i));
  t.push_back(P("far", R(4096, true, true, 64), 0.5));
  const RegimeInterval iv = IntervalNear(t, R(4096, false, false, 64));
  EXPECT_EQ(iv.used.size(), 15u);  // 10 nearest plus the 5 tied with the 10th
  // n = 15: i = floor(16 / 10) = 1: min and max of the 15 ratios.
  EXPECT_DOUBLE_EQ(iv.raw_hi, 1.0);
  EXPECT_DOUBLE_EQ(iv.raw_lo, 1 / 1.14);
  const RegimeInterval skip = IntervalNear(t, R(4096, false, false, 64), 14);
  EXPECT_EQ(skip.used.size(), 14u);
  for (const Neighbour& nb : skip.used) EXPECT_NE(nb.point->id, "a14");
  EXPECT_DOUBLE_EQ(skip.raw_lo, 1 / 1.13);
}

TEST(RegimeTable, TomlRoundTripAndBadRows) {
  const std::vector<CalibrationPoint> t = Table();
  auto back = PointsFromToml(PointsToml(t), "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ((*back)[i].id, t[i].id);
    EXPECT_DOUBLE_EQ(RegimeDistance((*back)[i].regime, t[i].regime), 0);
    EXPECT_NEAR((*back)[i].error, t[i].error, 5e-5);
  }
  auto missing = PointsFromToml("run = [ { id = \"x\", seq = 4096 } ]", "t.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("t.toml: run[0]: needs id"), std::string::npos)
      << missing.status().message();
  auto unknown = PointsFromToml(
      "run = [ { id = \"x\", group = \"g\", stack = \"megatron\", gpu = \"h100\", seq = 8, "
      "gpus = 8, moe = false, fp8 = false, error = 0.1, error_from = \"5-fold\", sku = 1 } ]",
      "t.toml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("t.toml: run[0]: unknown key 'sku'"), std::string::npos)
      << unknown.status().message();
  auto bad = PointsFromToml(
      "run = [ { id = \"x\", group = \"g\", stack = \"megatron\", gpu = \"h100\", seq = 0, gpus = "
      "8, "
      "moe = false, fp8 = false, error = 0.1, error_from = \"5-fold\" } ]",
      "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x': needs seq >= 1"), std::string::npos)
      << bad.status().message();
}

// Leave-one-out coverage counted by hand on a table of identical regimes: 11 runs whose ratios
// are distinct; each left out, the other 10 give [min, max] of theirs, so the two extremes fall
// outside and the other 9 inside.
TEST(RegimeTable, LeaveOneOutCoverageCountsByHand) {
  std::vector<CalibrationPoint> t;
  for (int i = 0; i < 11; ++i)
    t.push_back(P("r" + std::to_string(i), R(4096, false, false, 64), 0.01 * i));
  const std::vector<CoverageRow> rows = LeaveOneOutCoverage(t);
  ASSERT_EQ(rows.front().regime, "all");
  EXPECT_EQ(rows.front().n, 11);
  EXPECT_EQ(rows.front().regime_inside, 9);
  EXPECT_EQ(rows.front().uncalibrated, 0);
  // Stack-wide: the 10th-90th percentile of the other 10 (interpolated) excludes more.
  EXPECT_EQ(rows.front().stack_n, 11);
  EXPECT_LT(rows.front().stack_inside, 9);
  EXPECT_EQ(rows[1].regime, "MoE");
  EXPECT_EQ(rows[1].n, 0);
}

TEST(RegimeTable, ShippedTableReads) {
  auto points = ShippedPoints();
  ASSERT_TRUE(points.ok()) << points.status().message();
  EXPECT_GE(points->size(), 150u);
  std::set<std::string> ids;
  for (const CalibrationPoint& p : *points) EXPECT_TRUE(ids.insert(p.id).second) << p.id;
}

}  // namespace
}  // namespace pentamesh::calib

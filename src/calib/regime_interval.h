// Intervals that know the regime: the 80% interval of a prediction taken from the calibration runs
// nearest the query, not from every run of its stack.
//
// A regime is what the cost model's accuracy differs by (issue 29: dense short-context runs about
// 6% median error, MoE about 25%, >= 32K tokens about 20%, FP8 at scale -17 to -20%): the sequence
// length, MoE or dense, FP8 or not, the GPU count, the stack and the GPU class. Each calibration
// run (configs/presets/calibration/runs.toml, written by `validate --write-presets`) carries its
// regime and its out-of-fold error: predicted / measured - 1 by a fit that did not see it (5-fold
// for the rows the presets are fitted on, the shipped fit for the held-out rows).
//
// The rule (docs/COST_MODEL.md, "Regime intervals"; no constant is fitted):
//   distance = |log2(seq / seq')| / 2 + |log2(gpus / gpus')| / 3
//            + [MoE differs] + [FP8 differs] + [stack differs] + [GPU class differs]
// One unit is one step of the accuracy report's regimes: a factor 4 in sequence (8K -> 32K), a
// factor 8 in GPUs (128 -> 1,024), or one categorical difference.
//   1. The kNeighbours nearest runs (distance, then id), with every run tied with the last.
//   2. Their n ratios measured / predicted, sorted; the interval is [r_(i), r_(n+1-i)] with
//      i = max(1, floor((n + 1) / 10)): for a query exchangeable with the n runs it holds the
//      measured value with probability (n + 1 - 2i) / (n + 1) >= 80% (distribution-free).
//   3. Widened in log space about its centre by w = max(1, mean distance / kNearDistance).
//   4. Calibrated when a run lies closer than kNearDistance (less than one regime step);
//      else the plan says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "calib/runs.h"
#include "core/status.h"
#include "spec/cluster_spec.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::calib {

struct Regime {
  int64_t seq_len = 0;
  bool moe = false;
  bool fp8 = false;
  int64_t gpus = 0;
  std::string stack;      // stack profile (megatron, torchtitan, ...)
  std::string gpu_class;  // GpuClass of the cluster
};
Regime RegimeOf(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                const spec::TrainSpec& train, const std::string& stack);
Regime RegimeOf(const Run& run);
// "MoE, seq 131072, bf16, 1024 GPUs, megatron on h100"
std::string Describe(const Regime& r);

inline constexpr double kSeqDoublingsPerUnit = 2;  // a factor 4 in sequence length
inline constexpr double kGpuDoublingsPerUnit = 3;  // a factor 8 in GPU count
inline constexpr double kNearDistance = 1;         // calibrated: a run closer than one unit
inline constexpr int kNeighbours = 10;             // runs an interval is taken from (and ties)
inline constexpr double kIntervalCoverage = 0.8;   // the interval's nominal coverage

double RegimeDistance(const Regime& a, const Regime& b);

// A calibration run: its regime and its out-of-fold error.
struct CalibrationPoint {
  std::string id;
  std::string group;
  Regime regime;
  double error = 0;        // predicted / measured - 1 by a fit that did not see the run
  std::string error_from;  // "5-fold" or "held out"
};

struct Neighbour {
  const CalibrationPoint* point = nullptr;
  double distance = 0;
};

struct RegimeInterval {
  double lo = 1, hi = 1;          // measured / predicted, after widening
  double raw_lo = 1, raw_hi = 1;  // before widening
  bool calibrated = false;        // a run lies closer than kNearDistance
  double mean_distance = 0;       // of the runs used
  double widen = 1;               // w
  std::vector<Neighbour> used;    // nearest first
};

inline constexpr size_t kNoSkip = static_cast<size_t>(-1);
// The interval for `query` from `points`, leaving out points[skip] (leave-one-out checks).
// REQUIRES: points holds at least one point besides `skip`.
RegimeInterval IntervalNear(const std::vector<CalibrationPoint>& points, const Regime& query,
                            size_t skip = kNoSkip);

// Why a regime is uncalibrated: "no calibration run with MoE at seq >= 32K on h100 (nearest:
// <id>, <its regime>, at distance 1.6)". REQUIRES: !iv.calibrated.
std::string UncalibratedNote(const std::vector<CalibrationPoint>& points, const Regime& query,
                             const RegimeInterval& iv);

// The shipped table: configs/presets/calibration/runs.toml.
core::Result<std::vector<CalibrationPoint>> ShippedPoints();
core::Result<std::vector<CalibrationPoint>> PointsFromToml(const std::string& text,
                                                           const std::string& source);
std::string PointsToml(const std::vector<CalibrationPoint>& points);

// Leave-one-out coverage of the intervals on the table itself: for each point, is its measured /
// predicted inside the interval built without it; the regime interval beside the stack-wide one
// (10th-90th percentile of the other runs of its stack and GPU class, as the presets' [interval]).
struct CoverageRow {
  std::string regime;  // "all", "MoE", "seq >= 32K", "FP8", ">= 1,024 GPUs", "dense < 32K"
  int n = 0;
  int regime_inside = 0, stack_inside = 0, stack_n = 0;  // stack_n: rows with >= 3 others
  double regime_log_width = 0, stack_log_width = 0;      // median ln(hi / lo)
  int uncalibrated = 0;
};
std::vector<CoverageRow> LeaveOneOutCoverage(const std::vector<CalibrationPoint>& points);

}  // namespace pentamesh::calib

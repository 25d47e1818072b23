// interval_coverage: how often the regime intervals (calib/regime_interval.h) hold the measured
// value, by leave-one-out on the calibration table itself (configs/presets/calibration/runs.toml,
// the shipped runs with their out-of-fold errors), beside the stack-wide interval the presets
// held before (10th-90th percentile of the other runs of the same stack and GPU class).
// bench/calibration.sh runs it; docs/COST_MODEL.md ("Regime intervals") quotes it.
//   interval_coverage
// For each regime of the accuracy report (a run is in every regime it matches): rows, the share
// of rows whose measured / predicted lies inside the interval built without them, the median
// width ln(hi / lo) of those intervals, and the rows whose regime is uncalibrated.
#include <fmt/format.h>

#include "calib/regime_interval.h"

namespace pm = pentamesh;

int main() {
  auto points = pm::calib::ShippedPoints();
  if (!points.ok()) {
    fmt::print(stderr, "interval_coverage: {}\n", points.status().message());
    return 2;
  }
  fmt::print(
      "leave-one-out coverage of the 80% intervals on {} calibration runs "
      "(configs/presets/calibration/runs.toml)\n",
      points->size());
  fmt::print("  {:<14} {:>4}  {:>22}  {:>9}  {:>22}  {:>9}\n", "regime", "runs",
             "regime interval inside", "ln(hi/lo)", "stack-wide inside", "ln(hi/lo)");
  for (const pm::calib::CoverageRow& r : pm::calib::LeaveOneOutCoverage(*points)) {
    const auto share = [](int inside, int n) {
      return n > 0 ? fmt::format("{:>3}/{:<3} {:>5.1f}%", inside, n, 100.0 * inside / n)
                   : std::string("-");
    };
    fmt::print("  {:<14} {:>4}  {:>22}  {:>9.3f}  {:>22}  {:>9.3f}   ({} uncalibrated)\n", r.regime,
               r.n, share(r.regime_inside, r.n), r.regime_log_width,
               share(r.stack_inside, r.stack_n), r.stack_log_width, r.uncalibrated);
  }
  return 0;
}

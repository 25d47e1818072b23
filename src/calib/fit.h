// Fitting the calibration parameters to measured runs, and cross-validating the fit.
//
// The fit minimises, by Levenberg-Marquardt (Eigen's MINPACK port, numerical Jacobian),
//   sum over runs of L(log(predicted / measured))  +  sum over parameters of (w (p - p0) / range)^2
// where L is the soft-L1 loss at scale c (FitOptions::loss_scale): L(r) = 2 c^2 (sqrt(1 + (r/c)^2)
// - 1), r^2 for errors well inside c and growing as 2 c |r| beyond, so a run the model does not
// explain (a +140% MoE row) weighs like a 20% one pulled along, not like a square of its error:
// it cannot drag every parameter of its stack and GPU off the runs the model does explain.
// over the parameters the runs inform (InformedParams: a GPU class's GEMM efficiency when a run
// used that GPU, its FP8 speedup when one ran FP8 (a stack's row-wise FP8 speedup when that FP8
// was row-wise), a stack's overhead when a run used that stack, its attention rate when one used
// flash attention, its TP overlap when one overlapped TP, its eager traffic when one ran unfused
// kernels), minus those FitOptions holds fixed. Each parameter stays
// inside its bounds (ParamDefs) through a logistic change of variable; the second sum is a weak
// pull toward the prior p0 (the physical start value, or a user's stack preset) that keeps a
// parameter few runs inform from wandering.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "calib/profile.h"
#include "calib/regime_interval.h"
#include "calib/runs.h"

namespace pentamesh::calib {

struct FitOptions {
  Calibration prior;          // p0: the prior's values (unset ones: ParamDef::start)
  double prior_weight = 1.0;  // w
  double loss_scale = 0.2;    // c of the soft-L1 loss, in log(predicted / measured); 0: squares
  // Parameters left out of the fit (by name, e.g. "fp8_gemm_speedup").
  std::vector<std::string> fixed;
};

struct FreeParam {
  const ParamDef* def = nullptr;
  std::string key;  // stack name or GPU class
  std::string Name() const { return key + "." + def->name; }
};

struct FitResult {
  Calibration cal;               // the prior with the fitted values set
  std::vector<FreeParam> free;   // what was fitted
  std::vector<int> informed_by;  // runs informing each free parameter
  int evaluations = 0;
  double rms_log = 0;  // root mean square of log(predicted / measured) over the runs
};

// The parameters `runs` inform (see the header comment), in a fixed order.
std::vector<FreeParam> InformedParams(const std::vector<const Run*>& runs,
                                      const FitOptions& options);

// REQUIRES: every run usable.
FitResult Fit(const std::vector<const Run*>& runs, const FitOptions& options);

// Relative errors (predicted / measured - 1) of each run when it is predicted by a fit that did
// not see it: k folds of a shuffle with a fixed seed; every group left out in turn; every run
// left out in turn. Same order as `runs`.
std::vector<double> KFoldErrors(const std::vector<const Run*>& runs, const FitOptions& options,
                                int folds, uint64_t seed);
std::vector<double> LeaveOneGroupOutErrors(const std::vector<const Run*>& runs,
                                           const FitOptions& options);
std::vector<double> LeaveOneOutErrors(const std::vector<const Run*>& runs,
                                      const FitOptions& options);

// In-sample errors under a calibration.
std::vector<double> Errors(const std::vector<const Run*>& runs, const Calibration& cal);

}  // namespace pentamesh::calib

namespace pentamesh::calib {
// 80% intervals of measured / predicted by GPU class, from errors (predicted / measured - 1) of
// predictions that did not see their run (leave-one-out, k-fold).
std::map<std::string, Interval> IntervalsFrom(const std::vector<const Run*>& runs,
                                              const std::vector<double>& errors);
// The interval for a cluster under a profile; nullptr when no calibration covers it.
const Interval* IntervalFor(const Profile& profile, const std::string& cluster_name);
}  // namespace pentamesh::calib

namespace pentamesh::calib {

// The shipped calibration, fitted on published runs: one profile per stack (its parameters and
// the k-fold intervals of its runs by GPU class), the GPU classes' parameters, and every run's
// regime with its out-of-fold error (calib/regime_interval.h): the k-fold error of each fitted
// run, and for each usable run of `held_out` its error under the fit (which did not see it).
struct ShippedFit {
  std::vector<Profile> stacks;
  std::map<std::string, std::map<std::string, double>> gpu;  // GPU class -> param -> value
  std::vector<CalibrationPoint> points;
  std::string runs_path;  // the runs files fitted on, as FitShipped was given them
};
ShippedFit FitShipped(const std::vector<Run>& runs, const std::string& runs_path, int folds,
                      uint64_t seed, const std::vector<Run>& held_out = {});
// Writes configs/presets/stacks/<stack>.toml for every stack and sets gemm_efficiency and
// fp8_gemm_speedup in configs/presets/clusters/<preset>.toml for every preset of a fitted GPU
// class (the other lines of those files are kept), and configs/presets/calibration/runs.toml (the
// points). `presets_dir` is configs/presets.
core::Status WritePresets(const ShippedFit& fit, const std::string& presets_dir);

}  // namespace pentamesh::calib

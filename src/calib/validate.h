// Predictions for measured runs and their errors: what `pentamesh validate` prints and what the
// fit minimises. Error = predicted / measured - 1 (tokens/s per GPU); the fit works on
// log(predicted / measured).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "calib/profile.h"
#include "calib/runs.h"
#include "cost/cost.h"

namespace pentamesh::calib {

struct Prediction {
  double tokens_per_s_gpu = 0;  // predicted
  double error = 0;             // predicted / measured - 1
  double memory_gib = 0;        // predicted per-GPU total (GiB)
  bool fits = false;            // predicted memory within capacity
  cost::Estimate estimate;
};

// Predicts one usable run under a calibration. REQUIRES: run.usable().
Prediction Predict(const Run& run, const Calibration& cal);

struct ErrorStats {
  int n = 0;
  double median_abs = 0, p90_abs = 0, median_signed = 0, mean_abs = 0;
};
// Statistics of relative errors (predicted / measured - 1).
ErrorStats Stats(std::vector<double> errors);
// The q-quantile (0..1) of values, linear interpolation; 0 for an empty list.
double Quantile(std::vector<double> values, double q);

}  // namespace pentamesh::calib

namespace pentamesh::calib {

struct FitOptions;

// `pentamesh validate`: every run predicted with the shipped calibration and, with cross
// validation, by a fresh fit (in-sample), by k-fold and by leave-one-group-out.
struct ValidateOptions {
  bool cross_validate = false;
  int folds = 5;
  uint64_t seed = 1;
};

struct RowResult {
  const Run* run = nullptr;
  Prediction shipped;                                     // under the shipped calibration (presets)
  double fit_error = 0, kfold_error = 0, logo_error = 0;  // with cross_validate (held out: fit)
};

struct GroupSummary {
  std::string group;
  ErrorStats shipped, fit, kfold, logo;
  ErrorStats memory;  // predicted / published per-GPU memory - 1, where published
  // Runs that ran at their layout and yet are predicted over the GPU's capacity: the memory
  // model's misses (every row of a published-runs file is a run that fitted).
  int64_t over_capacity = 0;
};

struct Validation {
  std::vector<RowResult> rows;        // usable runs
  std::vector<const Run*> unusable;   // with the reason in Run::unusable
  std::vector<GroupSummary> groups;   // by source group
  std::vector<GroupSummary> gpus;     // by GPU class
  std::vector<GroupSummary> regimes;  // by regime (kRegimes order; a run may be in several)
  GroupSummary all;
  bool cross_validated = false;
  bool held_out = false;  // ValidateHeldOut: fit_error is the error under a fit on other runs
  int fitted_on = 0;      // held out: the usable runs that fit saw
  std::vector<std::pair<std::string, double>> fitted;  // the in-sample fit: name, value
};

// The regimes accuracy is reported by (issue 29's case study lives in them): MoE, sequences of
// 32K tokens or more, FP8 GEMMs, 1,024 GPUs or more. A run is in every regime it matches.
inline constexpr const char* kRegimes[] = {"MoE", "seq >= 32K", "FP8", ">= 1,024 GPUs"};
bool InRegime(const Run& run, const std::string& regime);

// The shipped calibration: every stack preset's parameters and the cluster presets' GPU values.
core::Result<Calibration> ShippedCalibration();

Validation ValidateRuns(const std::vector<Run>& runs, const Calibration& shipped,
                        const ValidateOptions& options);

// A genuine held-out check: the calibration is fitted on `fit_runs` only (their usable rows) and
// every usable row of `held_out` is predicted by that fit (RowResult::fit_error) and by the
// shipped calibration; the summaries hold shipped and fit statistics (no k-fold, no logo).
Validation ValidateHeldOut(const std::vector<Run>& fit_runs, const std::vector<Run>& held_out,
                           const Calibration& shipped);

}  // namespace pentamesh::calib

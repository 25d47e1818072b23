// Predictions for measured runs and error statistics.
#include "calib/validate.h"

#include <algorithm>
#include <cmath>

namespace pentamesh::calib {

Prediction Predict(const Run& run, const Calibration& cal) {
  spec::ClusterSpec cluster = run.cluster;
  cost::CostParams params;
  ApplyCalibration(cal, run.stack, run.facts, cluster, params);
  const cost::Context ctx(run.model, cluster, run.train, params);
  Prediction p;
  p.estimate = cost::EstimateLayout(ctx, run.layout, /*explain=*/false);
  const double gpus = static_cast<double>(cluster.gpus());
  p.tokens_per_s_gpu = p.estimate.tokens_per_s / gpus;
  p.error = p.tokens_per_s_gpu / run.tokens_per_s_gpu - 1.0;
  p.memory_gib = p.estimate.memory.total / (1024.0 * 1024.0 * 1024.0);
  p.fits = p.estimate.fits;
  return p;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] * (1.0 - frac) + values[hi] * frac;
}

ErrorStats Stats(std::vector<double> errors) {
  ErrorStats s;
  s.n = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  std::vector<double> abs_errors;
  double sum = 0;
  for (double e : errors) {
    abs_errors.push_back(std::fabs(e));
    sum += std::fabs(e);
  }
  s.median_abs = Quantile(abs_errors, 0.5);
  s.p90_abs = Quantile(abs_errors, 0.9);
  s.median_signed = Quantile(errors, 0.5);
  s.mean_abs = sum / static_cast<double>(errors.size());
  return s;
}

}  // namespace pentamesh::calib

#include "calib/fit.h"

namespace pentamesh::calib {
namespace {

// fit: rows carry fit_error (cross-validated or held out); cv: also k-fold and leave-group-out.
GroupSummary Summarize(const std::string& name, const std::vector<const RowResult*>& rows,
                       bool with_fit, bool cv) {
  GroupSummary g;
  g.group = name;
  std::vector<double> shipped, fit_errors, kfold, logo, memory;
  for (const RowResult* r : rows) {
    shipped.push_back(r->shipped.error);
    if (with_fit) fit_errors.push_back(r->fit_error);
    if (cv) {
      kfold.push_back(r->kfold_error);
      logo.push_back(r->logo_error);
    }
    if (r->run->memory_gib) memory.push_back(r->shipped.memory_gib / *r->run->memory_gib - 1.0);
    if (!r->shipped.fits) ++g.over_capacity;
  }
  g.shipped = Stats(shipped);
  g.fit = Stats(fit_errors);
  g.kfold = Stats(kfold);
  g.logo = Stats(logo);
  g.memory = Stats(memory);
  return g;
}

// The by-group, by-GPU, by-regime and overall summaries of v.rows.
void SummarizeAll(Validation& v) {
  const bool fit = v.cross_validated || v.held_out;
  const bool cv = v.cross_validated;
  std::map<std::string, std::vector<const RowResult*>> by_group, by_gpu;
  std::vector<const RowResult*> all;
  for (const RowResult& r : v.rows) {
    by_group[r.run->group].push_back(&r);
    by_gpu[GpuClass(r.run->cluster.name)].push_back(&r);
    all.push_back(&r);
  }
  for (const auto& [g, rows] : by_group) v.groups.push_back(Summarize(g, rows, fit, cv));
  for (const auto& [g, rows] : by_gpu) v.gpus.push_back(Summarize(g, rows, fit, cv));
  for (const char* regime : kRegimes) {
    std::vector<const RowResult*> rows;
    for (const RowResult& r : v.rows) {
      if (InRegime(*r.run, regime)) rows.push_back(&r);
    }
    v.regimes.push_back(Summarize(regime, rows, fit, cv));
  }
  v.all = Summarize("all", all, fit, cv);
}

}  // namespace

bool InRegime(const Run& run, const std::string& regime) {
  if (regime == kRegimes[0]) return run.model.is_moe();
  if (regime == kRegimes[1]) return run.train.seq_len >= 32768;
  if (regime == kRegimes[2]) return run.facts.fp8;
  if (regime == kRegimes[3]) return run.cluster.gpus() >= 1024;
  return false;
}

core::Result<Calibration> ShippedCalibration() {
  Calibration cal;
  for (const std::string& name : StackNames()) {
    PM_ASSIGN_OR_RETURN(Profile p, LoadProfile(name));
    cal.stack[p.stack] = p.params;
  }
  return cal;  // GPU parameters: the cluster presets' (Calibration::Get falls back to them)
}

Validation ValidateRuns(const std::vector<Run>& runs, const Calibration& shipped,
                        const ValidateOptions& options) {
  Validation v;
  std::vector<const Run*> usable;
  for (const Run& r : runs) {
    if (r.usable()) {
      usable.push_back(&r);
    } else {
      v.unusable.push_back(&r);
    }
  }
  for (const Run* r : usable) v.rows.push_back({r, Predict(*r, shipped)});
  v.cross_validated = options.cross_validate;
  if (options.cross_validate && !usable.empty()) {
    const FitOptions fit_options;
    const FitResult fit = Fit(usable, fit_options);
    const auto in_sample = Errors(usable, fit.cal);
    const auto kfold = KFoldErrors(usable, fit_options, options.folds, options.seed);
    const auto logo = LeaveOneGroupOutErrors(usable, fit_options);
    for (size_t i = 0; i < usable.size(); ++i) {
      v.rows[i].fit_error = in_sample[i];
      v.rows[i].kfold_error = kfold[i];
      v.rows[i].logo_error = logo[i];
    }
    for (const FreeParam& f : fit.free) {
      const auto& table = f.def->scope == Scope::kGpu ? fit.cal.gpu : fit.cal.stack;
      v.fitted.emplace_back(f.Name(), table.at(f.key).at(f.def->name));
    }
  }
  SummarizeAll(v);
  return v;
}

Validation ValidateHeldOut(const std::vector<Run>& fit_runs, const std::vector<Run>& held_out,
                           const Calibration& shipped) {
  Validation v;
  v.held_out = true;
  std::vector<const Run*> fit_on, predict;
  for (const Run& r : fit_runs) {
    if (r.usable()) fit_on.push_back(&r);
    if (r.unreadable) v.unusable.push_back(&r);  // bad input all the same
  }
  for (const Run& r : held_out) {
    if (r.usable()) {
      predict.push_back(&r);
    } else {
      v.unusable.push_back(&r);
    }
  }
  v.fitted_on = static_cast<int>(fit_on.size());
  for (const Run* r : predict) v.rows.push_back({r, Predict(*r, shipped)});
  if (!fit_on.empty() && !predict.empty()) {
    const FitResult fit = Fit(fit_on, FitOptions{});
    const auto errors = Errors(predict, fit.cal);
    for (size_t i = 0; i < predict.size(); ++i) v.rows[i].fit_error = errors[i];
    for (const FreeParam& f : fit.free) {
      const auto& table = f.def->scope == Scope::kGpu ? fit.cal.gpu : fit.cal.stack;
      v.fitted.emplace_back(f.Name(), table.at(f.key).at(f.def->name));
    }
  }
  SummarizeAll(v);
  return v;
}

}  // namespace pentamesh::calib

// Levenberg-Marquardt fit of the calibration parameters (Eigen) and its cross-validation.
#include "calib/fit.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <unsupported/Eigen/NonLinearOptimization>
#include <unsupported/Eigen/NumericalDiff>

#include "calib/validate.h"

namespace pentamesh::calib {
namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Bounded parameter <-> unbounded variable.
double ToValue(const ParamDef& d, double x) { return d.lo + (d.hi - d.lo) * Sigmoid(x); }
double ToVariable(const ParamDef& d, double value) {
  const double u = std::clamp((value - d.lo) / (d.hi - d.lo), 1e-6, 1.0 - 1e-6);
  return std::log(u / (1.0 - u));
}

double LogResidual(const Run& run, const Calibration& cal) {
  const Prediction p = Predict(run, cal);
  if (!(p.tokens_per_s_gpu > 0) || !std::isfinite(p.tokens_per_s_gpu)) return 10.0;
  return std::log(p.tokens_per_s_gpu / run.tokens_per_s_gpu);
}

// The residual whose square is the soft-L1 loss of r at scale c: c^2 * 2 (sqrt(1 + (r/c)^2) - 1),
// r^2 for |r| << c and 2 c |r| for |r| >> c (c = 0: r itself, least squares).
double SoftL1(double r, double c) {
  if (c <= 0) return r;
  const double z = r / c;
  return std::copysign(c * std::sqrt(2.0 * (std::sqrt(1.0 + z * z) - 1.0)), r);
}

void Set(Calibration& cal, const FreeParam& f, double value) {
  (f.def->scope == Scope::kGpu ? cal.gpu : cal.stack)[f.key][f.def->name] = value;
}

struct Problem {
  typedef double Scalar;
  enum { InputsAtCompileTime = Eigen::Dynamic, ValuesAtCompileTime = Eigen::Dynamic };
  typedef Eigen::VectorXd InputType;
  typedef Eigen::VectorXd ValueType;
  typedef Eigen::MatrixXd JacobianType;

  const std::vector<const Run*>* runs;
  const std::vector<FreeParam>* free;
  const std::vector<double>* prior;
  Calibration base;
  double weight;
  double loss_scale;
  mutable int evaluations = 0;

  int inputs() const { return static_cast<int>(free->size()); }
  int values() const { return static_cast<int>(runs->size() + free->size()); }

  Calibration At(const Eigen::VectorXd& x) const {
    Calibration cal = base;
    for (size_t i = 0; i < free->size(); ++i) {
      Set(cal, (*free)[i], ToValue(*(*free)[i].def, x(static_cast<Eigen::Index>(i))));
    }
    return cal;
  }
  int operator()(const Eigen::VectorXd& x, Eigen::VectorXd& out) const {
    ++evaluations;
    const Calibration cal = At(x);
    Eigen::Index row = 0;
    for (const Run* run : *runs) out(row++) = SoftL1(LogResidual(*run, cal), loss_scale);
    for (size_t i = 0; i < free->size(); ++i) {
      const ParamDef& d = *(*free)[i].def;
      const double v = ToValue(d, x(static_cast<Eigen::Index>(i)));
      out(row++) = weight * (v - (*prior)[i]) / (d.hi - d.lo);
    }
    return 0;
  }
};

bool Fixed(const FitOptions& o, const char* name) {
  return std::find(o.fixed.begin(), o.fixed.end(), name) != o.fixed.end();
}

}  // namespace

std::vector<FreeParam> InformedParams(const std::vector<const Run*>& runs,
                                      const FitOptions& options) {
  std::set<std::pair<std::string, std::string>> seen;  // (param, key)
  std::vector<FreeParam> free;
  auto add = [&](const char* name, const std::string& key) {
    if (Fixed(options, name) || !seen.insert({name, key}).second) return;
    free.push_back({FindParam(name), key});
  };
  for (const Run* r : runs) {
    const std::string cls = GpuClass(r->cluster.name);
    add("gemm_efficiency", cls);
    if (r->facts.fp8 && r->cluster.peak_fp8_tflops > 0) {
      if (r->facts.fp8_rowwise) {
        add("fp8_rowwise_speedup", r->stack);
      } else {
        add("fp8_gemm_speedup", cls);
      }
    }
    add("layer_overhead_us", r->stack);
    if (r->facts.flash_attention) add("attention_relative", r->stack);
    if (r->facts.flash_attention) add("attention_factor", cls);
    if (r->facts.tp_comm_overlap && r->layout.tp > 1) add("tp_overlap", r->stack);
    if (!r->facts.compiled) add("eager_traffic", r->stack);
    if (r->model.is_moe()) add("expert_gemm_us", r->stack);
    if (r->facts.ep_a2a_overlap && r->model.is_moe() && r->layout.ep > 1)
      add("ep_overlap", r->stack);
  }
  std::sort(free.begin(), free.end(), [](const FreeParam& a, const FreeParam& b) {
    return std::pair(std::string(a.def->name), a.key) < std::pair(std::string(b.def->name), b.key);
  });
  return free;
}

std::vector<double> Errors(const std::vector<const Run*>& runs, const Calibration& cal) {
  std::vector<double> errors;
  for (const Run* r : runs) errors.push_back(Predict(*r, cal).error);
  return errors;
}

FitResult Fit(const std::vector<const Run*>& runs, const FitOptions& options) {
  FitResult result;
  result.free = InformedParams(runs, options);
  result.cal = options.prior;
  std::vector<double> prior;
  Eigen::VectorXd x(static_cast<Eigen::Index>(result.free.size()));
  for (size_t i = 0; i < result.free.size(); ++i) {
    const FreeParam& f = result.free[i];
    int informed = 0;
    for (const Run* r : runs) {
      informed += (f.def->scope == Scope::kGpu ? GpuClass(r->cluster.name) : r->stack) == f.key;
    }
    result.informed_by.push_back(informed);
    prior.push_back(options.prior.Get(*f.def, f.key));
    x(static_cast<Eigen::Index>(i)) = ToVariable(*f.def, prior.back());
  }
  if (result.free.empty() || runs.empty()) {
    result.rms_log = 0;
    return result;
  }
  Problem problem;
  problem.runs = &runs;
  problem.free = &result.free;
  problem.prior = &prior;
  problem.base = options.prior;
  problem.weight = options.prior_weight;
  problem.loss_scale = options.loss_scale;
  Eigen::NumericalDiff<Problem> diff(problem);
  Eigen::LevenbergMarquardt<Eigen::NumericalDiff<Problem>> lm(diff);
  lm.parameters.maxfev = 400 * static_cast<int>(result.free.size() + 1);
  lm.parameters.xtol = 1e-8;
  lm.parameters.ftol = 1e-10;
  const int status = lm.minimize(x);
  if (std::getenv("PM_FIT_DEBUG")) {
    std::fprintf(stderr, "fit: status %d, %d evaluations, %zu params, %zu runs\n", status,
                 diff.evaluations, result.free.size(), runs.size());
  }
  result.cal = diff.At(x);
  // A parameter the fit drives against a bound (sigmoid ~0 or ~1) is reported as the bound: its
  // last digits are round-off, which would differ between builds.
  for (const FreeParam& f : result.free) {
    auto& table = f.def->scope == Scope::kGpu ? result.cal.gpu : result.cal.stack;
    double& v = table[f.key][f.def->name];
    const double margin = 1e-9 * (f.def->hi - f.def->lo);
    if (v - f.def->lo < margin) v = f.def->lo;
    if (f.def->hi - v < margin) v = f.def->hi;
  }
  result.evaluations = diff.evaluations;
  double sum = 0;
  for (const Run* r : runs) sum += std::pow(LogResidual(*r, result.cal), 2);
  result.rms_log = std::sqrt(sum / static_cast<double>(runs.size()));
  return result;
}

namespace {

// Fits on the runs outside `held` and predicts the runs inside it.
void HoldOut(const std::vector<const Run*>& runs, const std::vector<bool>& held,
             const FitOptions& options, std::vector<double>& errors) {
  std::vector<const Run*> train, test;
  std::vector<size_t> test_index;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (held[i]) {
      test.push_back(runs[i]);
      test_index.push_back(i);
    } else {
      train.push_back(runs[i]);
    }
  }
  const FitResult fit = Fit(train, options);
  for (size_t j = 0; j < test.size(); ++j) errors[test_index[j]] = Predict(*test[j], fit.cal).error;
}

}  // namespace

std::vector<double> KFoldErrors(const std::vector<const Run*>& runs, const FitOptions& options,
                                int folds, uint64_t seed) {
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates with the raw engine: portable
    std::swap(order[i - 1], order[rng() % i]);
  }
  std::vector<double> errors(runs.size(), 0.0);
  for (int f = 0; f < folds; ++f) {
    std::vector<bool> held(runs.size(), false);
    for (size_t i = 0; i < order.size(); ++i) {
      if (static_cast<int>(i % static_cast<size_t>(folds)) == f) held[order[i]] = true;
    }
    HoldOut(runs, held, options, errors);
  }
  return errors;
}

std::vector<double> LeaveOneGroupOutErrors(const std::vector<const Run*>& runs,
                                           const FitOptions& options) {
  std::set<std::string> groups;
  for (const Run* r : runs) groups.insert(r->group);
  std::vector<double> errors(runs.size(), 0.0);
  for (const std::string& g : groups) {
    std::vector<bool> held(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) held[i] = runs[i]->group == g;
    HoldOut(runs, held, options, errors);
  }
  return errors;
}

std::vector<double> LeaveOneOutErrors(const std::vector<const Run*>& runs,
                                      const FitOptions& options) {
  std::vector<double> errors(runs.size(), 0.0);
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<bool> held(runs.size(), false);
    held[i] = true;
    HoldOut(runs, held, options, errors);
  }
  return errors;
}

}  // namespace pentamesh::calib

namespace pentamesh::calib {

std::map<std::string, Interval> IntervalsFrom(const std::vector<const Run*>& runs,
                                              const std::vector<double>& errors) {
  std::map<std::string, std::vector<double>> ratios;
  for (size_t i = 0; i < runs.size() && i < errors.size(); ++i) {
    ratios[GpuClass(runs[i]->cluster.name)].push_back(1.0 / (1.0 + errors[i]));
  }
  std::map<std::string, Interval> out;
  for (const auto& [cls, r] : ratios) {
    out[cls] = {Quantile(r, 0.1), Quantile(r, 0.9), static_cast<int>(r.size())};
  }
  return out;
}

const Interval* IntervalFor(const Profile& profile, const std::string& cluster_name) {
  const auto it = profile.intervals.find(GpuClass(cluster_name));
  return it == profile.intervals.end() || it->second.runs < 3 ? nullptr : &it->second;
}

}  // namespace pentamesh::calib

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/output.h"
#include "spec/load_toml.h"

namespace pentamesh::calib {

ShippedFit FitShipped(const std::vector<Run>& runs, const std::string& runs_path, int folds,
                      uint64_t seed, const std::vector<Run>& held_out) {
  std::vector<const Run*> usable;
  for (const Run& r : runs) {
    if (r.usable()) usable.push_back(&r);
  }
  const FitOptions options;
  const FitResult fit = Fit(usable, options);
  const std::vector<double> kfold = KFoldErrors(usable, options, folds, seed);
  ShippedFit out;
  out.runs_path = runs_path;
  out.gpu = fit.cal.gpu;
  for (size_t i = 0; i < usable.size(); ++i) {
    out.points.push_back({usable[i]->id, usable[i]->group, RegimeOf(*usable[i]), kfold[i],
                          fmt::format("{}-fold", folds)});
  }
  for (const Run& r : held_out) {
    if (r.usable()) {
      out.points.push_back({r.id, r.group, RegimeOf(r), Predict(r, fit.cal).error, "held out"});
    }
  }
  for (const StackInfo& info : Stacks()) {
    Profile p;
    p.name = info.name;
    p.stack = info.name;
    p.description = info.description;
    p.defaults = info.defaults;
    std::vector<const Run*> mine;
    std::vector<double> mine_errors;
    std::set<std::string> groups;
    for (size_t i = 0; i < usable.size(); ++i) {
      if (usable[i]->stack != info.name) continue;
      mine.push_back(usable[i]);
      mine_errors.push_back(kfold[i]);
      groups.insert(usable[i]->group);
    }
    std::string group_list;
    for (const auto& g : groups) group_list += (group_list.empty() ? "" : ", ") + g;
    p.fitted_on = mine.empty()
                      ? "no runs: physical start values"
                      : fmt::format("{}: {} runs ({})", runs_path, mine.size(), group_list);
    if (const auto it = fit.cal.stack.find(info.name); it != fit.cal.stack.end()) {
      p.params = it->second;
    }
    p.intervals = IntervalsFrom(mine, mine_errors);
    out.stacks.push_back(std::move(p));
  }
  return out;
}

namespace {

// Replaces (or appends) `key = value` in a TOML file's [cluster] table, keeping every other line.
std::string SetKey(const std::string& text, const std::string& key, double value) {
  std::istringstream in(text);
  std::string line, out;
  bool done = false;
  while (std::getline(in, line)) {
    if (line.rfind(key + " =", 0) == 0) {
      out += fmt::format("{} = {:.4f}\n", key, value);
      done = true;
    } else {
      out += line + "\n";
    }
  }
  if (!done) out += fmt::format("{} = {:.4f}\n", key, value);
  return out;
}

}  // namespace

core::Status WritePresets(const ShippedFit& fit, const std::string& presets_dir) {
  for (const Profile& p : fit.stacks) {
    const std::string path = presets_dir + "/stacks/" + p.name + ".toml";
    const std::string text =
        fmt::format("# Generated by `pentamesh validate --write-presets` from {}\n",
                    fit.runs_path) +
        "# (bash bench/calibration.sh --write); do not edit by hand. docs/COST_MODEL.md explains "
        "each parameter.\n" +
        ProfileToml(p);
    if (const core::Status st = core::WriteFileAtomic(path, text); !st.ok())
      return core::Status::Error("--write-presets: " + st.message());
  }
  if (!fit.points.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(presets_dir + "/calibration", ec);
    const std::string path = presets_dir + "/calibration/runs.toml";
    const std::string text =
        fmt::format("# Generated by `pentamesh validate --write-presets` from {}\n",
                    fit.runs_path) +
        "# (bash bench/calibration.sh --write); do not edit by hand.\n# Each calibration run's "
        "regime and out-of-fold error (predicted / measured - 1): the regime\n# intervals of "
        "calib/regime_interval.h (docs/COST_MODEL.md, \"Regime intervals\").\n" +
        PointsToml(fit.points);
    if (const core::Status st = core::WriteFileAtomic(path, text); !st.ok())
      return core::Status::Error("--write-presets: " + st.message());
  }
  for (const std::string& name : spec::PresetNames("clusters")) {
    const auto it = fit.gpu.find(GpuClass(name));
    if (it == fit.gpu.end()) continue;
    const std::string path = presets_dir + "/clusters/" + name + ".toml";
    PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
    for (const ParamDef& def : ParamDefs()) {  // the GPU-scoped parameters the fit found
      if (def.scope != Scope::kGpu) continue;
      if (const auto v = it->second.find(def.name); v != it->second.end()) {
        text = SetKey(text, def.name, v->second);
      }
    }
    if (const core::Status st = core::WriteFileAtomic(path, text); !st.ok())
      return core::Status::Error("--write-presets: " + st.message());
  }
  return core::Status::Ok();
}

}  // namespace pentamesh::calib

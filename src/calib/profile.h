// Calibration parameters: the few free parameters of the cost model, each per GPU (a SKU class)
// or per software stack, and the profiles that hold them.
//
// A stack profile (configs/presets/stacks/<name>.toml, or a file written by `pentamesh
// calibrate`) holds its stack's parameters, what the stack does by default (fused kernels, TP
// overlap), the prediction intervals measured for it, and, in a user's profile, GPU overrides.
// GPU parameters of the shipped calibration live in the cluster presets (gemm_efficiency,
// fp8_gemm_speedup). docs/COST_MODEL.md lists every parameter, its value and the rows it was
// fitted on.
//
// Invariant: ApplyCalibration is the one place where a stack's parameters and a run's facts become
// cost::CostParams; the planner (--stack, through ApplyProfile) and the calibration (Predict in
// calib/validate.h) both go through it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "calib/runs.h"
#include "core/status.h"
#include "cost/cost.h"
#include "spec/cluster_spec.h"

namespace pentamesh::calib {

enum class Scope { kGpu, kStack };

// One free parameter: bounded, with the value it starts from when nothing informs it.
struct ParamDef {
  const char* name;
  Scope scope;
  double lo, hi, start;
  const char* meaning;
};
// Every free parameter, in a fixed order.
const std::vector<ParamDef>& ParamDefs();
const ParamDef* FindParam(const std::string& name);

// GPUs that share a die, clocks and power share GPU parameters: "a100" (40 and 80 GB), "h100"
// (SXM 700 W, H200, H800), "h100-hbm2e" (the 500 W HBM2e part); other presets are their own class.
std::string GpuClass(const std::string& cluster_name);

// Quantiles of measured / predicted from cross-validated predictions: the 80% interval.
struct Interval {
  double lo = 1, hi = 1;  // 10th and 90th percentile of measured / predicted
  int runs = 0;
};

// Every parameter value of one calibration: per stack and per GPU class.
struct Calibration {
  std::map<std::string, std::map<std::string, double>> stack;  // stack -> param -> value
  std::map<std::string, std::map<std::string, double>> gpu;    // GPU class -> param -> value
  // The value used for a parameter: the calibration's, else the start value (stack scope) or
  // the cluster preset's (GPU scope: `preset`).
  double Get(const ParamDef& def, const std::string& key, double preset = 0) const;
};

struct Profile {
  std::string name;                      // stack name ("megatron") or the profile's own name
  std::string stack;                     // the stack whose defaults it refines
  std::string description;               // what the stack is
  std::string fitted_on;                 // which runs (file, rows, groups)
  std::map<std::string, double> params;  // stack parameters
  std::map<std::string, std::map<std::string, double>> gpu;  // GPU class overrides
  std::map<std::string, Interval> intervals;                 // by GPU class
  RunFacts defaults;  // what the stack does when the planner has no row: compiled, tp overlap
};

// A preset stack ("megatron", "torchtitan", "maxtext", "llm-foundry", "deepspeed") or a TOML file.
core::Result<Profile> LoadProfile(const std::string& name_or_path);
core::Result<Profile> ProfileFromToml(const std::string& text, const std::string& source);
std::string ProfileToml(const Profile& profile);
std::vector<std::string> StackNames();
// What pentamesh knows of each stack it has a profile for: its name, what it is, and what it does
// by default when the planner has no row (fused kernels, TP overlap).
struct StackInfo {
  const char* name;
  const char* description;
  RunFacts defaults;
};
const std::vector<StackInfo>& Stacks();
// The stack named `name` among Stacks(), or null.
const StackInfo* FindStack(const std::string& name);
// The stack the planner uses when none is named.
inline constexpr const char* kDefaultStack = "megatron";

// The cost parameters and cluster for a run of `stack` with `facts` under `cal`.
void ApplyCalibration(const Calibration& cal, const std::string& stack, const RunFacts& facts,
                      spec::ClusterSpec& cluster, cost::CostParams& params);
// The same for a profile (the planner's --stack): its parameters, GPU overrides and defaults.
void ApplyProfile(const Profile& profile, spec::ClusterSpec& cluster, cost::CostParams& params);
// A profile's parameters as a calibration (for the fit's starting point).
Calibration ToCalibration(const Profile& profile);

}  // namespace pentamesh::calib

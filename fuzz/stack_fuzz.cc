// libFuzzer target for the stack profile reader (calib/profile.h ProfileFromToml, as `--stack
// FILE` and `calibrate` read it): arbitrary bytes as a profile TOML. Reading must return the
// profile or a Status naming the file and the key, never crash or throw. A profile it accepts
// holds only values inside its stated bounds (every parameter within ParamDef's [lo, hi], every
// interval finite with 0 < lo <= hi); written back by ProfileToml (what `calibrate --out` writes)
// it reads back with the same name, stack, parameters (to the 6 digits written) and intervals;
// and applied to a cluster preset (ApplyProfile, the planner's --stack) it costs a layout with a
// finite, positive step time.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "calib/profile.h"
#include "cost/cost.h"
#include "spec/load_toml.h"

namespace {

bool Near(double a, double b) { return std::abs(a - b) <= 1e-5 * std::max(std::abs(a), 1e-30); }

bool SameParams(const std::map<std::string, double>& a, const std::map<std::string, double>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    if (it == b.end() || !Near(v, it->second)) return false;
  }
  return true;
}

bool InBounds(const std::map<std::string, double>& params) {
  for (const auto& [k, v] : params) {
    const pentamesh::calib::ParamDef* def = pentamesh::calib::FindParam(k);
    if (def == nullptr || !std::isfinite(v) || v < def->lo || v > def->hi) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto profile = calib::ProfileFromToml(text, "fuzz.toml");
  if (!profile.ok()) {
    if (profile.status().message().find("fuzz.toml") == std::string::npos) __builtin_trap();
    return 0;
  }
  const calib::Profile& p = *profile;
  if (!InBounds(p.params)) __builtin_trap();
  for (const auto& [cls, params] : p.gpu) {
    if (!InBounds(params)) __builtin_trap();
  }
  for (const auto& [cls, iv] : p.intervals) {
    if (!(std::isfinite(iv.lo) && std::isfinite(iv.hi) && iv.lo > 0 && iv.hi >= iv.lo)) {
      __builtin_trap();
    }
  }
  // What `calibrate --out` writes reads back as the same profile.
  auto back = calib::ProfileFromToml(calib::ProfileToml(p), "written.toml");
  if (!back.ok()) {
    std::fprintf(stderr, "stack_fuzz: written profile unreadable: %s\n",
                 back.status().message().c_str());
    __builtin_trap();
  }
  if (back->name != p.name || back->stack != p.stack || !SameParams(back->params, p.params) ||
      back->gpu.size() != p.gpu.size() || back->intervals.size() != p.intervals.size()) {
    __builtin_trap();
  }
  for (const auto& [cls, params] : p.gpu) {
    if (!back->gpu.contains(cls) || !SameParams(back->gpu.at(cls), params)) __builtin_trap();
  }
  // The planner's --stack: the profile on a cluster preset costs a layout.
  static const spec::ModelSpec model = *spec::LoadModel("llama3-8b");
  static const spec::TrainSpec train = *spec::LoadTrain("pretrain-4k");
  for (const char* name : {"h100-sxm", "a100-80gb"}) {
    spec::ClusterSpec cluster = *spec::LoadCluster(name);
    cost::CostParams params;
    calib::ApplyProfile(p, cluster, params);
    const cost::Context ctx(model, cluster, train, params);
    const cost::Estimate e =
        cost::EstimateLayout(ctx, spec::Layout{.dp = cluster.gpus() / 8, .tp = 8, .zero = 1});
    if (e.fits && (!(e.time.step > 0) || !std::isfinite(e.time.step))) __builtin_trap();
  }
  return 0;
}

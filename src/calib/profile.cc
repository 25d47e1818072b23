// Calibration parameters, stack profiles and how they become cost parameters.
#include "calib/profile.h"

#include <fmt/format.h>

#include <cmath>

#include "core/quote.h"
#include "spec/load_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::calib {
namespace {

bool IsPreset(const std::string& s) {
  return s.find('/') == std::string::npos && !s.ends_with(".toml");
}

// A stack's yes/no policies: the profile's [defaults] key, the RunFacts field, and the
// cost::CostParams field it sets as is (null: ApplyCalibration reads the fact itself). Reading,
// writing and applying a profile all walk this one list.
struct BoolFact {
  const char* key;
  bool RunFacts::*fact;
  bool cost::CostParams::*param;
};
constexpr BoolFact kBoolFacts[] = {
    // The generation of the stack: before FlashAttention (scores, softmax output and dropout
    // masks stored), GPT-3-era dropout, fp32 main grads (cost/precision.h). Megatron-LM 2021-22
    // is all three (calib/runs.cc MapFacts); a profile selects them in [defaults].
    {"flash_attention", &RunFacts::flash_attention, nullptr},
    {"dropout", &RunFacts::dropout, &cost::CostParams::dropout},
    {"fp32_grads", &RunFacts::fp32_grads, &cost::CostParams::fp32_main_grads},
    {"compiled", &RunFacts::compiled, nullptr},
    {"tp_comm_overlap", &RunFacts::tp_comm_overlap, nullptr},
    {"selective_op_sac", &RunFacts::selective_op_sac, &cost::CostParams::selective_op_sac},
    {"unfused_cross_entropy", &RunFacts::unfused_cross_entropy,
     &cost::CostParams::unfused_cross_entropy},
    {"fsdp_unsharded_with_pp", &RunFacts::fsdp_unsharded_with_pp,
     &cost::CostParams::fsdp_unsharded_with_pp},
    {"tp_saves_gathered_input", &RunFacts::tp_saves_gathered_input,
     &cost::CostParams::tp_saves_gathered_input},
    {"pp_buffers_per_microbatch", &RunFacts::pp_buffers_per_microbatch,
     &cost::CostParams::pp_buffers_per_microbatch},
    {"transient_workspaces", &RunFacts::transient_workspaces,
     &cost::CostParams::transient_workspaces},
    {"fp8_weight_cache", &RunFacts::fp8_weight_cache, &cost::CostParams::fp8_weight_cache},
};

// The entry of a key table (kBoolFacts, kStackKeys) whose key is `k`, or null.
template <typename Entry, size_t N>
const Entry* FindKey(const Entry (&entries)[N], const std::string& k) {
  for (const Entry& e : entries) {
    if (k == e.key) return &e;
  }
  return nullptr;
}

// "a, b, c": the keys of a key table, for error messages.
template <typename Entry, size_t N>
std::string JoinKeys(const Entry (&entries)[N]) {
  std::string keys;
  for (const Entry& e : entries) keys += std::string(keys.empty() ? "" : ", ") + e.key;
  return keys;
}

}  // namespace

const std::vector<ParamDef>& ParamDefs() {
  static const std::vector<ParamDef> defs = {
      {"gemm_efficiency", Scope::kGpu, 0.30, 0.95, 0.65,
       "fraction of the dense BF16 peak large GEMMs sustain in training"},
      {"fp8_gemm_speedup", Scope::kGpu, 1.0, 2.0, 1.6,
       "FP8 GEMM rate / BF16 GEMM rate (nominal 2 on H100)"},
      {"fp8_rowwise_speedup", Scope::kStack, 0.5, 2.0, 1.2,
       "FP8 GEMM rate with the stack's row-wise-scaled kernels / BF16 GEMM rate"},
      {"layer_overhead_us", Scope::kStack, 0.0, 2000.0, 50.0,
       "microseconds a layer costs per micro-batch beyond its kernels (launches, hooks)"},
      {"tp_overlap", Scope::kStack, 0.0, 0.95, 0.5,
       "share of TP communication hidden when the stack overlaps it (tp-comm-overlap, async TP)"},
      {"attention_relative", Scope::kStack, 0.3, 1.0, 0.75,
       "the stack's flash attention FLOP rate / a large GEMM's"},
      {"eager_traffic", Scope::kStack, 1.0, 8.0, 2.0,
       "bytes unfused (eager) elementwise kernels move / the fused kernels' bytes"},
  };
  return defs;
}

const ParamDef* FindParam(const std::string& name) {
  for (const ParamDef& d : ParamDefs()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string GpuClass(const std::string& cluster_name) {
  if (cluster_name == "a100-40gb" || cluster_name == "a100-80gb") return "a100";
  if (cluster_name == "h100-sxm" || cluster_name == "h200" || cluster_name == "h800") return "h100";
  return cluster_name;
}

double Calibration::Get(const ParamDef& def, const std::string& key, double preset) const {
  const auto& table = def.scope == Scope::kGpu ? gpu : stack;
  if (const auto it = table.find(key); it != table.end()) {
    if (const auto p = it->second.find(def.name); p != it->second.end()) return p->second;
  }
  return preset > 0 ? preset : def.start;
}

void ApplyCalibration(const Calibration& cal, const std::string& stack, const RunFacts& facts,
                      spec::ClusterSpec& cluster, cost::CostParams& params) {
  // Facts of the run (not fitted).
  params.materialize_scores = !facts.flash_attention;
  if (!facts.grad_overlap) params.dp_overlap = 0;
  // The stack's parameters, where the run's facts call for them.
  params.tp_overlap = facts.tp_comm_overlap ? cal.Get(*FindParam("tp_overlap"), stack) : 0.0;
  params.elementwise_traffic = facts.compiled ? 1.0 : cal.Get(*FindParam("eager_traffic"), stack);
  params.layer_overhead_s = cal.Get(*FindParam("layer_overhead_us"), stack) * 1e-6;
  params.attention_relative = cal.Get(*FindParam("attention_relative"), stack);
  params.selective_forward_share = facts.selective_forward_share;
  for (const BoolFact& f : kBoolFacts) {
    if (f.param != nullptr) params.*f.param = facts.*f.fact;
  }
  // The GPU's.
  const std::string cls = GpuClass(cluster.name);
  cluster.gemm_efficiency = cal.Get(*FindParam("gemm_efficiency"), cls, cluster.gemm_efficiency);
  if (cluster.peak_fp8_tflops > 0) {
    cluster.fp8_gemm_speedup =
        facts.fp8_rowwise ? cal.Get(*FindParam("fp8_rowwise_speedup"), stack)
                          : cal.Get(*FindParam("fp8_gemm_speedup"), cls, cluster.fp8_gemm_speedup);
  }
}

Calibration ToCalibration(const Profile& profile) {
  Calibration cal;
  cal.stack[profile.stack] = profile.params;
  cal.gpu = profile.gpu;
  return cal;
}

void ApplyProfile(const Profile& profile, spec::ClusterSpec& cluster, cost::CostParams& params) {
  ApplyCalibration(ToCalibration(profile), profile.stack, profile.defaults, cluster, params);
}

std::vector<std::string> StackNames() { return spec::PresetNames("stacks"); }

const std::vector<StackInfo>& Stacks() {
  static const std::vector<StackInfo> stacks = {
      {"megatron",
       "Megatron-LM / Megatron-Core and NeMo (Transformer Engine kernels, TP communication overlap "
       "in NeMo's performance recipes); also Meta's Llama 3 stack",
       {.tp_comm_overlap = true, .compiled = true, .fp8_weight_cache = true}},
      {"torchtitan",
       "torchtitan (FSDP2, torch.compile, async TP optional, torchao float8, per-op selective "
       "checkpointing, eager cross-entropy)",
       {.tp_comm_overlap = false,
        .compiled = true,
        .selective_forward_share = 0.5,
        .selective_op_sac = true,
        .unfused_cross_entropy = true,
        .fsdp_unsharded_with_pp = true,
        .tp_saves_gathered_input = true,
        .pp_buffers_per_microbatch = true}},
      {"maxtext", "MaxText (JAX/XLA: fused kernels)", {.tp_comm_overlap = false, .compiled = true}},
      {"llm-foundry",
       "MosaicML Composer / llm-foundry (PyTorch FSDP, eager, FlashAttention)",
       {.tp_comm_overlap = false, .compiled = false}},
      {"deepspeed",
       "DeepSpeed (ZeRO, eager PyTorch); no published runs in the calibration set: physical "
       "start values",
       {.tp_comm_overlap = false, .compiled = false}},
  };
  return stacks;
}

namespace {

// The errors of one profile file, each prefixed with the file and the key it is about.
struct ProfileErrors {
  const std::string& source;
  std::vector<std::string> list;
  void Add(const std::string& where, const std::string& why) {
    list.push_back(fmt::format("{}: {}: {}", source, where, why));
  }
};

// The [stack] table's keys, each a string field of the profile.
struct StackKey {
  const char* key;
  std::string Profile::*field;
};
constexpr StackKey kStackKeys[] = {{"name", &Profile::name},
                                   {"stack", &Profile::stack},
                                   {"description", &Profile::description},
                                   {"fitted_on", &Profile::fitted_on}};

// The profile's tables, in the order the reader visits them.
struct TableName {
  const char* key;
};
constexpr TableName kProfileTables[] = {{"stack"}, {"params"}, {"gpu"}, {"defaults"}, {"interval"}};

void ReadStackTable(const toml::table& st, Profile& p, ProfileErrors& err) {
  for (const auto& [key, node] : st) {
    const std::string k(key.str());
    const auto* s = node.as_string();
    if (s == nullptr) {
      err.Add("stack." + k, "must be a string");
      continue;
    }
    const StackKey* field = FindKey(kStackKeys, k);
    if (field == nullptr) {
      err.Add("stack." + k, "unknown key (" + JoinKeys(kStackKeys) + ")");
    } else {
      p.*field->field = s->get();
    }
  }
  if (p.stack.empty()) p.stack = p.name;
  if (p.name.empty()) err.Add("stack.name", "is required");
}

// Parameters of `scope` from table `t` (named `where` in errors), each within its bounds.
void ReadParams(const toml::table& t, const std::string& where, Scope scope,
                std::map<std::string, double>& out, ProfileErrors& err) {
  for (const auto& [key, node] : t) {
    const std::string k(key.str());
    const ParamDef* def = FindParam(k);
    if (def == nullptr || def->scope != scope) {
      err.Add(where + "." + k, "unknown parameter");
      continue;
    }
    const auto v = node.value<double>();
    if (!v || !std::isfinite(*v) || *v < def->lo || *v > def->hi) {
      err.Add(where + "." + k, fmt::format("must be a number in [{}, {}]", def->lo, def->hi));
      continue;
    }
    out[k] = *v;
  }
}

// [gpu.<class>] tables: GPU-scope parameter overrides per GPU class.
void ReadGpuTables(const toml::table& g, Profile& p, ProfileErrors& err) {
  for (const auto& [cls, node] : g) {
    const std::string c(cls.str());
    if (GpuClass(c) != c) {
      // A cluster preset's name, not its class: the table would never apply.
      err.Add("gpu." + c, fmt::format("never applies: cluster {} has the GPU class '{}' (write "
                                      "[gpu.{}])",
                                      c, GpuClass(c), GpuClass(c)));
      continue;
    }
    if (const toml::table* t = node.as_table()) {
      ReadParams(*t, "gpu." + c, Scope::kGpu, p.gpu[c], err);
    } else {
      err.Add("gpu." + c, "must be a table");
    }
  }
}

// [defaults]: selective_forward_share and the kBoolFacts policies.
void ReadDefaults(const toml::table& d, Profile& p, ProfileErrors& err) {
  for (const auto& [key, node] : d) {
    const std::string k(key.str());
    if (k == "selective_forward_share") {
      const auto v = node.value<double>();
      if (!v || !(*v >= 0 && *v <= 1)) {
        err.Add("defaults." + k, "must be a number in [0, 1]");
      } else {
        p.defaults.selective_forward_share = *v;
      }
      continue;
    }
    const auto b = node.value<bool>();
    const BoolFact* fact = FindKey(kBoolFacts, k);
    if (fact == nullptr) {
      err.Add("defaults." + k,
              "unknown key (selective_forward_share, " + JoinKeys(kBoolFacts) + ")");
    } else if (!b) {
      err.Add("defaults." + k, "must be true or false");
    } else {
      p.defaults.*fact->fact = *b;
    }
  }
}

// Bounds of a prediction interval's quantiles (measured / predicted step time).
constexpr double kMinIntervalRatio = 1e-3, kMaxIntervalRatio = 1e3;

// [interval.<class>] tables: lo, hi and runs of the prediction interval per GPU class.
void ReadIntervals(const toml::table& iv, Profile& p, ProfileErrors& err) {
  for (const auto& [cls, node] : iv) {
    const std::string c(cls.str());
    const toml::table* t = node.as_table();
    if (t != nullptr) {
      for (const auto& [key, value] : *t) {
        if (key.str() != "lo" && key.str() != "hi" && key.str() != "runs") {
          err.Add("interval." + c + "." + std::string(key.str()),
                  "unknown key in [interval." + c + "] (lo, hi, runs)");
        }
      }
    }
    const auto lo = t ? (*t)["lo"].value<double>() : std::nullopt;
    const auto hi = t ? (*t)["hi"].value<double>() : std::nullopt;
    const auto runs = t ? (*t)["runs"].value<int64_t>() : std::nullopt;
    // Quantiles of measured / predicted: within [1e-3, 1e3] (nan passed every comparison here,
    // inf passed hi >= lo, and a lo below 5e-5 was written back by ProfileToml's 4 decimals as
    // 0.0000, which this reader refuses: stack_fuzz).
    const auto ratio = [](const std::optional<double>& v) {
      return v && *v >= kMinIntervalRatio && *v <= kMaxIntervalRatio;
    };
    if (!ratio(lo) || !ratio(hi) || !runs || *hi < *lo || *runs < 0 || *runs > 1000000) {
      err.Add("interval." + c, fmt::format("needs {} <= lo <= hi <= {} and runs >= 0",
                                           kMinIntervalRatio, kMaxIntervalRatio));
      continue;
    }
    p.intervals[c] = {*lo, *hi, static_cast<int>(*runs)};
  }
}

// Every top-level table is one of kProfileTables.
void CheckTableNames(const toml::table& root, ProfileErrors& err) {
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    if (FindKey(kProfileTables, k) == nullptr) {
      err.Add(k, "unknown table (" + JoinKeys(kProfileTables) + ")");
    }
  }
}

}  // namespace

core::Result<Profile> ProfileFromToml(const std::string& text, const std::string& source) {
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, source));
  Profile p;
  ProfileErrors err{source, {}};
  const toml::table* st = root["stack"].as_table();
  if (st == nullptr) return core::Status::Error(fmt::format("{}: missing [stack] table", source));
  ReadStackTable(*st, p, err);
  if (const toml::table* t = root["params"].as_table()) {
    ReadParams(*t, "params", Scope::kStack, p.params, err);
  }
  if (const toml::table* g = root["gpu"].as_table()) ReadGpuTables(*g, p, err);
  if (const toml::table* d = root["defaults"].as_table()) ReadDefaults(*d, p, err);
  if (const toml::table* iv = root["interval"].as_table()) ReadIntervals(*iv, p, err);
  CheckTableNames(root, err);
  if (!err.list.empty()) {
    std::string all = err.list.front();
    for (size_t i = 1; i < err.list.size(); ++i) all += "\n" + err.list[i];
    return core::Status::Error(all);
  }
  return p;
}

core::Result<Profile> LoadProfile(const std::string& name_or_path) {
  if (IsPreset(name_or_path)) {
    const auto text = spec::PresetText("stacks", name_or_path);
    if (!text) {
      std::string names;
      for (const auto& n : StackNames()) names += (names.empty() ? "" : ", ") + n;
      return core::Status::Error(fmt::format(
          "--stack: '{}' is not a stack preset ({}) nor a .toml file", name_or_path, names));
    }
    return ProfileFromToml(*text, "preset " + name_or_path);
  }
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(name_or_path));
  return ProfileFromToml(text, name_or_path);
}

std::string ProfileToml(const Profile& p) {
  std::string out = "[stack]\n";
  // calibrate --name and the fitted-on list are the user's: TOML-escaped, so the file reads back.
  out +=
      fmt::format("name = {}\nstack = {}\n", core::TomlString(p.name), core::TomlString(p.stack));
  if (!p.description.empty()) {
    out += fmt::format("description = {}\n", core::TomlString(p.description));
  }
  if (!p.fitted_on.empty()) out += fmt::format("fitted_on = {}\n", core::TomlString(p.fitted_on));
  out += fmt::format("\n[defaults]\nselective_forward_share = {:.2f}\n",
                     p.defaults.selective_forward_share);
  for (const BoolFact& f : kBoolFacts) out += fmt::format("{} = {}\n", f.key, p.defaults.*f.fact);
  out += "\n[params]\n";
  for (const auto& [k, v] : p.params) out += fmt::format("{} = {:.6g}\n", k, v);
  for (const auto& [cls, params] : p.gpu) {
    out += fmt::format("\n[gpu.{}]\n", core::TomlKey(cls));
    for (const auto& [k, v] : params) out += fmt::format("{} = {:.6g}\n", k, v);
  }
  for (const auto& [cls, iv] : p.intervals) {
    out += fmt::format("\n[interval.{}]\nlo = {:.4f}\nhi = {:.4f}\nruns = {}\n", core::TomlKey(cls),
                       iv.lo, iv.hi, iv.runs);
  }
  return out;
}

}  // namespace pentamesh::calib

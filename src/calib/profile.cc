// Calibration parameters, stack profiles and how they become cost parameters.
#include "calib/profile.h"

#include <fmt/format.h>

#include <cmath>

#include "core/quote.h"
#include "spec/field_reader.h"
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
    {"fp8_stash_gemm_inputs", &RunFacts::fp8_stash_gemm_inputs,
     &cost::CostParams::fp8_stash_gemm_inputs},
    {"ep_dispatch_per_node", &RunFacts::ep_dispatch_per_node,
     &cost::CostParams::ep_dispatch_per_node},
    {"pp_p2p_overlap", &RunFacts::pp_p2p_overlap, &cost::CostParams::pp_p2p_overlap},
    {"ep_a2a_overlap", &RunFacts::ep_a2a_overlap, nullptr},
};

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
      {"expert_gemm_us", Scope::kStack, 0.0, 500.0, 10.0,
       "microseconds each local expert's GEMM costs beyond its FLOPs in the grouped kernel"},
      {"ep_overlap", Scope::kStack, 0.0, 0.95, 0.25,
       "share of the EP all-to-all hidden when the run overlaps it (Megatron-Core's "
       "--overlap-moe-expert-parallel-comm)"},
      {"attention_factor", Scope::kGpu, 0.5, 1.5, 1.0,
       "the GPU's flash-attention rate relative to its GEMMs, a factor on the stack's"},
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
  params.expert_gemm_overhead_s = cal.Get(*FindParam("expert_gemm_us"), stack) * 1e-6;
  params.ep_overlap = facts.ep_a2a_overlap ? cal.Get(*FindParam("ep_overlap"), stack) : 0.0;
  // Serving's forward-only attention: the prior, not the training fit (cost::CostParams).
  params.inference_attention_relative = FindParam("attention_relative")->start;
  params.selective_forward_share = facts.selective_forward_share;
  for (const BoolFact& f : kBoolFacts) {
    if (f.param != nullptr) params.*f.param = facts.*f.fact;
  }
  // The GPU's.
  const std::string cls = GpuClass(cluster.name);
  cluster.gemm_efficiency = cal.Get(*FindParam("gemm_efficiency"), cls, cluster.gemm_efficiency);
  cluster.attention_factor = cal.Get(*FindParam("attention_factor"), cls, cluster.attention_factor);
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
       {.tp_comm_overlap = true,
        .compiled = true,
        .fp8_weight_cache = true,
        .fp8_stash_gemm_inputs = true,
        .pp_p2p_overlap = true}},
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

const StackInfo* FindStack(const std::string& name) {
  for (const StackInfo& info : Stacks()) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

namespace {

// The [stack] table's keys, each a string field of the profile; the reader and ProfileToml walk
// this list.
struct StackKey {
  const char* key;
  std::string Profile::*field;
  bool required;
};
constexpr StackKey kStackKeys[] = {{"name", &Profile::name, true},
                                   {"stack", &Profile::stack, false},
                                   {"description", &Profile::description, false},
                                   {"fitted_on", &Profile::fitted_on, false}};

// [stack]: the kStackKeys strings.
void ReadStackTable(const toml::table& root, Profile& p, std::vector<std::string>& errors) {
  spec::FieldReader r = spec::FieldReader::Table(root, "stack", &errors);
  for (const StackKey& k : kStackKeys) r.String(k.key, p.*k.field, k.required);
  r.RejectUnknown();
  if (p.stack.empty()) p.stack = p.name;
}

// The parameters of `scope` (ParamDefs) in table `t` (named `where`), each within its bounds.
void ReadParams(const toml::table* t, const std::string& where, Scope scope,
                std::map<std::string, double>& out, std::vector<std::string>& errors) {
  spec::FieldReader r(t, where, &errors);
  for (const ParamDef& def : ParamDefs()) {
    if (def.scope != scope) continue;
    std::optional<double> v;
    r.OptDouble(def.name, v, def.lo, def.hi, false);
    if (v) out[def.name] = *v;
  }
  r.RejectUnknown();
}

// [gpu.<class>] tables: GPU-scope parameter overrides per GPU class.
void ReadGpuTables(const toml::table& root, Profile& p, std::vector<std::string>& errors) {
  const toml::table* g = root["gpu"].as_table();
  if (g == nullptr) return;
  for (const auto& [cls, node] : *g) {
    const std::string c(cls.str());
    if (GpuClass(c) != c) {
      // A cluster preset's name, not its class: the table would never apply.
      errors.push_back(
          fmt::format("gpu.{}: never applies: cluster {} has the GPU class '{}' "
                      "(write [gpu.{}])",
                      c, c, GpuClass(c), GpuClass(c)));
    } else if (const toml::table* t = node.as_table()) {
      ReadParams(t, "gpu." + c, Scope::kGpu, p.gpu[c], errors);
    } else {
      errors.push_back(fmt::format("gpu.{}: must be a table", c));
    }
  }
}

// [defaults]: selective_forward_share and the kBoolFacts policies.
void ReadDefaults(const toml::table& root, Profile& p, std::vector<std::string>& errors) {
  spec::FieldReader r = spec::FieldReader::Table(root, "defaults", &errors);
  r.Double("selective_forward_share", p.defaults.selective_forward_share, false, 0, false, 1);
  for (const BoolFact& f : kBoolFacts) r.Bool(f.key, p.defaults.*f.fact);
  r.RejectUnknown();
}

// Bounds of a prediction interval's quantiles (measured / predicted step time).
constexpr double kMinIntervalRatio = 1e-3, kMaxIntervalRatio = 1e3;

// [interval.<class>] tables: lo, hi and runs of the prediction interval per GPU class.
void ReadIntervals(const toml::table& root, Profile& p, std::vector<std::string>& errors) {
  const toml::table* iv = root["interval"].as_table();
  if (iv == nullptr) return;
  for (const auto& [cls, node] : *iv) {
    const std::string c(cls.str());
    if (node.as_table() == nullptr) {
      errors.push_back(fmt::format("interval.{}: must be a table", c));
      continue;
    }
    spec::FieldReader r(node.as_table(), "interval." + c, &errors);
    // Quantiles of measured / predicted: within [1e-3, 1e3] (nan passed every comparison here,
    // inf passed hi >= lo, and a lo below 5e-5 was written back by ProfileToml's 4 decimals as
    // 0.0000, which this reader refuses: stack_fuzz).
    double lo = 0, hi = 0;
    int64_t runs = 0;
    const size_t before = errors.size();
    r.Double("lo", lo, true, kMinIntervalRatio, false, kMaxIntervalRatio);
    r.Double("hi", hi, true, kMinIntervalRatio, false, kMaxIntervalRatio);
    r.Int("runs", runs, true, 0, 1000000);
    r.RejectUnknown();
    if (errors.size() != before) continue;
    if (hi < lo) {
      r.Error("hi", fmt::format("must be at least lo = {}", lo));
      continue;
    }
    p.intervals[c] = {lo, hi, static_cast<int>(runs)};
  }
}

// The profile's tables, in the order the reader visits them.
const std::vector<std::string> kProfileTables = {"stack", "params", "gpu", "defaults", "interval"};

}  // namespace

core::Result<Profile> ProfileFromToml(const std::string& text, const std::string& source) {
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, source));
  if (root["stack"].as_table() == nullptr) {
    return core::Status::Error(fmt::format("{}: missing [stack] table", source));
  }
  Profile p;
  std::vector<std::string> errors;
  ReadStackTable(root, p, errors);
  const toml::node* params = root.get("params");
  if (params != nullptr && !params->is_table()) errors.push_back("params: must be a table");
  ReadParams(params != nullptr ? params->as_table() : nullptr, "params", Scope::kStack, p.params,
             errors);
  ReadGpuTables(root, p, errors);
  ReadDefaults(root, p, errors);
  ReadIntervals(root, p, errors);
  spec::FieldReader(&root, "", &errors).RejectUnknown(kProfileTables);
  PM_RETURN_IF_ERROR(spec::JoinFieldErrors(source, errors));
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
  for (const StackKey& k : kStackKeys) {
    if (k.required || !(p.*k.field).empty()) {
      out += fmt::format("{} = {}\n", k.key, core::TomlString(p.*k.field));
    }
  }
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

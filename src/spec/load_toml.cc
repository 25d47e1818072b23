#include "spec/load_toml.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <span>
#include <sstream>

#include "core/input.h"
#include "core/numeric.h"
#include "spec/field_reader.h"
#include "spec/limits.h"
#include "spec/presets.h"
#include "spec/recipe.h"
#include "spec/rope_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::spec {
namespace {

core::Result<toml::table> ParseToml(const std::string& text, const std::string& source) {
  return ParseTomlText(text, source);
}

core::Result<const toml::table*> GetTable(const toml::table& root, const char* name,
                                          const std::string& source) {
  const toml::node* node = root.get(name);
  if (!node) {
    return core::Status::Error(fmt::format("{}: has no [{}] table", source, name));
  }
  if (!node->is_table()) {
    return core::Status::Error(fmt::format("{}: '{}' must be a table", source, name));
  }
  return node->as_table();
}

// model.activation: swiglu (the default) or gelu.
void ReadActivation(FieldReader& r, ModelSpec& m) {
  std::string activation = "swiglu";
  r.String("activation", activation);
  if (activation == "swiglu") {
    m.activation = Activation::kSwiGLU;
  } else if (activation == "gelu") {
    m.activation = Activation::kGeLU;
  } else {
    r.Error("activation", fmt::format("'{}' is not one of swiglu, gelu", activation));
  }
}

// The sub-table `name` of [model], recorded in sub_tables; nullptr when absent or not a table
// (an error).
const toml::table* ModelSubTable(const toml::table& model, const char* name, FieldReader& r,
                                 std::vector<std::string>& sub_tables) {
  const toml::node* node = model.get(name);
  if (!node) return nullptr;
  sub_tables.push_back(name);
  if (!node->is_table()) {
    r.Error(name, "must be a table");
    return nullptr;
  }
  return node->as_table();
}

// [model.mla]; MLA up-projects keys and values for every head, so kv_heads may only equal heads.
void ReadMla(const toml::table& mla, const toml::table& model, FieldReader& r,
             std::vector<std::string>& errors, ModelSpec& m) {
  FieldReader ar(&mla, "model.mla", &errors);
  ar.Int("q_lora_rank", m.mla.q_lora_rank, false, 0);
  ar.Int("kv_lora_rank", m.mla.kv_lora_rank, true);
  ar.Int("qk_nope_head_dim", m.mla.qk_nope_head_dim, true);
  ar.Int("qk_rope_head_dim", m.mla.qk_rope_head_dim, true);
  ar.Int("v_head_dim", m.mla.v_head_dim, true);
  ar.RejectUnknown();
  if (m.mla.qk_rope_head_dim % 2 != 0) {
    ar.Error("qk_rope_head_dim",
             fmt::format("{} must be even (RoPE rotates pairs)", m.mla.qk_rope_head_dim));
  }
  if (model.get("kv_heads") != nullptr && m.kv_heads != m.heads) {
    r.Error("kv_heads", fmt::format("{} but MLA up-projects keys and values for every head "
                                    "(kv_heads = heads = {}); leave kv_heads out",
                                    m.kv_heads, m.heads));
  }
}

void ReadMoe(const toml::table& moe, std::vector<std::string>& errors, ModelSpec& m) {
  FieldReader mr(&moe, "model.moe", &errors);
  mr.Int("experts", m.moe.experts, true);
  mr.Int("top_k", m.moe.top_k, true);
  mr.Int("expert_ffn_hidden", m.moe.expert_ffn_hidden, true);
  mr.Int("moe_layer_freq", m.moe.moe_layer_freq, false);
  mr.Int("first_dense_layers", m.moe.first_dense_layers, false, 0);
  mr.Int("shared_experts", m.moe.shared_experts, false, 0);
  mr.Double("capacity_factor", m.moe.capacity_factor, false, 0, false);
  std::string scope = "sequence";
  mr.String("aux_loss_scope", scope);
  if (scope == "sequence") {
    m.moe.aux_loss_scope = AuxLossScope::kSequence;
  } else if (scope == "global") {
    m.moe.aux_loss_scope = AuxLossScope::kGlobal;
  } else {
    mr.Error("aux_loss_scope", fmt::format("'{}' is not one of sequence, global", scope));
  }
  std::string router = MoeRouterName(MoeRouter::kSoftmaxTopK);
  mr.String("router", router);
  if (router == MoeRouterName(MoeRouter::kSoftmaxTopK)) {
    m.moe.router = MoeRouter::kSoftmaxTopK;
  } else if (router == MoeRouterName(MoeRouter::kTopKRenorm)) {
    m.moe.router = MoeRouter::kTopKRenorm;
  } else {
    mr.Error("router", fmt::format("'{}' is not one of softmax_topk (gates = the chosen experts' "
                                   "softmax probabilities), topk_renorm (renormalised to sum 1)",
                                   router));
  }
  mr.RejectUnknown();
  if (m.moe.top_k > m.moe.experts && m.moe.experts > 0) {
    mr.Error("top_k", fmt::format("{} exceeds experts={}", m.moe.top_k, m.moe.experts));
  }
  if (m.moe.first_dense_layers >= m.layers && m.layers > 0) {
    mr.Error("first_dense_layers",
             fmt::format("{} leaves no MoE layer (layers={})", m.moe.first_dense_layers, m.layers));
  }
}

// kv_heads defaults to heads; head_dim to hidden / heads. One rule for the planner and the
// engine: without an explicit head_dim the heads split hidden exactly (never a truncated or zero
// head_dim).
void CheckHeads(const toml::table& model, FieldReader& r, ModelSpec& m) {
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  const bool explicit_head_dim = model.get("head_dim") != nullptr;
  if (!explicit_head_dim && m.heads > 0 && m.hidden > 0) {
    if (m.hidden % m.heads != 0) {
      r.Error("heads",
              fmt::format("{} does not divide hidden={} (set model.head_dim)", m.heads, m.hidden));
    } else {
      m.head_dim = m.hidden / m.heads;
    }
  }
  if (m.heads > 0 && m.kv_heads > 0 && m.heads % m.kv_heads != 0) {
    r.Error("kv_heads",
            fmt::format("heads={} must be divisible by kv_heads={}", m.heads, m.kv_heads));
  }
  if (m.kv_heads > m.heads) {
    r.Error("kv_heads", fmt::format("{} exceeds heads={}", m.kv_heads, m.heads));
  }
}

}  // namespace

core::Result<ModelSpec> ModelFromTomlText(const std::string& text, const std::string& source) {
  PM_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  PM_ASSIGN_OR_RETURN(const toml::table* t, GetTable(root, "model", source));
  ModelSpec m;
  std::vector<std::string> errors;
  FieldReader r(t, "model", &errors);
  r.String("name", m.name);
  r.Int("layers", m.layers, true);
  r.Int("hidden", m.hidden, true);
  r.Int("heads", m.heads, true);
  m.kv_heads = 0;
  r.Int("kv_heads", m.kv_heads, false);
  r.Int("head_dim", m.head_dim, false);
  r.Int("ffn_hidden", m.ffn_hidden, true);
  r.Int("vocab", m.vocab, true);
  r.Int("max_seq_len", m.max_seq_len, true);
  ReadActivation(r, m);
  r.Bool("tied_embeddings", m.tied_embeddings);
  r.Double("norm_eps", m.norm_eps, false);
  r.Double("rope_theta", m.rope_theta, false);
  r.OptDouble("total_params", m.total_params);
  r.OptDouble("active_params", m.active_params);
  r.Int("sliding_window", m.sliding_window, false, 0);
  r.Int("global_every", m.global_every, false, 0);
  if (m.global_every > 0 && m.sliding_window == 0) {
    r.Error("global_every", "needs sliding_window (without a window every layer is global)");
  }
  std::vector<std::string> sub_tables;
  if (const toml::table* mla = ModelSubTable(*t, "mla", r, sub_tables)) {
    ReadMla(*mla, *t, r, errors, m);
  }
  if (const toml::table* moe = ModelSubTable(*t, "moe", r, sub_tables)) ReadMoe(*moe, errors, m);
  if (const toml::table* rope = ModelSubTable(*t, "rope_scaling", r, sub_tables)) {
    ReadRopeScaling(*rope, "model.rope_scaling", errors, m.rope_scaling);
  }
  r.RejectUnknown(sub_tables);
  CheckHeads(*t, r, m);
  PM_RETURN_IF_ERROR(JoinFieldErrors(source, errors));
  if (m.name.empty()) m.name = source;
  return m;
}

core::Result<ClusterSpec> ClusterFromTomlText(const std::string& text, const std::string& source) {
  PM_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  PM_ASSIGN_OR_RETURN(const toml::table* t, GetTable(root, "cluster", source));
  ClusterSpec c;
  std::vector<std::string> errors;
  FieldReader r(t, "cluster", &errors);
  r.String("name", c.name);
  r.String("gpu", c.gpu);
  // Rates and sizes between 1e-3 (a GFLOP/s, a MB/s, a MB) and 1e9 (a ZFLOP/s, a PB/s, a PB):
  // a denormal rate made a step time infinite (cost/goodput.cc aborted; found by fuzzing).
  constexpr double kMinRate = 1e-3, kMaxRate = 1e9;
  r.Double("peak_tflops", c.peak_tflops, true, kMinRate, false, kMaxRate);
  r.Double("peak_fp8_tflops", c.peak_fp8_tflops, false, 0, false, kMaxRate);
  if (c.peak_fp8_tflops > 0 && c.peak_fp8_tflops < kMinRate)
    r.Error("peak_fp8_tflops", fmt::format("must be 0 (no FP8) or >= {:g}", kMinRate));
  r.Double("peak_fp4_tflops", c.peak_fp4_tflops, false, 0, false, kMaxRate);
  if (c.peak_fp4_tflops > 0 && c.peak_fp8_tflops <= 0)
    r.Error("peak_fp4_tflops", "needs peak_fp8_tflops (an FP4 GPU has FP8 too)");
  r.Double("hbm_gb", c.hbm_gb, true, kMinRate, false, kMaxRate);
  r.Double("hbm_gbps", c.hbm_gbps, true, kMinRate, false, kMaxRate);
  r.Double("hbm_usable_gb", c.hbm_usable_gb, false, 0, false, kMaxRate);
  r.Int("gpus_per_node", c.gpus_per_node, true);
  r.Int("nodes", c.nodes, true);
  r.Double("intra_node_gbps", c.intra_node_gbps, true, kMinRate, false, kMaxRate);
  r.Double("intra_node_latency_us", c.intra_node_latency_us, false, 0, false, kMaxRate);
  r.Double("intra_node_reduce_gbps", c.intra_node_reduce_gbps, false, 0, false, kMaxRate);
  if (c.intra_node_reduce_gbps > 0 && c.intra_node_reduce_gbps < kMinRate)
    r.Error("intra_node_reduce_gbps", fmt::format("must be 0 (none) or >= {:g}", kMinRate));
  r.Int("nics_per_node", c.nics_per_node, true);
  r.Double("inter_node_gbps", c.inter_node_gbps, true, kMinRate, false, kMaxRate);
  r.Double("inter_node_latency_us", c.inter_node_latency_us, false, 0, false, kMaxRate);
  r.Double("gemm_efficiency", c.gemm_efficiency, false, 0, false);
  if (c.gemm_efficiency > 0 && c.gemm_efficiency < kMinRate)
    r.Error("gemm_efficiency", fmt::format("must be 0 (the preset's) or >= {:g}", kMinRate));
  if (c.gemm_efficiency > 1) r.Error("gemm_efficiency", "must be <= 1");
  r.Double("fp8_gemm_speedup", c.fp8_gemm_speedup, false, 0, false, kMaxRate);
  if (c.fp8_gemm_speedup > 0 && c.fp8_gemm_speedup < kMinRate)
    r.Error("fp8_gemm_speedup", fmt::format("must be 0 (the preset's) or >= {:g}", kMinRate));
  r.Double("attention_factor", c.attention_factor, false, 0, false, kMaxRate);
  if (c.attention_factor > 0 && (c.attention_factor < 0.1 || c.attention_factor > 2))
    r.Error("attention_factor", "must be 0 (none) or in [0.1, 2]");
  if (c.fp8_gemm_speedup > 0 && c.peak_fp8_tflops <= 0) {
    r.Error("fp8_gemm_speedup", "needs peak_fp8_tflops (the GPU has no FP8)");
  }
  if (auto gpus = GpuProduct("cluster.nodes x gpus_per_node", {c.nodes, c.gpus_per_node});
      !gpus.ok()) {
    errors.push_back(gpus.status().message());
  }
  r.RejectUnknown();
  PM_RETURN_IF_ERROR(JoinFieldErrors(source, errors));
  if (c.name.empty()) c.name = source;
  return c;
}

core::Result<TrainSpec> TrainFromTomlText(const std::string& text, const std::string& source) {
  PM_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  PM_ASSIGN_OR_RETURN(const toml::table* t, GetTable(root, "train", source));
  TrainSpec s;
  std::vector<std::string> errors;
  FieldReader r(t, "train", &errors);
  r.String("name", s.name);
  ReadTrainShape(*t, r, s);
  std::string optimizer = "adamw";
  r.String("optimizer", optimizer);
  if (optimizer != "adamw") r.Error("optimizer", fmt::format("'{}' is not adamw", optimizer));
  r.Double("total_tokens", s.total_tokens, true, 0, true, 1e18);  // steps fit in int64_t
  r.Double("usd_per_gpu_hour", s.usd_per_gpu_hour, false, 0, false);
  r.RejectUnknown();
  PM_RETURN_IF_ERROR(JoinFieldErrors(source, errors));
  if (s.name.empty()) s.name = source;
  return s;
}

// Through the input layer: a regular file of at most core::kMaxConfigFileBytes.
core::Result<std::string> ReadFile(const std::string& path) {
  return core::ReadInputFile(path, core::kMaxConfigFileBytes, "config file");
}

namespace {

bool IsPath(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 5 && s.compare(s.size() - 5, 5, ".toml") == 0);
}

// "model", "cluster", "train", "recipe": the flag and the singular of a preset kind.
std::string KindName(const std::string& kind) {
  return kind == "train" ? "train" : kind.substr(0, kind.size() - 1);
}

template <typename T, typename F>
core::Result<T> Load(const std::string& kind, const std::string& what, F from_text) {
  if (what.empty()) {
    return core::Status::Error(fmt::format("--{}: empty name", KindName(kind)));
  }
  if (IsPath(what)) {
    PM_ASSIGN_OR_RETURN(std::string text, ReadFile(what));
    return from_text(text, what);
  }
  std::optional<std::string> text = PresetText(kind, what);
  if (!text) {
    std::string names;
    for (const auto& n : PresetNames(kind)) names += (names.empty() ? "" : ", ") + n;
    return core::Status::Error(fmt::format(
        "unknown {} preset '{}' (known: {}; or give a .toml path)", KindName(kind), what, names));
  }
  return from_text(*text, "preset " + what);
}

}  // namespace

core::Result<ModelSpec> LoadModel(const std::string& preset_or_path) {
  return Load<ModelSpec>("models", preset_or_path, ModelFromTomlText);
}

core::Status SetGpuCount(ClusterSpec& cluster, int64_t gpus) {
  PM_RETURN_IF_ERROR(CheckInt("--gpus", gpus, 1, kMaxGpus));
  if (gpus < cluster.gpus_per_node) {
    if (cluster.gpus_per_node % gpus != 0) {
      return core::Status::Error(
          fmt::format("--gpus: {} GPUs is neither a multiple nor a divisor of gpus_per_node={}",
                      gpus, cluster.gpus_per_node));
    }
    cluster.gpus_per_node = gpus;
    cluster.nodes = 1;
    return core::Status::Ok();
  }
  if (gpus % cluster.gpus_per_node != 0) {
    return core::Status::Error(fmt::format("--gpus: {} is not a multiple of gpus_per_node={}", gpus,
                                           cluster.gpus_per_node));
  }
  cluster.nodes = gpus / cluster.gpus_per_node;
  return core::Status::Ok();
}

core::Result<ClusterSpec> LoadCluster(const std::string& preset_or_path,
                                      std::optional<int64_t> gpus) {
  PM_ASSIGN_OR_RETURN(ClusterSpec c,
                      Load<ClusterSpec>("clusters", preset_or_path, ClusterFromTomlText));
  if (gpus) PM_RETURN_IF_ERROR(SetGpuCount(c, *gpus));
  return c;
}

core::Result<TrainSpec> LoadTrain(const std::string& preset_or_path) {
  return Load<TrainSpec>("train", preset_or_path, TrainFromTomlText);
}

core::Result<Recipe> LoadRecipe(const std::string& preset_or_path) {
  return Load<Recipe>("recipes", preset_or_path, RecipeFromTomlText);
}

std::vector<std::string> PresetNames(const std::string& kind) {
  std::vector<std::string> names;
  for (const auto& p : std::span(kPresets, kPresetCount)) {
    if (kind == p.kind) names.emplace_back(p.name);
  }
  return names;
}

std::optional<std::string> PresetText(const std::string& kind, const std::string& name) {
  for (const auto& p : std::span(kPresets, kPresetCount)) {
    if (kind == p.kind && name == p.name) return std::string(p.text);
  }
  return std::nullopt;
}

}  // namespace pentamesh::spec

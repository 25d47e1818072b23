#include "ckpt/hf.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "ckpt/env.h"
#include "ckpt/safetensors.h"
#include "core/bf16.h"
#include "core/input.h"
#include "data/tokenizer.h"
#include "model/stage.h"
#include "spec/json_input.h"

namespace pentamesh::ckpt {
namespace {

namespace fs = std::filesystem;
using Shape = std::vector<int64_t>;

int64_t Numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// One HF tensor cut from a pentamesh parameter: `numel(shape)` elements at `offset`, times scale.
struct Piece {
  std::string hf_name;
  Shape shape;
  int64_t offset = 0;
  float scale = 1.0f;
};

// An HF tensor pentamesh has no parameter for; it is written as zeros and must be zero on import.
struct ZeroTensor {
  std::string hf_name;
  Shape shape;
};

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The HF tensors of pentamesh parameter `name` (global shape `shape`) in architecture `arch`.
core::Result<std::vector<Piece>> Pieces(const std::string& name, const Shape& shape, HfArch arch) {
  static const std::map<std::string, std::string> kTop = {
      {"embedding.weight", "model.embed_tokens.weight"},
      {"final_norm.weight", "model.norm.weight"},
      {"lm_head.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"attention_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attention.wq", "self_attn.q_proj.weight"},
      {"attention.wk", "self_attn.k_proj.weight"},
      {"attention.wv", "self_attn.v_proj.weight"},
      {"attention.wo", "self_attn.o_proj.weight"},
      {"mlp.w1", "mlp.gate_proj.weight"},
      {"mlp.w3", "mlp.up_proj.weight"},
      {"mlp.w2", "mlp.down_proj.weight"},
      {"moe.router", "mlp.gate.weight"},
      {"moe.shared.w1", "mlp.shared_expert.gate_proj.weight"},
      {"moe.shared.w3", "mlp.shared_expert.up_proj.weight"},
      {"moe.shared.w2", "mlp.shared_expert.down_proj.weight"}};
  static const std::map<std::string, std::string> kExpert = {{"moe.experts.w1", "gate_proj"},
                                                             {"moe.experts.w3", "up_proj"},
                                                             {"moe.experts.w2", "down_proj"}};
  // Mixtral: block_sparse_moe.gate and experts.N.w1 (gate), w3 (up), w2 (down), pentamesh's names.
  const bool mixtral = arch == HfArch::kMixtral;
  if (auto it = kTop.find(name); it != kTop.end()) return std::vector<Piece>{{it->second, shape}};
  const size_t dot = name.find('.', 7);
  if (!StartsWith(name, "layers.") || dot == std::string::npos)
    return core::Status::Error(fmt::format("parameter {}: no Hugging Face equivalent", name));
  const std::string layer = name.substr(7, dot - 7), rest = name.substr(dot + 1);
  const std::string prefix = "model.layers." + layer + ".";
  if (mixtral && rest == "moe.router")
    return std::vector<Piece>{{prefix + "block_sparse_moe.gate.weight", shape}};
  if (auto it = kLayer.find(rest); it != kLayer.end()) {
    // Qwen2's shared expert is gated by sigmoid(0) = 1/2 on export: down_proj carries the 2.
    const float scale = rest == "moe.shared.w2" ? 2.0f : 1.0f;
    return std::vector<Piece>{{prefix + it->second, shape, 0, scale}};
  }
  if (auto it = kExpert.find(rest); it != kExpert.end()) {
    PM_CHECK(shape.size() == 3) << name << " " << ShapeString(shape);
    std::vector<Piece> pieces;
    const Shape one(shape.begin() + 1, shape.end());
    for (int64_t e = 0; e < shape[0]; ++e) {
      const std::string hf_name =
          mixtral ? fmt::format("{}block_sparse_moe.experts.{}.{}.weight", prefix, e,
                                rest.substr(rest.size() - 2))
                  : fmt::format("{}mlp.experts.{}.{}.weight", prefix, e, it->second);
      pieces.push_back({hf_name, one, e * Numel(one), 1.0f});
    }
    return pieces;
  }
  return core::Status::Error(fmt::format("parameter {}: no Hugging Face equivalent", name));
}

// HF-only tensors of `m`: Qwen2-MoE's q/k/v biases and shared-expert gates, and a width-1 zero
// shared expert where pentamesh has none (Llama and Mixtral have none).
std::vector<ZeroTensor> ZeroTensors(const spec::ModelSpec& m, HfArch arch) {
  std::vector<ZeroTensor> zeros;
  if (arch != HfArch::kQwen2Moe) return zeros;
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    zeros.push_back({p + "self_attn.q_proj.bias", {m.heads * m.head_dim}});
    zeros.push_back({p + "self_attn.k_proj.bias", {m.kv_heads * m.head_dim}});
    zeros.push_back({p + "self_attn.v_proj.bias", {m.kv_heads * m.head_dim}});
    if (!m.IsMoeLayer(l)) continue;
    zeros.push_back({p + "mlp.shared_expert_gate.weight", {1, m.hidden}});
    if (m.moe.shared_experts == 0) {
      zeros.push_back({p + "mlp.shared_expert.gate_proj.weight", {1, m.hidden}});
      zeros.push_back({p + "mlp.shared_expert.up_proj.weight", {1, m.hidden}});
      zeros.push_back({p + "mlp.shared_expert.down_proj.weight", {m.hidden, 1}});
    }
  }
  return zeros;
}

core::Status WriteText(const fs::path& path, const std::string& text) {
  return Env::Default()->WriteFile(path.string(), text);
}

// Through the input layer: a regular file within the limit of its kind (core/input.h).
core::Result<std::string> ReadFile(const fs::path& path,
                                   int64_t max_bytes = core::kMaxDataFileBytes,
                                   std::string_view what = "Hugging Face checkpoint file") {
  return core::ReadInputFile(path.string(), max_bytes, what);
}

// The tokenizer files: tokenizer.model (the SentencePiece model, byte for byte) and the configs
// that make transformers' AutoTokenizer pick LlamaTokenizer (SentencePiece based, no BOS added:
// pentamesh's shards carry no BOS, only </s> between documents).
core::Status WriteTokenizer(const spec::ModelSpec& m, const std::string& model_path,
                            const fs::path& dir, std::vector<std::string>& files) {
  PM_ASSIGN_OR_RETURN(data::Tokenizer tok, data::Tokenizer::Load(model_path));
  if (tok.vocab_size() != m.vocab)
    return core::Status::Error(
        fmt::format("--tokenizer {}: vocab_size {} differs from model.vocab {}", model_path,
                    tok.vocab_size(), m.vocab));
  PM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(model_path));
  PM_RETURN_IF_ERROR(WriteText(dir / "tokenizer.model", bytes));
  const nlohmann::json special = {
      {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
  nlohmann::json config = special;
  config.update({{"tokenizer_class", "LlamaTokenizer"},
                 {"add_bos_token", false},
                 {"add_eos_token", false},
                 {"legacy", true},
                 {"clean_up_tokenization_spaces", false},
                 {"sp_model_kwargs", nlohmann::json::object()},
                 {"model_max_length", m.max_seq_len}});
  PM_RETURN_IF_ERROR(WriteText(dir / "tokenizer_config.json", config.dump(2) + "\n"));
  PM_RETURN_IF_ERROR(WriteText(dir / "special_tokens_map.json", special.dump(2) + "\n"));
  const nlohmann::json generation = {
      {"bos_token_id", 1}, {"eos_token_id", tok.eos_id()}, {"_from_model_config", true}};
  PM_RETURN_IF_ERROR(WriteText(dir / "generation_config.json", generation.dump(2) + "\n"));
  for (const char* f : {"tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
                        "generation_config.json"})
    files.push_back(f);
  return core::Status::Ok();
}

struct HfTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;
};

// Groups tensors into files of at most max_bytes (a tensor larger than that gets its own file)
// and writes them, with model.safetensors.index.json when there is more than one.
core::Status WriteWeights(const std::vector<HfTensor>& tensors, int64_t max_bytes,
                          const fs::path& dir, std::vector<std::string>& files) {
  std::vector<std::vector<size_t>> groups(1);
  int64_t group_bytes = 0, total_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t bytes = static_cast<int64_t>(tensors[i].data.size() * sizeof(float));
    if (!groups.back().empty() && group_bytes + bytes > max_bytes) {
      groups.emplace_back();
      group_bytes = 0;
    }
    groups.back().push_back(i);
    group_bytes += bytes;
    total_bytes += bytes;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string file = groups.size() == 1 ? "model.safetensors"
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors",
                                                              g + 1, groups.size());
    std::vector<StTensor> st;
    for (size_t i : groups[g]) {
      const HfTensor& t = tensors[i];
      st.push_back({t.name, "F32", t.shape,
                    std::string_view(reinterpret_cast<const char*>(t.data.data()),
                                     t.data.size() * sizeof(float))});
      weight_map[t.name] = file;
    }
    PM_RETURN_IF_ERROR(WriteText(dir / file, EncodeSafetensors(st, {{"format", "pt"}})));
    files.push_back(file);
  }
  if (groups.size() > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}},
                                  {"weight_map", weight_map}};
    PM_RETURN_IF_ERROR(WriteText(dir / "model.safetensors.index.json", index.dump(2) + "\n"));
    files.push_back("model.safetensors.index.json");
  }
  return core::Status::Ok();
}

// config.json fields of Qwen2MoeForCausalLM beyond Llama's.
nlohmann::json Qwen2MoeFields(const spec::ModelSpec& m) {
  nlohmann::json dense_layers = nlohmann::json::array();
  for (int64_t l = 0; l < m.layers; ++l)
    if (!m.IsMoeLayer(l)) dense_layers.push_back(l);
  return {{"model_type", "qwen2_moe"},
          {"num_experts", m.moe.experts},
          {"num_experts_per_tok", m.moe.top_k},
          {"moe_intermediate_size", m.moe.expert_ffn_hidden},
          {"shared_expert_intermediate_size",
           m.moe.shared_experts > 0 ? m.moe.shared_experts * m.moe.expert_ffn_hidden : 1},
          {"norm_topk_prob", m.moe.router == spec::MoeRouter::kTopKRenorm},
          {"decoder_sparse_step", 1},
          {"mlp_only_layers", dense_layers},
          {"use_sliding_window", false},
          {"sliding_window", m.max_seq_len},
          {"max_window_layers", m.layers},
          {"output_router_logits", false},
          {"router_aux_loss_coef", 0.0}};
}

}  // namespace

HfArch HfArchOf(const spec::ModelSpec& m) {
  if (!m.is_moe()) return HfArch::kLlama;
  const bool every_layer_moe = m.MoeLayerCount() == m.layers;
  return m.moe.router == spec::MoeRouter::kTopKRenorm && m.moe.shared_experts == 0 &&
                 every_layer_moe
             ? HfArch::kMixtral
             : HfArch::kQwen2Moe;
}

const char* HfArchName(HfArch arch) {
  switch (arch) {
    case HfArch::kLlama:
      return "LlamaForCausalLM";
    case HfArch::kQwen2Moe:
      return "Qwen2MoeForCausalLM";
    case HfArch::kMixtral:
      return "MixtralForCausalLM";
  }
  return "?";
}

std::vector<std::pair<std::string, std::vector<int64_t>>> ModelParams(const spec::ModelSpec& m) {
  core::Allocator alloc;
  model::ParamSet params(alloc, core::Dtype::kF32);
  // Registers the parameters only: without Finalize no buffer is allocated.
  model::Stage stage({.model = m, .first_layer = 0, .last_layer = m.layers}, params, alloc);
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (model::ParamId id = 0; id < params.size(); ++id) {
    const model::ParamInfo& info = params.info(id);
    out.emplace_back(
        info.name, Shape(info.global_shape.dims, info.global_shape.dims + info.global_shape.rank));
  }
  return out;
}

core::Result<nlohmann::json> HfConfig(const spec::ModelSpec& m) {
  PM_RETURN_IF_ERROR(model::CheckSupported(m));
  if (m.heads * m.head_dim != m.hidden)
    return core::Status::Error(
        fmt::format("model.head_dim: {} but Hugging Face Llama/Qwen2-MoE/Mixtral derive head_dim = "
                    "hidden / heads = "
                    "{} / {}; such a model cannot be exported",
                    m.head_dim, m.hidden, m.heads));
  nlohmann::json c = {{"vocab_size", m.vocab},
                      {"hidden_size", m.hidden},
                      {"intermediate_size", m.ffn_hidden},
                      {"num_hidden_layers", m.layers},
                      {"num_attention_heads", m.heads},
                      {"num_key_value_heads", m.kv_heads},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", m.max_seq_len},
                      {"rms_norm_eps", m.norm_eps},
                      {"rope_theta", m.EffectiveRopeTheta()},
                      {"tie_word_embeddings", m.tied_embeddings},
                      {"initializer_range", 0.02},
                      {"attention_dropout", 0.0},
                      {"use_cache", true},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2},
                      {"torch_dtype", "float32"},
                      {"pentamesh_model_name", m.name}};
  const HfArch arch = HfArchOf(m);
  c["architectures"] = nlohmann::json::array({HfArchName(arch)});
  if (m.rope_scaling.kind == spec::RopeScalingKind::kLlama3) {
    // transformers 4.44 (scripts/pyenv.sh) applies rope_scaling in Llama only; its Qwen2-MoE and
    // Mixtral read rope_theta alone and would run the model unscaled.
    if (arch != HfArch::kLlama)
      return core::Status::Error(fmt::format(
          "model.rope_scaling: llama3 on a mixture-of-experts model cannot be exported: Hugging "
          "Face's {} ignores rope_scaling",
          HfArchName(arch)));
    c["rope_scaling"] =
        nlohmann::json{{"rope_type", "llama3"},
                       {"factor", m.rope_scaling.factor},
                       {"low_freq_factor", m.rope_scaling.low_freq_factor},
                       {"high_freq_factor", m.rope_scaling.high_freq_factor},
                       {"original_max_position_embeddings", m.rope_scaling.original_max_positions}};
  }
  // The training-time balancing losses are not part of the model: no router logits, coefficient 0.
  if (arch == HfArch::kLlama) {
    // Only LlamaConfig takes rope_scaling (transformers 4.44.2; import warns on keys a model
    // type's configuration class does not take): null unless set above.
    if (!c.contains("rope_scaling")) c["rope_scaling"] = nullptr;
    c.update({{"model_type", "llama"},
              {"attention_bias", false},
              {"mlp_bias", false},
              {"pretraining_tp", 1}});
  } else if (arch == HfArch::kMixtral) {
    c.update({{"model_type", "mixtral"},
              {"intermediate_size", m.moe.expert_ffn_hidden},  // every layer is MoE
              {"num_local_experts", m.moe.experts},
              {"num_experts_per_tok", m.moe.top_k},
              {"sliding_window", nullptr},
              {"output_router_logits", false},
              {"router_aux_loss_coef", 0.0},
              {"router_jitter_noise", 0.0}});
  } else {
    c.update(Qwen2MoeFields(m));
  }
  return c;
}

core::Result<std::vector<std::string>> ExportHf(const spec::ModelSpec& m,
                                                const TensorSource& source,
                                                const HfExportOptions& options) {
  PM_ASSIGN_OR_RETURN(nlohmann::json config, HfConfig(m));
  std::vector<HfTensor> tensors;
  for (const auto& [name, shape] : ModelParams(m)) {
    PM_ASSIGN_OR_RETURN(std::vector<float> full, source(name, shape));
    PM_CHECK(static_cast<int64_t>(full.size()) == Numel(shape)) << name;
    PM_ASSIGN_OR_RETURN(std::vector<Piece> pieces, Pieces(name, shape, HfArchOf(m)));
    for (const Piece& p : pieces) {
      HfTensor t{p.hf_name, p.shape, {}};
      t.data.assign(full.begin() + p.offset, full.begin() + p.offset + Numel(p.shape));
      for (float& x : t.data) x *= p.scale;
      tensors.push_back(std::move(t));
    }
  }
  for (const ZeroTensor& z : ZeroTensors(m, HfArchOf(m))) {
    tensors.push_back(
        {z.hf_name, z.shape, std::vector<float>(static_cast<size_t>(Numel(z.shape)))});
  }
  const fs::path dir(options.dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return core::Status::Error(fmt::format("--hf {}: {}", options.dir, ec.message()));
  for (const auto& entry : fs::directory_iterator(dir, ec)) {  // a previous export's weights
    const std::string f = entry.path().filename().string();
    if (StartsWith(f, "model") && (f.ends_with(".safetensors") || f.ends_with(".index.json")))
      fs::remove(entry.path(), ec);
  }
  std::vector<std::string> files;
  PM_RETURN_IF_ERROR(WriteWeights(tensors, options.max_shard_bytes, dir, files));
  PM_RETURN_IF_ERROR(WriteText(dir / "config.json", config.dump(2) + "\n"));
  files.push_back("config.json");
  if (!options.tokenizer_model.empty())
    PM_RETURN_IF_ERROR(WriteTokenizer(m, options.tokenizer_model, dir, files));
  return files;
}

}  // namespace pentamesh::ckpt

// ---------------------------------------------------------------------------------------------
// Import.

namespace pentamesh::ckpt {

extern const char* const kHfConfigKeyTable;  // generated from src/ckpt/data (CMakeLists.txt)

namespace {

// config.json fields, read with errors naming the file and the field.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string file) : j_(j), file_(std::move(file)) {}
  core::Result<int64_t> Int(const std::string& key, std::optional<int64_t> fallback = {}) const {
    if (!j_.contains(key) || j_[key].is_null()) {
      if (fallback) return *fallback;
      return Missing(key);
    }
    if (!j_[key].is_number_integer() || j_[key].get<int64_t>() < 0)
      return core::Status::Error(fmt::format("{}: {}: expected a non-negative integer, got {}",
                                             file_, key, j_[key].dump()));
    return j_[key].get<int64_t>();
  }
  core::Result<double> Double(const std::string& key, std::optional<double> fallback = {}) const {
    if (!j_.contains(key) || j_[key].is_null()) {
      if (fallback) return *fallback;
      return Missing(key);
    }
    if (!j_[key].is_number())
      return core::Status::Error(
          fmt::format("{}: {}: expected a number, got {}", file_, key, j_[key].dump()));
    return j_[key].get<double>();
  }
  // OK iff the key is absent, null, or equals `want`.
  core::Status Expect(const std::string& key, const nlohmann::json& want,
                      const std::string& why) const {
    if (!j_.contains(key) || j_[key].is_null() || j_[key] == want) return core::Status::Ok();
    return core::Status::Error(
        fmt::format("{}: {}: {} is not supported ({})", file_, key, j_[key].dump(), why));
  }
  const nlohmann::json& json() const { return j_; }
  const std::string& file() const { return file_; }

 private:
  core::Status Missing(const std::string& key) const {
    return core::Status::Error(fmt::format("{}: {}: missing", file_, key));
  }
  const nlohmann::json& j_;
  std::string file_;
};

// rope_scaling: null, or Llama 3.1's {"rope_type": "llama3", factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings} ("type" is the older spelling of
// "rope_type"). Other kinds are refused naming the kind.
core::Status ReadRopeScaling(const ConfigReader& r, spec::ModelSpec& m) {
  const nlohmann::json& j = r.json();
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return core::Status::Ok();
  const nlohmann::json& rs = j["rope_scaling"];
  if (!rs.is_object())
    return core::Status::Error(
        fmt::format("{}: rope_scaling: expected an object or null, got {}", r.file(), rs.dump()));
  const char* kind_key = rs.contains("rope_type") ? "rope_type" : "type";
  const nlohmann::json kind = rs.value(kind_key, nlohmann::json());
  if (kind != "llama3")
    return core::Status::Error(fmt::format(
        "{}: rope_scaling.{}: {} is not supported (pentamesh applies llama3 scaling only)",
        r.file(), kind_key, kind.dump()));
  const ConfigReader sub(rs, r.file() + ": rope_scaling");
  spec::RopeScaling& rope = m.rope_scaling;
  rope.kind = spec::RopeScalingKind::kLlama3;
  PM_ASSIGN_OR_RETURN(rope.factor, sub.Double("factor"));
  PM_ASSIGN_OR_RETURN(rope.low_freq_factor, sub.Double("low_freq_factor"));
  PM_ASSIGN_OR_RETURN(rope.high_freq_factor, sub.Double("high_freq_factor"));
  PM_ASSIGN_OR_RETURN(rope.original_max_positions, sub.Int("original_max_position_embeddings"));
  return core::Status::Ok();
}

// The router option from qwen2_moe's norm_topk_prob (absent: false, transformers' default).
core::Status ReadNormTopkProb(const ConfigReader& r, spec::ModelSpec& m) {
  const nlohmann::json& j = r.json();
  if (!j.contains("norm_topk_prob") || j["norm_topk_prob"].is_null()) return core::Status::Ok();
  if (!j["norm_topk_prob"].is_boolean())
    return core::Status::Error(fmt::format("{}: norm_topk_prob: expected true or false, got {}",
                                           r.file(), j["norm_topk_prob"].dump()));
  m.moe.router = j["norm_topk_prob"].get<bool>() ? spec::MoeRouter::kTopKRenorm
                                                 : spec::MoeRouter::kSoftmaxTopK;
  return core::Status::Ok();
}

// mixtral: every layer MoE, no shared expert, top-k gates renormalised.
core::Status ReadMixtralConfig(const ConfigReader& r, spec::ModelSpec& m) {
  PM_RETURN_IF_ERROR(r.Expect("sliding_window", nullptr, "pentamesh attention is full causal"));
  PM_ASSIGN_OR_RETURN(m.moe.experts, r.Int("num_local_experts"));
  PM_ASSIGN_OR_RETURN(m.moe.top_k, r.Int("num_experts_per_tok"));
  if (m.moe.experts == 0 || m.moe.top_k == 0 || m.moe.top_k > m.moe.experts)
    return core::Status::Error(
        fmt::format("{}: num_local_experts={}, num_experts_per_tok={}: need 0 < top-k <= experts",
                    r.file(), m.moe.experts, m.moe.top_k));
  m.moe.expert_ffn_hidden = m.ffn_hidden;  // intermediate_size is the experts' width
  m.moe.router = spec::MoeRouter::kTopKRenorm;
  m.moe.capacity_factor = 0;  // inference stacks are dropless
  return core::Status::Ok();
}

core::Status ReadMoeConfig(const ConfigReader& r, spec::ModelSpec& m) {
  PM_RETURN_IF_ERROR(ReadNormTopkProb(r, m));
  PM_RETURN_IF_ERROR(r.Expect("use_sliding_window", false, "pentamesh attention is full causal"));
  PM_ASSIGN_OR_RETURN(m.moe.experts, r.Int("num_experts"));
  PM_ASSIGN_OR_RETURN(m.moe.top_k, r.Int("num_experts_per_tok"));
  PM_ASSIGN_OR_RETURN(m.moe.expert_ffn_hidden, r.Int("moe_intermediate_size"));
  PM_ASSIGN_OR_RETURN(const int64_t step, r.Int("decoder_sparse_step", 1));
  if (m.moe.experts == 0 || m.moe.top_k == 0 || m.moe.top_k > m.moe.experts || step == 0)
    return core::Status::Error(fmt::format(
        "{}: num_experts={}, num_experts_per_tok={}, decoder_sparse_step={}: need 0 < top-k <= "
        "experts and a positive step",
        r.file(), m.moe.experts, m.moe.top_k, step));
  std::set<int64_t> dense;
  if (r.json().contains("mlp_only_layers") && r.json()["mlp_only_layers"].is_array()) {
    for (const auto& l : r.json()["mlp_only_layers"])
      if (l.is_number_integer()) dense.insert(l.get<int64_t>());
  }
  std::vector<int64_t> moe_layers;
  for (int64_t l = 0; l < m.layers; ++l)
    if (!dense.count(l) && (l + 1) % step == 0) moe_layers.push_back(l);
  if (moe_layers.empty())
    return core::Status::Error(fmt::format("{}: mlp_only_layers: no MoE layer left", r.file()));
  // pentamesh's pattern: layers >= first_dense_layers, every moe_layer_freq-th.
  m.moe.first_dense_layers = moe_layers[0];
  m.moe.moe_layer_freq =
      moe_layers.size() > 1 ? moe_layers[1] - moe_layers[0] : m.layers - moe_layers[0];
  for (int64_t l = 0; l < m.layers; ++l) {
    const bool hf_moe = std::find(moe_layers.begin(), moe_layers.end(), l) != moe_layers.end();
    if (hf_moe != m.IsMoeLayer(l))
      return core::Status::Error(fmt::format(
          "{}: mlp_only_layers/decoder_sparse_step: the MoE layers {} are not pentamesh's "
          "pattern (layers >= first_dense_layers, every moe_layer_freq-th)",
          r.file(), nlohmann::json(moe_layers).dump()));
  }
  m.moe.capacity_factor = 0;  // inference stacks are dropless
  return core::Status::Ok();
}

core::Result<spec::ModelSpec> ReadConfigJson(const nlohmann::json& j, const std::string& file,
                                             const std::string& dir, HfArch& arch,
                                             std::vector<std::string>& warnings);

// The keys of `j` that transformers 4.44.2 does not read for `model_type` (kHfConfigKeyTable),
// besides pentamesh's own pentamesh_model_name.
std::vector<std::string> UnreadConfigKeys(const nlohmann::json& j, const std::string& model_type) {
  static const std::set<std::pair<std::string, std::string>> known = [] {
    std::set<std::pair<std::string, std::string>> keys;
    std::istringstream in(kHfConfigKeyTable);
    std::string type, key;
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      if (!line.empty() && line[0] != '#' && words >> type >> key) keys.emplace(type, key);
    }
    return keys;
  }();
  std::vector<std::string> unread;
  for (const auto& [key, value] : j.items()) {
    if (key != "pentamesh_model_name" && !known.count({model_type, key})) unread.push_back(key);
  }
  return unread;
}

// config.json of `dir`; `arch` from its model_type.
core::Result<spec::ModelSpec> ReadConfig(const std::string& dir, HfArch& arch,
                                         std::vector<std::string>& warnings) {
  const std::string file = (fs::path(dir) / "config.json").string();
  PM_ASSIGN_OR_RETURN(std::string text, ReadFile(file, core::kMaxConfigFileBytes, "config.json"));
  // The one JSON number policy (spec/json_input.h): 1e400 or a 20-digit integer is an error
  // naming the literal and its line, not a value clamped or wrapped.
  PM_ASSIGN_OR_RETURN(const nlohmann::json j, spec::ParseJson(text, file));
  if (!j.is_object()) return core::Status::Error(fmt::format("{}: not a JSON object", file));
  try {  // a field of the wrong JSON type (e.g. "model_type": 3) throws inside nlohmann's value()
    return ReadConfigJson(j, file, dir, arch, warnings);
  } catch (const nlohmann::json::exception& e) {
    return core::Status::Error(fmt::format("{}: {}", file, e.what()));
  }
}

core::Result<spec::ModelSpec> ReadConfigJson(const nlohmann::json& j, const std::string& file,
                                             const std::string& dir, HfArch& arch,
                                             std::vector<std::string>& warnings) {
  const ConfigReader r(j, file);
  const std::string type = j.value("model_type", "");
  if (type != "llama" && type != "qwen2_moe" && type != "mixtral")
    return core::Status::Error(fmt::format(
        "{}: model_type: '{}' is not supported (llama: dense, qwen2_moe or mixtral: MoE)", file,
        type));
  if (const std::vector<std::string> unread = UnreadConfigKeys(j, type); !unread.empty()) {
    warnings.push_back(fmt::format(
        "{}: {} not read by transformers 4.44.2 for model_type {} (a misspelt key leaves its "
        "field at the default there and here): {}",
        file, unread.size() == 1 ? "a key is" : "keys are", type, fmt::join(unread, ", ")));
  }
  arch =
      type == "llama" ? HfArch::kLlama : (type == "mixtral" ? HfArch::kMixtral : HfArch::kQwen2Moe);
  spec::ModelSpec m;
  m.name = j.value("pentamesh_model_name", fs::path(dir).filename().string());
  PM_ASSIGN_OR_RETURN(m.layers, r.Int("num_hidden_layers"));
  PM_ASSIGN_OR_RETURN(m.hidden, r.Int("hidden_size"));
  PM_ASSIGN_OR_RETURN(m.heads, r.Int("num_attention_heads"));
  PM_ASSIGN_OR_RETURN(m.kv_heads, r.Int("num_key_value_heads", m.heads));
  PM_ASSIGN_OR_RETURN(m.ffn_hidden, r.Int("intermediate_size"));
  PM_ASSIGN_OR_RETURN(m.vocab, r.Int("vocab_size"));
  PM_ASSIGN_OR_RETURN(m.max_seq_len, r.Int("max_position_embeddings"));
  PM_ASSIGN_OR_RETURN(m.norm_eps, r.Double("rms_norm_eps"));
  PM_ASSIGN_OR_RETURN(m.rope_theta, r.Double("rope_theta", 10000.0));
  if (m.heads == 0 || m.hidden % m.heads != 0)
    return core::Status::Error(fmt::format("{}: num_attention_heads: {} must divide hidden_size {}",
                                           file, m.heads, m.hidden));
  if (m.kv_heads == 0 || m.heads % m.kv_heads != 0)  // 0 would divide by zero downstream
    return core::Status::Error(
        fmt::format("{}: num_key_value_heads: {} must divide num_attention_heads {}", file,
                    m.kv_heads, m.heads));
  m.head_dim = m.hidden / m.heads;
  PM_ASSIGN_OR_RETURN(const int64_t head_dim, r.Int("head_dim", m.head_dim));
  if (head_dim != m.head_dim)
    return core::Status::Error(
        fmt::format("{}: head_dim: {} differs from hidden/heads = {}", file, head_dim, m.head_dim));
  m.tied_embeddings = j.value("tie_word_embeddings", false);
  PM_RETURN_IF_ERROR(r.Expect("hidden_act", "silu", "pentamesh's FFN is SwiGLU (silu)"));
  PM_RETURN_IF_ERROR(ReadRopeScaling(r, m));
  PM_RETURN_IF_ERROR(r.Expect("attention_bias", false, "pentamesh's projections have no bias"));
  PM_RETURN_IF_ERROR(r.Expect("mlp_bias", false, "pentamesh's projections have no bias"));
  PM_RETURN_IF_ERROR(r.Expect("pretraining_tp", 1, "sliced projections"));
  if (type == "qwen2_moe") PM_RETURN_IF_ERROR(ReadMoeConfig(r, m));
  if (type == "mixtral") PM_RETURN_IF_ERROR(ReadMixtralConfig(r, m));
  return m;
}

// The safetensors of an HF directory: every tensor by name, with the file it came from.
struct HfFiles {
  std::vector<std::unique_ptr<std::string>> bytes;  // owns the file contents
  std::map<std::string, std::pair<StTensor, std::string>> tensors;
};

core::Result<HfFiles> ReadWeights(const std::string& dir) {
  std::vector<std::string> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    PM_ASSIGN_OR_RETURN(std::string text,
                        ReadFile(index, core::kMaxConfigFileBytes, "safetensors index"));
    PM_ASSIGN_OR_RETURN(const nlohmann::json j, spec::ParseJson(text, index.string()));
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return core::Status::Error(fmt::format("{}: weight_map: missing", index.string()));
    std::set<std::string> unique;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        return core::Status::Error(
            fmt::format("{}: weight_map.{}: not a file name", index.string(), name));
      unique.insert(file.get<std::string>());
    }
    files.assign(unique.begin(), unique.end());
  } else {
    files.push_back("model.safetensors");
  }
  HfFiles out;
  for (const std::string& f : files) {
    const std::string path = (fs::path(dir) / f).string();
    PM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    out.bytes.push_back(std::make_unique<std::string>(std::move(bytes)));
    PM_ASSIGN_OR_RETURN(StFile st, ParseSafetensors(*out.bytes.back(), path));
    for (const StTensor& t : st.tensors) {
      if (!out.tensors.emplace(t.name, std::make_pair(t, path)).second)
        return core::Status::Error(fmt::format("{}: tensor {} also in another file", path, t.name));
    }
  }
  return out;
}

float HalfToFloat(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31) return mant ? std::nanf("") : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

// The tensor as fp32, checked against the expected shape; errors name the file and tensor.
core::Result<std::vector<float>> TensorF32(const HfFiles& files, const std::string& name,
                                           const Shape& shape) {
  auto it = files.tensors.find(name);
  if (it == files.tensors.end())
    return core::Status::Error(fmt::format("tensor {}: missing from the safetensors", name));
  const auto& [t, file] = it->second;
  if (t.shape != shape)
    return core::Status::Error(fmt::format("{}: tensor {}: shape {} but the config implies {}",
                                           file, name, ShapeString(t.shape), ShapeString(shape)));
  const size_t n = static_cast<size_t>(Numel(shape));
  std::vector<float> out(n);
  if (t.dtype == "F32") {
    std::memcpy(out.data(), t.data.data(), n * sizeof(float));
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data.data() + 2 * i, 2);
      out[i] = t.dtype == "BF16" ? core::Bf16ToFloat(h) : HalfToFloat(h);
    }
  } else {
    return core::Status::Error(
        fmt::format("{}: tensor {}: dtype {} (need F32, BF16 or F16)", file, name, t.dtype));
  }
  return out;
}

bool AllZero(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
}

// Qwen2-MoE's shared expert: zero weights = pentamesh has none; otherwise its width must be a
// multiple of the expert width.
core::Status ReadSharedExperts(const HfFiles& files, spec::ModelSpec& m, const std::string& dir) {
  const std::string p = fmt::format("model.layers.{}.mlp.shared_expert.", m.moe.first_dense_layers);
  auto it = files.tensors.find(p + "gate_proj.weight");
  if (it == files.tensors.end())
    return core::Status::Error(fmt::format("{}: tensor {}gate_proj.weight: missing", dir, p));
  const Shape& shape = it->second.first.shape;
  if (shape.size() != 2)
    return core::Status::Error(fmt::format("{}: {}: not 2-d", it->second.second, it->first));
  PM_ASSIGN_OR_RETURN(std::vector<float> w, TensorF32(files, it->first, shape));
  if (AllZero(w)) return core::Status::Ok();
  if (m.moe.expert_ffn_hidden == 0 || shape[0] % m.moe.expert_ffn_hidden != 0)
    return core::Status::Error(
        fmt::format("{}/config.json: shared_expert_intermediate_size: {} is not a multiple of "
                    "moe_intermediate_size {} (pentamesh's shared experts have the expert width)",
                    dir, shape[0], m.moe.expert_ffn_hidden));
  m.moe.shared_experts = shape[0] / m.moe.expert_ffn_hidden;
  return core::Status::Ok();
}

}  // namespace

core::Result<HfModel> ImportHf(const std::string& dir) {
  HfModel out;
  PM_ASSIGN_OR_RETURN(out.model, ReadConfig(dir, out.arch, out.warnings));
  spec::ModelSpec& m = out.model;
  PM_RETURN_IF_ERROR(model::CheckSupported(m));
  PM_ASSIGN_OR_RETURN(HfFiles files, ReadWeights(dir));
  if (out.arch == HfArch::kQwen2Moe) PM_RETURN_IF_ERROR(ReadSharedExperts(files, m, dir));
  std::set<std::string> used;
  for (const auto& [name, shape] : ModelParams(m)) {
    FullTensor& full = out.tensors[name];
    full.shape = shape;
    full.data.resize(static_cast<size_t>(Numel(shape)));
    PM_ASSIGN_OR_RETURN(std::vector<Piece> pieces, Pieces(name, shape, out.arch));
    for (const Piece& p : pieces) {
      PM_ASSIGN_OR_RETURN(std::vector<float> v, TensorF32(files, p.hf_name, p.shape));
      for (size_t i = 0; i < v.size(); ++i) {
        const float x = v[i] / p.scale;
        if (!std::isfinite(x)) {  // a NaN or Inf weight would only surface as a diverged step
          return core::Status::Error(fmt::format("{}: tensor {}: element {} is not finite ({})",
                                                 files.tensors.at(p.hf_name).second, p.hf_name, i,
                                                 v[i]));
        }
        full.data[static_cast<size_t>(p.offset) + i] = x;
      }
      used.insert(p.hf_name);
    }
  }
  for (const ZeroTensor& z : ZeroTensors(m, out.arch)) {
    if (!files.tensors.count(z.hf_name)) continue;
    PM_ASSIGN_OR_RETURN(std::vector<float> v, TensorF32(files, z.hf_name, z.shape));
    if (!AllZero(v))
      return core::Status::Error(fmt::format(
          "{}: tensor {}: must be zero (pentamesh has no {}; importing it would change the "
          "model)",
          files.tensors.at(z.hf_name).second, z.hf_name,
          z.hf_name.find("bias") != std::string::npos ? "attention biases" : "shared-expert gate"));
    used.insert(z.hf_name);
  }
  for (const auto& [name, entry] : files.tensors) {
    if (used.count(name) || name.ends_with("rotary_emb.inv_freq")) continue;
    if (name == "lm_head.weight" && m.tied_embeddings) continue;  // a tied copy
    return core::Status::Error(
        fmt::format("{}: tensor {}: pentamesh's model (from config.json) has no parameter for it",
                    entry.second, name));
  }
  return out;
}

core::Status CheckSameArchitecture(const spec::ModelSpec& hf, const spec::ModelSpec& run,
                                   const std::string& what) {
  std::vector<std::string> diffs;
  auto cmp = [&](const char* field, auto a, auto b) {
    if (a != b) diffs.push_back(fmt::format("model.{}: run config {} vs {} {}", field, a, what, b));
  };
  cmp("layers", run.layers, hf.layers);
  cmp("hidden", run.hidden, hf.hidden);
  cmp("heads", run.heads, hf.heads);
  cmp("kv_heads", run.kv_heads, hf.kv_heads);
  cmp("head_dim", run.head_dim, hf.head_dim);
  cmp("vocab", run.vocab, hf.vocab);
  cmp("tied_embeddings", run.tied_embeddings, hf.tied_embeddings);
  cmp("norm_eps", run.norm_eps, hf.norm_eps);
  cmp("rope_theta", run.EffectiveRopeTheta(), hf.EffectiveRopeTheta());
  cmp("rope_scaling", std::string(spec::RopeScalingName(run.rope_scaling.kind)),
      std::string(spec::RopeScalingName(hf.rope_scaling.kind)));
  if (run.rope_scaling.kind == hf.rope_scaling.kind &&
      run.rope_scaling.kind == spec::RopeScalingKind::kLlama3) {
    cmp("rope_scaling.factor", run.rope_scaling.factor, hf.rope_scaling.factor);
    cmp("rope_scaling.low_freq_factor", run.rope_scaling.low_freq_factor,
        hf.rope_scaling.low_freq_factor);
    cmp("rope_scaling.high_freq_factor", run.rope_scaling.high_freq_factor,
        hf.rope_scaling.high_freq_factor);
    cmp("rope_scaling.original_max_positions", run.rope_scaling.original_max_positions,
        hf.rope_scaling.original_max_positions);
  }
  cmp("moe.experts", run.moe.experts, hf.moe.experts);
  if (run.MoeLayerCount() < run.layers || hf.MoeLayerCount() < hf.layers)
    cmp("ffn_hidden", run.ffn_hidden, hf.ffn_hidden);
  if (run.is_moe() && hf.is_moe()) {
    cmp("moe.top_k", run.moe.top_k, hf.moe.top_k);
    cmp("moe.expert_ffn_hidden", run.moe.expert_ffn_hidden, hf.moe.expert_ffn_hidden);
    cmp("moe.router", std::string(spec::MoeRouterName(run.moe.router)),
        std::string(spec::MoeRouterName(hf.moe.router)));
    cmp("moe.shared_experts", run.moe.shared_experts, hf.moe.shared_experts);
    for (int64_t l = 0; l < std::min(run.layers, hf.layers); ++l) {
      if (run.IsMoeLayer(l) != hf.IsMoeLayer(l)) {
        diffs.push_back(fmt::format(
            "model.moe.first_dense_layers/moe_layer_freq: layer {} is {} in the run config but "
            "{} in {}",
            l, run.IsMoeLayer(l) ? "MoE" : "dense", hf.IsMoeLayer(l) ? "MoE" : "dense", what));
        break;
      }
    }
  }
  if (diffs.empty()) return core::Status::Ok();
  return core::Status::Error(fmt::format("the run config's [model] differs from {}:\n  {}", what,
                                         fmt::join(diffs, "\n  ")));
}

core::Status LoadHfIntoParams(const HfModel& hf, model::ParamSet& params) {
  core::Status st;
  params.ForEach([&](const model::ParamInfo& info, core::Tensor master, core::Tensor, core::Tensor,
                     core::Tensor) {
    if (!st.ok()) return;
    auto it = hf.tensors.find(info.name);
    const Shape global(info.global_shape.dims, info.global_shape.dims + info.global_shape.rank);
    if (it == hf.tensors.end() || it->second.shape != global) {
      st = core::Status::Error(fmt::format("parameter {} {}: not in the imported model", info.name,
                                           ShapeString(global)));
      return;
    }
    // This rank's box: slice `rank` of dim `dim` (the whole tensor when replicated).
    const int dim = info.sharding.dim < 0 ? 0 : info.sharding.dim;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= global[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(dim) + 1; d < global.size(); ++d) inner *= global[d];
    const int64_t local = info.local_shape[dim];
    const int64_t start = info.sharding.dim < 0 ? 0 : info.sharding.rank * local;
    const float* src = it->second.data.data();
    float* dst = master.f32();
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(dst + o * local * inner,
                  src + (o * global[static_cast<size_t>(dim)] + start) * inner,
                  static_cast<size_t>(local * inner) * sizeof(float));
    }
  });
  PM_RETURN_IF_ERROR(st);
  params.SyncWeightsFromMaster();
  return core::Status::Ok();
}

}  // namespace pentamesh::ckpt

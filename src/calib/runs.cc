// Published rows -> (model, cluster, train, layout, facts, measured throughput). Every default
// filled in is recorded in Run::assumptions; docs/COST_MODEL.md "Published runs" lists the rules.
#include "calib/runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "calib/profile.h"
#include "core/numeric.h"
#include "core/output.h"
#include "spec/json_input.h"
#include "spec/limits.h"
#include "spec/load_toml.h"
#include "spec/validate.h"

namespace pentamesh::calib {
namespace {

using nlohmann::json;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool Has(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

// `word` in `text` with no letter or digit on either side ("opt" in "OPT-175B", not in "optim").
bool HasWord(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]));
    const size_t end = at + word.size();
    const bool right = end >= text.size() || !std::isalnum(static_cast<unsigned char>(text[end]));
    if (left && right) return true;
  }
  return false;
}

// The whole number that `text` starts with (digits only), clamped to [0, 2^31 - 1]; 0 for none.
int64_t LeadingCount(const char* text) {
  int64_t n = 0;
  for (; *text >= '0' && *text <= '9'; ++text) {
    n = std::min<int64_t>(n * 10 + (*text - '0'), spec::kMaxField);
  }
  return n;
}

// Reads one row's fields; the first bad value becomes `error` (row id and field named).
class RowReader {
 public:
  RowReader(const json& row, std::string id) : row_(row), id_(std::move(id)) {}

  const json* Find(const char* section, const char* field) const {
    const auto s = row_.find(section);
    if (s == row_.end() || !s->is_object()) return nullptr;
    const auto f = s->find(field);
    if (f == s->end() || f->is_null()) return nullptr;
    return &*f;
  }
  // A positive finite number, or nullopt when absent (null). Any other value is an error.
  std::optional<double> Positive(const char* section, const char* field) {
    const json* v = Find(section, field);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(section, field, fmt::format("must be a number, not {}", v->type_name()));
      return std::nullopt;
    }
    const double x = v->get<double>();
    if (!std::isfinite(x) || x <= 0) {
      Fail(section, field, fmt::format("must be a positive finite number, got {}", x));
      return std::nullopt;
    }
    return x;
  }
  // A positive whole number below 2^31 (degrees, sizes, counts).
  // A whole number from 0 (a count where zero means none: shared_experts 0, num_experts 0).
  std::optional<int64_t> Whole(const char* section, const char* field) {
    const json* v = Find(section, field);
    if (v == nullptr) return std::nullopt;
    const double x = v->is_number() ? v->get<double>() : -1;
    if (!v->is_number() || !std::isfinite(x) || x < 0 || x != std::floor(x) || x >= 2147483648.0) {
      Fail(section, field,
           v->is_number() ? fmt::format("must be a whole number from 0 below 2^31, got {}", x)
                          : fmt::format("must be a number, not {}", v->type_name()));
      return std::nullopt;
    }
    return static_cast<int64_t>(x);
  }
  std::optional<int64_t> Count(const char* section, const char* field) {
    const std::optional<double> x = Positive(section, field);
    if (!x) return std::nullopt;
    if (*x != std::floor(*x) || *x >= 2147483648.0) {
      Fail(section, field, fmt::format("must be a whole number below 2^31, got {}", *x));
      return std::nullopt;
    }
    return static_cast<int64_t>(*x);
  }
  std::string Text(const char* section, const char* field) {
    const json* v = Find(section, field);
    if (v == nullptr) return "";
    if (v->is_string()) return v->get<std::string>();
    if (v->is_boolean() || v->is_number()) return v->dump();
    Fail(section, field, fmt::format("must be a string, not {}", v->type_name()));
    return "";
  }
  std::optional<bool> Bool(const char* section, const char* field) {
    const json* v = Find(section, field);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      Fail(section, field, fmt::format("must be true, false or null, not {}", v->type_name()));
      return std::nullopt;
    }
    return v->get<bool>();
  }
  void Fail(const char* section, const char* field, const std::string& why) {
    if (error.empty()) error = fmt::format("{}.{} {}", section, field, why);
  }
  std::string error;  // "section.field why" (the caller names the row)

 private:
  const json& row_;
  std::string id_;
};

// Vocabulary of a family whose row leaves it out: the family's published tokenizer. `f` is the
// row's family and model name, lower case.
struct FamilyVocab {
  int64_t vocab = 0;
  const char* tokenizer = "";
};
std::optional<FamilyVocab> VocabOfFamily(const std::string& f) {
  if (Has(f, "grok")) return FamilyVocab{131072, "Grok-1's"};
  if (Has(f, "llama 4") || Has(f, "llama4") || Has(f, "llama-4")) {
    return FamilyVocab{202048, "Llama 4's"};
  }
  if (Has(f, "llama 3") || Has(f, "llama3") || Has(f, "llama-3")) {
    return FamilyVocab{128256, "Llama 3's"};
  }
  if (Has(f, "llama 2") || Has(f, "llama2") || Has(f, "llama-2")) {
    return FamilyVocab{32000, "Llama 2's"};
  }
  if (Has(f, "nemotron")) return FamilyVocab{256000, "Nemotron-4's"};
  if (Has(f, "qwen3") || Has(f, "qwen 3") || Has(f, "qwen-3"))
    return FamilyVocab{151936, "Qwen3's"};
  if (Has(f, "deepseek-v3") || Has(f, "deepseek v3")) return FamilyVocab{129280, "DeepSeek-V3's"};
  if (Has(f, "deepseek-v2") || Has(f, "deepseek v2")) return FamilyVocab{102400, "DeepSeek-V2's"};
  if (Has(f, "gpt-oss") || Has(f, "gpt oss")) return FamilyVocab{201088, "GPT-OSS's o200k_harmony"};
  if (Has(f, "mixtral") && Has(f, "8x22")) return FamilyVocab{32768, "Mixtral 8x22B's"};
  if (Has(f, "mixtral")) return FamilyVocab{32000, "Mixtral's"};
  if (Has(f, "bloom")) return FamilyVocab{250880, "BLOOM's"};
  // GPT-3 (Brown et al. 2020), OPT (Zhang et al. 2022) and MT-NLG (Smith et al. 2022) all use
  // GPT-2's byte-level BPE.
  if (HasWord(f, "gpt-3") || HasWord(f, "gpt3") || HasWord(f, "gpt-2") || HasWord(f, "gpt2") ||
      HasWord(f, "opt") || HasWord(f, "mt-nlg") || Has(f, "megatron-turing")) {
    return FamilyVocab{50257, "GPT-2 BPE, GPT-3/OPT/MT-NLG's"};
  }
  return std::nullopt;
}

// Activation of a row that leaves it out: every listed MoE family (Mixtral, Qwen3, DeepSeek,
// GPT-OSS, Llama 4; Grok-1's GeGLU is gated too) and the Llama/Qwen/Mistral dense families use a
// gated FFN (three GEMMs); GPT-3/OPT/MPT/BLOOM GELU and Nemotron squared ReLU (two).
std::pair<spec::Activation, std::string> ActivationOfFamily(const std::string& f, bool moe) {
  if (moe) {
    return {spec::Activation::kSwiGLU,
            "activation not published: SwiGLU (the MoE families' published configs: Mixtral, "
            "Qwen3, DeepSeek, GPT-OSS, Llama 4 gate their FFNs)"};
  }
  for (const char* gated : {"llama", "qwen", "mistral", "deepseek"}) {
    if (Has(f, gated)) {
      return {spec::Activation::kSwiGLU,
              fmt::format("activation not published: SwiGLU ({}'s published config)", gated)};
    }
  }
  if (Has(f, "nemotron")) {
    return {spec::Activation::kGeLU,
            "activation not published: squared ReLU (Nemotron's config; 2 FFN GEMMs)"};
  }
  return {spec::Activation::kGeLU, "activation not published: GELU (2 FFN GEMMs)"};
}

// Published MoE routing of a family whose row leaves top_k out.
std::optional<int64_t> TopKOfFamily(const std::string& f) {
  if (Has(f, "qwen3") || Has(f, "deepseek-v3") || Has(f, "deepseek v3")) return 8;
  if (Has(f, "gpt-oss") || Has(f, "gpt oss")) return 4;
  if (Has(f, "llama 4") || Has(f, "llama4") || Has(f, "llama-4")) return 1;
  return std::nullopt;
}

// DeepSeek-V3's published config (deepseek-ai/DeepSeek-V3 config.json, the deepseek-v3-like
// preset): multi-head latent attention and the first 3 layers dense; the row format has no fields
// for either.
void MapDeepSeekV3(const std::string& f, Run& run) {
  spec::ModelSpec& m = run.model;
  if (!(Has(f, "deepseek-v3") || Has(f, "deepseek v3")) || m.hidden != 7168) return;
  m.mla = {1536, 512, 128, 64, 128};
  m.kv_heads = m.heads;
  m.moe.first_dense_layers = 3;
  run.assumptions.push_back(
      "DeepSeek-V3's published config: MLA (q_lora 1536, kv_lora 512, qk 128+64, v 128), the "
      "first 3 layers dense");
}

// Llama 4 Maverick's published config (meta-llama/Llama-4-Maverick-17B-128E config.json,
// interleave_moe_layer_step 2): every other layer is MoE, from the second (Megatron's
// --moe-layer-freq ([0,1]*24)); the dense layers' FFN is ffn_hidden_size (intermediate_size_mlp
// 16,384), the experts' moe_ffn_hidden_size (8,192). The row format has no field for the pattern.
// Scout (16 experts) is MoE in every layer.
void MapLlama4Maverick(const std::string& f, Run& run) {
  spec::ModelSpec& m = run.model;
  const bool llama4 = Has(f, "llama 4") || Has(f, "llama4") || Has(f, "llama-4");
  if (!llama4 || !Has(f, "maverick") || m.moe.experts != 128 || m.layers % 2 != 0) return;
  m.moe.first_dense_layers = 1;
  m.moe.moe_layer_freq = 2;
  run.assumptions.push_back(fmt::format(
      "Llama 4 Maverick's published config: interleave_moe_layer_step 2, {} of the {} layers MoE "
      "(every other, from the second), the others dense with ffn_hidden_size",
      m.layers / 2, m.layers));
}

void MapModel(RowReader& r, Run& run) {
  spec::ModelSpec& m = run.model;
  const std::string family = r.Text("model", "family");
  m.name = r.Text("model", "name");
  if (m.name.empty()) m.name = run.id;
  const auto layers = r.Count("model", "num_layers");
  const auto hidden = r.Count("model", "hidden_size");
  const auto heads = r.Count("model", "num_attention_heads");
  const auto seq = r.Count("model", "seq_length");
  if (!layers || !hidden || !heads || !seq) {
    run.unusable = "the model's num_layers, hidden_size, num_attention_heads or seq_length is null";
    return;
  }
  m.layers = *layers;
  m.hidden = *hidden;
  m.heads = *heads;
  m.max_seq_len = *seq;
  m.kv_heads = r.Count("model", "num_kv_heads").value_or(m.heads);
  m.head_dim = r.Count("model", "head_dim").value_or(m.hidden / m.heads);
  const std::string f = Lower(family + " " + m.name);
  const auto experts = r.Whole("model", "num_experts");
  const bool moe =
      (experts && *experts > 1) || (!experts && Lower(r.Text("model", "arch")) == "moe");
  const std::string act = Lower(r.Text("model", "activation"));
  // Two FFN GEMMs (GELU, squared ReLU) or three (SwiGLU, GEGLU: gated; "silu" in a Hugging Face
  // config is Llama's gated SiLU).
  if (act.empty()) {
    auto [a, why] = ActivationOfFamily(f, moe);
    m.activation = a;
    run.assumptions.push_back(why);
  } else {
    m.activation = Has(act, "glu") || Has(act, "silu") || Has(act, "swish")
                       ? spec::Activation::kSwiGLU
                       : spec::Activation::kGeLU;
  }
  if (auto ffn = r.Count("model", "ffn_hidden_size")) {
    m.ffn_hidden = *ffn;
  } else {
    m.ffn_hidden = 4 * m.hidden;
    run.assumptions.push_back("ffn_hidden_size not published: 4 x hidden (GPT default)");
  }
  if (auto v = r.Count("model", "vocab_size")) {
    m.vocab = *v;
  } else if (auto fv = VocabOfFamily(f)) {
    m.vocab = fv->vocab;
    run.assumptions.push_back(
        fmt::format("vocab_size not published: {} ({} tokenizer)", fv->vocab, fv->tokenizer));
  } else {
    run.unusable = "model.vocab_size is null and the family's tokenizer is not known";
    return;
  }
  if (experts && *experts > 1) {
    m.moe.experts = *experts;
    if (auto k = r.Count("model", "top_k")) {
      m.moe.top_k = *k;
    } else {
      m.moe.top_k = TopKOfFamily(f).value_or(2);
      run.assumptions.push_back(fmt::format("top_k not published: {} ({})", m.moe.top_k,
                                            TopKOfFamily(f) ? "the family's config" : "Mixtral's"));
    }
    if (auto e = r.Count("model", "moe_ffn_hidden_size")) {
      m.moe.expert_ffn_hidden = *e;
    } else {
      m.moe.expert_ffn_hidden = m.ffn_hidden;
      run.assumptions.push_back("moe_ffn_hidden_size not published: ffn_hidden_size");
    }
    m.moe.shared_experts = r.Whole("model", "shared_experts").value_or(0);  // 0 = none
    m.moe.capacity_factor = 0;  // dropless (Megatron-Core's default; Bridge force-balances)
    MapDeepSeekV3(f, run);
    MapLlama4Maverick(f, run);
  } else if (moe) {
    run.unusable = "model.arch is moe but num_experts is not published";
    return;
  }
  // GPT-style models (Megatron GPT, MPT) tie the LM head to the embedding.
  m.tied_embeddings = Has(Lower(family), "gpt") || Has(Lower(family), "mpt");
}

// ZeRO stage from the source's words for its data-parallel sharding. Words that switch FSDP off
// ("FSDP=0", "fsdp: false", "FSDP off", "no FSDP", "without FSDP") are removed first, so "DDP +
// distributed optimizer (FSDP=0)" is ZeRO-1. Then, first match wins: PyTorch FSDP's and
// Megatron-FSDP's strategy names, an explicit ZeRO stage, FSDP's other words, the distributed
// optimizer, DDP.
int ZeroStage(const std::string& sharding_words, const std::string& stack, Run& run) {
  static const std::regex kFsdpOff(
      R"((fsdp2?|full_shard|zero-?3)\s*[=:]?\s*(0|false|off|none|disabled|not used)\b|\b(no|without|not)\s+fsdp2?\b)");
  static const std::regex kZeroStage(R"(zero[\s_-]*(stage)?[\s_=:-]*([0-3])\b)");
  const std::string s = std::regex_replace(Lower(sharding_words), kFsdpOff, " ");
  if (Has(s, "no_shard")) return 0;
  if (Has(s, "shard_grad_op") || Has(s, "hybrid_shard_zero2") || Has(s, "optim_grads_params")) {
    return Has(s, "optim_grads_params") ? 3 : 2;
  }
  if (Has(s, "full_shard") || Has(s, "hybrid_shard")) return 3;
  if (Has(s, "optim_grads")) return 2;  // Megatron-FSDP's sharding strategies
  if (std::smatch z; std::regex_search(s, z, kZeroStage)) return z[2].str()[0] - '0';
  if (Has(s, "not resharded after forward")) return 2;
  if (Has(s, "fsdp") || Has(s, "fully sharded") || Has(s, "hsdp")) return 3;
  if (Has(s, "distributed optimizer") || Has(s, "distributed_fused_adam") ||
      Has(s, "distributed-optimizer") || Has(s, "dist_optim") || Has(s, "dist opt") ||
      HasWord(s, "optim")) {
    return 1;
  }
  if (Lower(sharding_words).empty()) {
    // Megatron-Core / NeMo recipes of 2023 on use the distributed optimizer; torchtitan FSDP2.
    const int z = stack == "megatron" ? 1 : stack == "torchtitan" ? 3 : 0;
    run.assumptions.push_back(
        fmt::format("data_parallel_sharding not published: ZeRO-{} ({} default)", z, stack));
    return z;
  }
  if (!Has(s, "ddp") && !Has(s, "none") && !Has(s, "data parallel") && !Has(s, "no shard")) {
    run.assumptions.push_back(fmt::format(
        "data_parallel_sharding '{}' names no sharding stage: ZeRO-0 (DDP)", sharding_words));
  }
  return 0;  // DDP, "none"
}

// Recomputation from `activation_recompute`, else from `recompute_detail` (Megatron's flags or
// the source's sentence). Module lists (--recompute-modules core_attn / moe_act / mla_up_proj
// ..., torchtitan's per-op SAC) are selective; a yes without a kind is full.
spec::Recompute RecomputeFrom(const std::string& words, const std::string& detail, Run& run) {
  const std::string w = Lower(words), d = Lower(detail);
  auto kind = [](const std::string& s) -> std::optional<spec::Recompute> {
    if (Has(s, "without activation checkpointing") || Has(s, "without recompute") ||
        Has(s, "no recompute")) {
      return spec::Recompute::kNone;
    }
    if (Has(s, "full") || Has(s, "uniform") || Has(s, "block")) return spec::Recompute::kFull;
    if (Has(s, "selective") || Has(s, "sac") || HasWord(s, "op") || Has(s, "per-op") ||
        Has(s, "recompute-modules") || Has(s, "recompute_modules") || Has(s, "core_attn") ||
        Has(s, "moe_act") || Has(s, "partial")) {
      return spec::Recompute::kSelective;
    }
    if (HasWord(s, "none") || HasWord(s, "no") || HasWord(s, "false") || HasWord(s, "off") ||
        HasWord(s, "disabled")) {
      return spec::Recompute::kNone;
    }
    return std::nullopt;
  };
  if (auto k = kind(w)) {
    // Megatron's block method recomputes only --recompute-num-layers layers of each stage; the
    // cost model recomputes every layer or none.
    if (*k == spec::Recompute::kFull && Has(d, "block")) {
      run.assumptions.push_back(fmt::format(
          "recompute_detail '{}': block recomputation of some layers, costed as full on all",
          detail));
    }
    return *k;
  }
  if (w.empty()) {
    if (auto k = kind(d)) {
      run.assumptions.push_back(
          fmt::format("activation_recompute not published: {} (recompute_detail '{}')",
                      spec::ToString(*k), detail));
      return *k;
    }
    if (!d.empty()) {
      run.assumptions.push_back(fmt::format(
          "activation_recompute not published and recompute_detail '{}' names no kind: full",
          detail));
      return spec::Recompute::kFull;
    }
    run.assumptions.push_back("activation_recompute not published: none");
    return spec::Recompute::kNone;
  }
  // "yes", "true", "activation checkpointing": recomputation of an unnamed kind.
  const auto from_detail = kind(d);
  const spec::Recompute k = from_detail.value_or(spec::Recompute::kFull);
  run.assumptions.push_back(fmt::format("activation_recompute '{}' names no kind: {}{}", words,
                                        spec::ToString(k),
                                        from_detail ? " (from recompute_detail)" : ""));
  return k;
}

// The modules a Megatron module list names (--recompute-modules / recompute_modules core_attn,
// layernorm, moe_act, mla_up_proj, mlp), read only where the words name such a list; 0 (core
// attention alone, Megatron's default) otherwise.
uint32_t RecomputeModulesFrom(const std::string& words, Run& run) {
  const std::string w = Lower(words);
  if (!Has(w, "recompute_modules") && !Has(w, "recompute-modules") && !Has(w, "core_attn") &&
      !Has(w, "moe_act") && !Has(w, "mla_up_proj")) {
    return 0;
  }
  uint32_t modules = 0;
  for (uint32_t bit = spec::kRecomputeCoreAttn; bit <= spec::kRecomputeMlp; bit <<= 1) {
    if (HasWord(w, spec::RecomputeModulesText(bit))) modules |= bit;
  }
  if (modules == spec::kRecomputeCoreAttn) return 0;
  if (modules != 0) {
    run.assumptions.push_back(fmt::format("recompute modules {} (core attention {})",
                                          spec::RecomputeModulesText(modules),
                                          (modules & spec::kRecomputeCoreAttn) != 0
                                              ? "among them"
                                              : "not recomputed: the list replaces the default"));
  }
  return modules;
}

// Expert tensor parallelism: `etp` as published (equal to tp: the default, experts split like the
// dense FFN). Unpublished, with EP folded and ep not dividing dp*cp but dividing dp*cp*tp, the
// source can only have run whole experts with EP spanning the tp ranks (etp 1: Megatron's MoE
// parallel folding).
void MapExpertTp(RowReader& r, Run& run) {
  spec::Layout& l = run.layout;
  if (auto e = r.Count("parallelism", "etp")) {
    l.etp = *e == l.tp ? 0 : *e;
    return;
  }
  if (!run.model.is_moe() || l.ep_placement != spec::EpPlacement::kFolded || l.ep <= 1) return;
  const auto dpcp = CheckedMul(l.dp, l.cp), all = CheckedMul(l.dp * l.cp, l.tp);
  if (!dpcp || !all || *dpcp % l.ep == 0 || l.tp == 1 || *all % l.ep != 0) return;
  l.etp = 1;
  run.assumptions.push_back(fmt::format(
      "etp not published: 1 (ep {} does not divide dp*cp = {} but divides dp*cp*tp = {}: whole "
      "experts, EP spanning the tp ranks; Megatron's MoE parallel folding)",
      l.ep, *dpcp, *all));
}

void MapLayout(RowReader& r, Run& run) {
  spec::Layout& l = run.layout;
  const int64_t gpus = run.cluster.gpus();
  l.tp = r.Count("parallelism", "tp").value_or(1);
  l.pp = r.Count("parallelism", "pp").value_or(1);
  l.cp = r.Count("parallelism", "cp").value_or(1);
  l.ep = r.Count("parallelism", "ep").value_or(1);
  const std::string notes = Lower(r.Text("parallelism", "notes"));
  // dgxc's Grok tables count EP as its own factor (GPUs = TP PP CP EP DP); everywhere else EP
  // is folded into the data-parallel ranks (Megatron-Core).
  l.ep_placement =
      Has(notes, "not folded") ? spec::EpPlacement::kSeparate : spec::EpPlacement::kFolded;
  // Degrees past the GPU limit make no layout (and would overflow the products below).
  const auto product =
      CheckedProduct({l.tp, l.pp, l.cp, l.ep_placement == spec::EpPlacement::kSeparate ? l.ep : 1});
  if (!product || *product > spec::kMaxGpus) {
    run.unusable = "the parallel degrees multiply past the GPU limit";
    return;
  }
  const int64_t other = *product;
  if (auto dp = r.Count("parallelism", "dp")) {
    l.dp = *dp;
  } else if (auto dpd = r.Count("parallelism", "dp_derived")) {
    l.dp = *dpd;
  } else {
    l.dp = std::max<int64_t>(1, gpus / other);
    run.assumptions.push_back("dp not published: GPUs / (tp pp cp)");
  }
  // The schedule: a published V > 1 is interleaved; else the words of pipeline_schedule read by the
  // layout's own schedule words ("interleaved 1F1B" and "1F1B, interleaved" are interleaved, else
  // the first word that names a schedule: "1F1B with ...", "gpipe", "zb").
  const std::string schedule_text = Lower(r.Text("parallelism", "pipeline_schedule"));
  std::optional<spec::Schedule> named;
  for (size_t at = 0; at < schedule_text.size();) {
    const size_t end = schedule_text.find_first_of(" ,;()/\t", at);
    const std::string word = schedule_text.substr(at, end - at);
    at = end == std::string::npos ? end : end + 1;
    const auto kind = spec::ParseFieldWord(spec::LayoutField::kSchedule, word);
    if (!kind.ok()) continue;
    if (!named || static_cast<spec::Schedule>(*kind) == spec::Schedule::kInterleaved) {
      named = static_cast<spec::Schedule>(*kind);
    }
  }
  if (!named && Has(schedule_text, "interleaved")) named = spec::Schedule::kInterleaved;
  if (auto v = r.Count("parallelism", "vpp"); v && *v > 1 && l.pp > 1) {
    l.schedule = spec::Schedule::kInterleaved;
    l.virtual_stages = *v;
  } else if (l.pp > 1 && named) {
    l.schedule = *named;
    if (l.schedule == spec::Schedule::kInterleaved && !v) {
      l.virtual_stages = 4;
      run.assumptions.push_back("interleaved schedule without a published V: V = 4");
    } else if (l.schedule == spec::Schedule::kInterleaved) {
      l.schedule = spec::Schedule::kOneFOneB;  // V = 1 published: plain 1F1B
    }
  } else if (l.pp > 1 && !schedule_text.empty()) {
    run.assumptions.push_back(
        fmt::format("pipeline_schedule '{}' names no known schedule: read as 1F1B", schedule_text));
  }
  const auto sp = r.Bool("parallelism", "sequence_parallel");
  l.sp = sp.value_or(l.tp > 1 && run.stack != "maxtext");
  if (!sp && l.tp > 1) run.assumptions.push_back("sequence_parallel not published: on with tp > 1");
  if (!l.sp && l.tp == 1) l.sp = false;
  l.recompute = RecomputeFrom(r.Text("parallelism", "activation_recompute"),
                              r.Text("parallelism", "recompute_detail"), run);
  if (l.recompute == spec::Recompute::kSelective) {
    l.recompute_modules = RecomputeModulesFrom(r.Text("parallelism", "activation_recompute") + " " +
                                                   r.Text("parallelism", "recompute_detail"),
                                               run);
  }
  if (auto mbs = r.Count("parallelism", "micro_batch_size")) {
    l.mbs = *mbs;
  } else if (run.stack == "torchtitan" && l.pp > 1) {
    // torchtitan splits each DP rank's local batch into as many micro-batches as pp stages.
    int64_t local = 1;
    if (const auto at = notes.find("local batch size "); at != std::string::npos) {
      local = std::max<int64_t>(1, LeadingCount(notes.c_str() + at + 17));
    } else if (auto g = r.Count("parallelism", "global_batch_size")) {
      local = std::max<int64_t>(1, *g / l.dp);
    }
    l.mbs = std::max<int64_t>(1, local / l.pp);
    run.assumptions.push_back(fmt::format(
        "micro_batch_size not published: local batch {} / pp {} micro-batches (torchtitan's "
        "default)",
        local, l.pp));
  } else {
    l.mbs = 1;
    run.assumptions.push_back("micro_batch_size not published: 1");
  }
  l.zero = ZeroStage(r.Text("parallelism", "data_parallel_sharding"), run.stack, run);
  // Gradients accumulated over the micro-batches before they are reduce-scattered (the Llama 3
  // paper, section 3.3.4: accumulated in FP32 during backward over multiple micro-batches, then
  // reduce-scattered in FP32) move and hold what ZeRO-1 does: one reduce-scatter a step and an
  // unsharded accumulator, not ZeRO-2's reduce-scatter after every micro-batch.
  if (l.zero == 2 && Has(Lower(r.Text("parallelism", "precision")), "grad accumulation")) {
    l.zero = 1;
    run.assumptions.push_back(
        "gradients accumulated over micro-batches before the reduce-scatter (precision words): "
        "ZeRO-1's traffic and accumulator, not ZeRO-2's per-micro-batch reduce-scatter");
  }
  MapExpertTp(r, run);
  const auto layout_gpus = CheckedMul(l.dp, other);
  if (!layout_gpus || *layout_gpus != gpus) {
    run.unusable =
        fmt::format("degrees dp{} tp{} pp{} cp{} ep{} ({}) do not occupy the {} GPUs published",
                    l.dp, l.tp, l.pp, l.cp, l.ep, spec::ToString(l.ep_placement), gpus);
  }
}

// Global batch in sequences: published, or from the published token count, or one micro-batch
// per data rank (x pp micro-batches with a pipeline) when the source gives only a local batch.
void MapTrain(RowReader& r, Run& run) {
  spec::TrainSpec& t = run.train;
  t.name = run.id;
  t.seq_len = run.model.max_seq_len;
  const std::string precision = Lower(r.Text("parallelism", "precision"));
  run.facts.fp8 = Has(precision, "fp8") || Has(precision, "float8");
  // FP4 training (NVFP4, MXFP4 recipes) is costed as FP8, said so: FP4 GEMMs in training (which
  // layers and passes run in FP4) are not modelled and have no calibrated speedup.
  if (!run.facts.fp8 && (Has(precision, "fp4") || Has(precision, "float4"))) {
    run.facts.fp8 = true;
    run.assumptions.push_back(fmt::format(
        "precision '{}': FP4 training costed as FP8 (FP4 training GEMMs are not modelled)",
        precision));
  } else if (!run.facts.fp8 && Has(precision, "tf32") && !Has(precision, "bf16") &&
             !Has(precision, "fp16")) {
    run.assumptions.push_back(fmt::format(
        "precision '{}': costed as BF16 (the model has no TF32 training rate)", precision));
  }
  run.facts.fp8_rowwise = run.facts.fp8 && Has(precision, "rowwise");
  t.precision = run.facts.fp8 ? spec::Precision::kFp8 : spec::Precision::kBf16;
  run.facts.fp32_grads = Has(precision, "fp32 reduce") || Has(precision, "fp32 grad");
  int64_t seqs = 0;
  // The token count and the accumulation steps are read only when the batch in sequences is not
  // published (sources write them in words there: "16M").
  const auto g = r.Count("parallelism", "global_batch_size");
  std::optional<double> tok;
  if (!g) tok = r.Positive("parallelism", "global_batch_tokens");
  if (!g && !tok) tok = r.Positive("parallelism", "global_batch_tokens_derived");
  const auto accum = g || tok ? std::nullopt : r.Count("parallelism", "grad_accum_steps");
  if (g) {
    seqs = *g;
  } else if (tok) {
    const double n = std::round(*tok / static_cast<double>(t.seq_len));
    if (!(n >= 1 && n <= static_cast<double>(spec::kMaxField))) {
      run.unusable = "parallelism.global_batch_tokens is not a whole number of sequences";
      return;
    }
    seqs = static_cast<int64_t>(n);
  } else if (accum) {
    seqs = CheckedMul(run.layout.data_ranks() * run.layout.mbs, *accum)
               .value_or(spec::kMaxBatchTokens + 1);
    run.assumptions.push_back(fmt::format(
        "global_batch_size not published: data ranks x micro-batch x grad_accum_steps = {}", seqs));
  } else {
    const std::string notes = Lower(r.Text("parallelism", "notes"));
    int64_t local = run.layout.mbs * (run.stack == "torchtitan" ? run.layout.pp : 1);
    if (const auto at = notes.find("local batch size "); at != std::string::npos) {
      local = std::max<int64_t>(1, LeadingCount(notes.c_str() + at + 17));
    }
    seqs = CheckedMul(run.layout.data_ranks(), local).value_or(spec::kMaxBatchTokens + 1);
    run.assumptions.push_back(
        fmt::format("global_batch_size not published: data ranks x local batch = {}", seqs));
  }
  const auto tokens = CheckedMul(seqs, t.seq_len);
  if (!tokens || *tokens > spec::kMaxBatchTokens) {
    run.unusable = fmt::format("a global batch of {} sequences of {} tokens is past the limit",
                               seqs, t.seq_len);
    return;
  }
  t.global_batch_tokens = *tokens;
  t.total_tokens = 1e12;
}

// What the row says of its stack's policies. run.facts starts as the stack's profile defaults
// (MapRow: calib/profile.cc Stacks(), the one place a stack's policies are written); this changes
// only what the row itself tells.
void MapFacts(RowReader& r, Run& run) {
  const std::string date = r.Text("source", "date");
  const std::string notes = Lower(r.Text("parallelism", "notes") + " " + r.Text("source", "notes"));
  const std::string sharding = Lower(r.Text("parallelism", "data_parallel_sharding"));
  RunFacts& f = run.facts;
  if (run.stack == "megatron" && !date.empty() && date < "2023") {
    // Megatron-LM 2021-22: before FlashAttention, GPT-3-era dropout, fp32 main grads.
    f.flash_attention = false;
    f.dropout = true;
    f.fp32_grads = true;
  }
  f.grad_overlap = !Has(sharding, "ddp-impl=local");
  // NeMo's performance recipes (dgxc, NeMo's published tables) run Transformer Engine's TP
  // communication overlap whenever sequence parallelism is on, and so do Megatron-Bridge's Llama 3
  // recipes (recipes/llama/llama3.py, v0.2.0 to v0.4.0: CommOverlapConfig(tp_comm_overlap=True)
  // for 70B and 405B; its performance scripts add the userbuffers configs). Bridge's Qwen3 H100,
  // DeepSeek and GPT-OSS recipes leave it off. Other rows only when they say so (the stack's
  // default is the planner's, for a new run).
  const bool bridge_llama = Has(Lower(run.software), "megatron-bridge") &&
                            Has(Lower(r.Text("model", "family") + " " + run.model.name), "llama");
  const bool nemo_recipe = run.group == "dgxc_v24.11.1" || run.group == "nemo_24.07" ||
                           Has(notes, "nemo framework performance") || bridge_llama;
  const bool says_overlap = Has(notes, "tp-comm-overlap") || Has(notes, "async tp") ||
                            Has(notes, "asynctp") ||
                            (Lower(run.id).size() > 8 && Lower(run.id).ends_with("-asynctp"));
  const bool recipe_overlap = nemo_recipe && run.layout.sp && run.layout.tp > 1;
  f.tp_comm_overlap = says_overlap || recipe_overlap;
  if (Has(notes, "vanillatp")) f.tp_comm_overlap = false;
  if (f.tp_comm_overlap && recipe_overlap && !says_overlap) {
    run.assumptions.push_back(
        bridge_llama ? "TP communication overlap: Megatron-Bridge's Llama 3 recipe runs it "
                       "(tp_comm_overlap=True with sequence parallelism), not a row field"
                     : "TP communication overlap: NeMo's performance recipe runs it with sequence "
                       "parallelism, not a row field");
  }
  // torchtitan compiles only when its job config says so (compile.enable is off by default): its
  // rows are compiled when they say so; the planner's torchtitan profile assumes a compiled run.
  const bool says_compiled = Has(notes, "torch.compile") || Has(Lower(run.id), "torch.compile");
  f.compiled = says_compiled || (f.compiled && run.stack != "torchtitan");
  // torchtitan's loss is PyTorch's cross_entropy on the fp32-cast logits, compiled with the model
  // only from 2025 (its compile components gained "loss").
  f.unfused_cross_entropy = f.unfused_cross_entropy && !(f.compiled && date >= "2025");
  if (const auto at = sharding.find("group size "); at != std::string::npos) {
    const int64_t g = LeadingCount(sharding.c_str() + at + 11);
    if (g > 0 && g < run.layout.dp) f.fsdp_shard_group = g;
  }
}

// Tokens per model FLOP-convention: the published TFLOP/s per GPU converted with the source's own
// formula (docs/COST_MODEL.md lists them).
double SourceFlopsPerToken(const Run& run) {
  const spec::ModelSpec& m = run.model;
  const double L = static_cast<double>(m.layers), h = static_cast<double>(m.hidden);
  const double s = static_cast<double>(run.train.seq_len), V = static_cast<double>(m.vocab);
  if (run.group == "megatron2021_table1") {  // Narayanan et al. 2021, Eq. 3 (with recompute)
    return 96.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
  }
  // Megatron-Core num_floating_point_operations, and PaLM's 6N + 12 L h s (Llama 3): both count
  // every matmul parameter and the full attention square.
  const double q = static_cast<double>(m.heads * m.head_dim);
  const double g_over_a = static_cast<double>(m.kv_heads) / static_cast<double>(m.heads);
  const double ffn = static_cast<double>(m.is_moe() ? m.moe.expert_ffn_hidden : m.ffn_hidden) *
                     static_cast<double>(m.is_moe() ? m.moe.top_k : 1) *
                     (m.activation == spec::Activation::kSwiGLU ? 1.5 : 1.0);
  return 12.0 * L * h * h * ((1.0 + g_over_a + s / h) * q / h + ffn / h + V / (2.0 * L * h));
}

void MapMeasured(RowReader& r, Run& run) {
  const double gpus = static_cast<double>(run.cluster.gpus());
  run.memory_gib = r.Positive("measured", "memory_gib_per_gpu");
  if (auto tps = r.Positive("measured", "tokens_per_sec_per_gpu")) {
    run.tokens_per_s_gpu = *tps;
    run.measured_from = "tokens_per_sec_per_gpu";
  } else if (auto tot = r.Positive("measured", "tokens_per_sec_total")) {
    run.tokens_per_s_gpu = *tot / gpus;
    run.measured_from = "tokens_per_sec_total / GPUs";
  } else if (auto step = r.Positive("measured", "step_time_s")) {
    run.tokens_per_s_gpu = static_cast<double>(run.train.global_batch_tokens) / *step / gpus;
    run.measured_from = "global batch tokens / step_time_s / GPUs";
  } else if (auto tf = r.Positive("measured", "tflops_per_gpu")) {
    run.tokens_per_s_gpu = *tf * 1e12 / SourceFlopsPerToken(run);
    run.measured_from = run.group == "megatron2021_table1"
                            ? "tflops_per_gpu / Eq. 3 FLOPs per token (with recompute)"
                            : "tflops_per_gpu / the source's model FLOPs per token";
  } else if (run.usable()) {
    run.unusable = "no throughput published (tokens/s, step time or TFLOP/s)";
  }
}

void MapCluster(RowReader& r, Run& run) {
  const std::string model = r.Text("hardware", "gpu_model");
  const std::string type = r.Text("hardware", "gpu_type");
  run.sku = SkuForGpu(model, type);
  const auto gpus = r.Count("hardware", "num_gpus");
  if (!gpus) {
    r.Fail("hardware", "num_gpus", "is required");
    return;
  }
  if (run.sku.empty()) {
    const SkuGuess guess =
        GuessSku(model, type, r.Positive("hardware", "gpu_memory_gb").value_or(0));
    run.sku = guess.sku;
    if (!guess.sku.empty()) run.assumptions.push_back(guess.assumption);
  }
  if (run.sku.empty()) {
    run.unusable = fmt::format("GPU '{} / {}' has no cluster preset", model, type);
    return;
  }
  auto cluster = spec::LoadCluster(run.sku);
  if (!cluster.ok()) {
    run.unusable = cluster.status().message();
    return;
  }
  run.cluster = *cluster;
  if (auto gpn = r.Count("hardware", "gpus_per_node")) run.cluster.gpus_per_node = *gpn;
  const core::Status st = spec::SetGpuCount(run.cluster, *gpus);
  if (!st.ok()) run.unusable = st.message();
}

// Megatron splits layers unevenly when they do not fill the pp x vpp chunks
// (--decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-pipeline-split:
// DeepSeek-V3's 61 layers on pp 16, a 94-layer model on pp 32 x vpp 3). spec::ChunkLayers takes
// at most two layers off the first and last chunks; a row needing more is costed with its layers
// rounded up to the nearest split it takes (ceil(layers / chunks) a chunk, the first and last one
// less), at most one layer a pipeline rank more: the slowest stage, which sets the step, then
// holds what Megatron's heaviest stage holds.
void MapUnevenStages(Run& run) {
  const spec::Layout& l = run.layout;
  const int64_t chunks = l.pp * l.virtual_stages, layers = run.model.layers;
  if (chunks <= 1 || spec::ChunkLayers(layers, chunks, 0) >= 0) return;
  const int64_t n = (layers + chunks - 1) / chunks;
  const int64_t costed = n >= 2 ? chunks * n - 2 : chunks;
  if (costed < layers || costed - layers > l.pp || spec::ChunkLayers(costed, chunks, 0) < 0) return;
  run.model.layers = costed;
  run.assumptions.push_back(fmt::format(
      "{} layers on pp {} x vpp {} = {} chunks: Megatron's uneven first/last stages, costed as {} "
      "layers ({} a chunk on the heaviest stage)",
      layers, l.pp, l.virtual_stages, chunks, costed, n));
}

// The MoE token dispatcher and routing the row names (fields or notes). DeepEP / HybridEP (the
// flex dispatcher) send a token once to each remote node holding one of its experts
// (RunFacts::ep_dispatch_per_node); every other kind is costed as an all-to-all of every routed
// copy (cost::Terms ep). Routing is as balanced as cost::CostParams::moe_imbalance says (1 = the
// force-balanced benchmarks); the words are read so the row says what was assumed.
void MapDispatcher(RowReader& r, Run& run) {
  if (!run.model.is_moe()) return;
  const std::string words =
      Lower(r.Text("parallelism", "moe_token_dispatcher_type") + " " +
            r.Text("parallelism", "token_dispatcher") + " " + r.Text("parallelism", "notes") + " " +
            r.Text("model", "notes") + " " + r.Text("source", "notes"));
  std::string kind = "not published";
  static constexpr const char* kFlex = "DeepEP / HybridEP (flex)";
  if (Has(words, "deepep") || Has(words, "hybridep") || Has(words, "flex")) {
    kind = kFlex;
  } else if (Has(words, "allgather") || Has(words, "all-gather dispatcher")) {
    kind = "all-gather";
  } else if (Has(words, "alltoall") || Has(words, "all-to-all") || Has(words, "a2a")) {
    kind = "all-to-all";
  }
  run.facts.ep_dispatch_per_node = kind == kFlex;
  run.assumptions.push_back(
      run.facts.ep_dispatch_per_node
          ? fmt::format("token dispatcher {}: a token sent once to each remote node holding one of "
                        "its experts, then over NVLink",
                        kind)
          : fmt::format("token dispatcher {}: costed as an all-to-all dispatch and combine over ep",
                        kind));
  // Megatron-Core's EP overlap (--overlap-moe-expert-parallel-comm, Bridge's moe_a2a_overlap):
  // the row or its recipe names it (RunFacts::ep_a2a_overlap), else the stack's default.
  const bool overlap_off = Has(words, "moe_a2a_overlap=false") || Has(words, "no ep overlap");
  const bool overlap_on =
      !overlap_off && (Has(words, "moe_a2a_overlap") || Has(words, "overlap_moe_expert_parallel") ||
                       Has(words, "overlap-moe-expert-parallel"));
  if (overlap_on || overlap_off) run.facts.ep_a2a_overlap = overlap_on;
  if (run.layout.ep > 1) {
    run.assumptions.push_back(
        run.facts.ep_a2a_overlap
            ? std::string("EP all-to-all overlap (overlap_moe_expert_parallel_comm) ") +
                  (overlap_on ? "named by the row" : "the stack's default") +
                  ": the stack's fitted ep_overlap share of the all-to-alls hidden"
            : std::string("EP all-to-all not overlapped (") +
                  (overlap_off ? "the row says moe_a2a_overlap=False"
                               : "the row names no overlap_moe_expert_parallel_comm") +
                  "): the all-to-alls charged in full");
  }
  const bool forced = Has(words, "force-balanc") || Has(words, "force balanc") ||
                      Has(words, "force_load_balancing") || Has(words, "forced balanc");
  run.assumptions.push_back(forced ? "routing force-balanced: tokens spread evenly (imbalance 1)"
                                   : "routing: costed as balanced over the experts (imbalance 1)");
}

Run MapRow(const json& row, const std::string& id, std::string& error) {
  RowReader r(row, id);
  Run run;
  run.id = id;
  run.group = r.Text("source", "group");
  run.software = r.Text("source", "software");
  run.stack = StackForSoftware(run.software, run.group);
  if (const StackInfo* info = FindStack(run.stack)) {
    run.facts = info->defaults;  // the Map* steps change what the row says
  } else {
    run.unusable = fmt::format("software '{}' has no stack profile", run.software);
  }
  MapCluster(r, run);
  if (run.usable()) MapModel(r, run);
  if (run.usable()) MapLayout(r, run);
  if (run.usable()) MapDispatcher(r, run);
  if (run.usable()) MapTrain(r, run);
  if (run.usable()) MapFacts(r, run);
  if (run.usable()) MapMeasured(r, run);
  if (run.usable())
    MapUnevenStages(run);  // after MapMeasured: TFLOP/s convert with the true layers
  if (run.usable()) {
    const auto v = spec::Validate(run.model, run.cluster, run.train, run.layout);
    if (!v.empty()) run.unusable = v.front();
  }
  error = r.error;
  return run;
}

}  // namespace

std::string SkuForGpu(const std::string& gpu_model, const std::string& gpu_type) {
  const std::string s = Lower(gpu_model + " " + gpu_type);
  if (Has(s, "a100")) return Has(s, "40gb") || Has(s, "40 gb") ? "a100-40gb" : "a100-80gb";
  if (Has(s, "h200")) return "h200";
  if (Has(s, "h800")) return "h800";
  if (Has(s, "h100")) return Has(s, "hbm2e") ? "h100-hbm2e" : "h100-sxm";
  if (Has(s, "gb200")) return "gb200-nvl72";
  if (Has(s, "b200")) return "b200";
  if (Has(s, "mi300x")) return "mi300x";
  return "";
}

SkuGuess GuessSku(const std::string& gpu_model, const std::string& gpu_type, double memory_gb) {
  const std::string s = Lower(gpu_model + " " + gpu_type);
  const std::string words = gpu_model + (gpu_type.empty() ? "" : " / " + gpu_type);
  if (Has(s, "a800")) {
    return {"a100-80gb",
            fmt::format("GPU '{}': estimated as an A100 80GB (the A800 is an A100 with NVLink cut "
                        "to 400 GB/s; the preset keeps 600)",
                        words)};
  }
  if (Has(s, "gh200")) {
    return {"h200",
            fmt::format("GPU '{}': estimated as an H200 (GH200's Hopper die and HBM3e)", words)};
  }
  if (Has(s, "ampere")) {
    const bool small = memory_gb > 0 && memory_gb <= 48;
    return {small ? "a100-40gb" : "a100-80gb",
            fmt::format("GPU '{}' names no SKU: estimated as an A100 {} SXM (the Ampere training "
                        "GPU{})",
                        words, small ? "40GB" : "80GB",
                        memory_gb > 0 ? fmt::format(", {} GB published", memory_gb) : "")};
  }
  if (Has(s, "hopper")) {
    return {"h100-sxm", fmt::format("GPU '{}' names no SKU: estimated as an H100 SXM 80GB", words)};
  }
  if (Has(s, "blackwell")) {
    return {"b200", fmt::format("GPU '{}' names no SKU: estimated as a B200", words)};
  }
  return {};
}

std::string StackForSoftware(const std::string& software, const std::string& group) {
  const std::string s = Lower(software + " " + group);
  if (Has(s, "llm-foundry") || Has(s, "composer")) return "llm-foundry";
  if (Has(s, "torchtitan")) return "torchtitan";
  if (Has(s, "maxtext")) return "maxtext";
  if (Has(s, "deepspeed")) return "deepspeed";
  // Megatron-LM, Megatron-Core, NeMo (built on Megatron-Core), and Meta's Llama 3 stack (4D
  // parallelism in Megatron's style: TP/SP, interleaved PP, CP, ZeRO-sharded DP).
  if (Has(s, "megatron") || Has(s, "nemo") || Has(s, "llama3_paper") || Has(s, "meta internal")) {
    return "megatron";
  }
  // Stacks without a profile of their own, by kind: JAX/XLA compiled (Pax, Praxis, Levanter, T5X)
  // as MaxText; eager PyTorch FSDP (Hugging Face Accelerate, PyTorch FSDP) as llm-foundry; eager
  // PyTorch with ZeRO-style sharding (Colossal-AI, Nanotron) as DeepSpeed.
  if (Has(s, "pax") || Has(s, "praxis") || Has(s, "levanter") || Has(s, "t5x") || Has(s, "jax")) {
    return "maxtext";
  }
  if (Has(s, "accelerate") || Has(s, "fsdp")) return "llm-foundry";
  if (Has(s, "colossal") || Has(s, "nanotron")) return "deepspeed";
  return "";
}

core::Result<std::vector<Run>> RunsFromJson(const json& rows, const std::string& source) {
  if (!rows.is_array()) {
    return core::Status::Error(fmt::format("{}: must be a JSON array of runs", source));
  }
  std::vector<Run> runs;
  std::map<std::string, size_t> ids;  // id -> the row that used it first
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    Run bad;
    bad.index = i;
    bad.unreadable = true;
    bad.id = fmt::format("#{}", i);
    if (!row.is_object()) {
      bad.unusable = fmt::format("is not an object but {}", row.type_name());
      runs.push_back(std::move(bad));
      continue;
    }
    const auto id_it = row.find("id");
    if (id_it == row.end() || !id_it->is_string() || id_it->get<std::string>().empty()) {
      bad.unusable = "id must be a non-empty string";
      runs.push_back(std::move(bad));
      continue;
    }
    const std::string id = id_it->get<std::string>();
    if (const auto [at, fresh] = ids.emplace(id, i); !fresh) {
      bad.id = id;
      bad.unusable = fmt::format("id is used twice (first by row {})", at->second);
      runs.push_back(std::move(bad));
      continue;
    }
    std::string error;
    Run run = MapRow(row, id, error);
    run.index = i;
    if (!error.empty()) {
      run.unreadable = true;
      run.unusable = error;
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

json RunRowJson(const Run& run, std::vector<std::string>* dropped) {
  const spec::ModelSpec& m = run.model;
  const spec::Layout& l = run.layout;
  std::vector<std::string> lost;
  if (m.is_mla()) lost.push_back("multi-head latent attention (the format has no MLA fields)");
  if (m.sliding_window > 0) lost.push_back("the sliding attention window");
  if (m.is_moe() && m.moe.capacity_factor > 0) {
    lost.push_back(
        fmt::format("MoE capacity factor {} (the row is read as dropless)", m.moe.capacity_factor));
  }
  if (m.is_moe() && (m.moe.first_dense_layers > 0 || m.moe.moe_layer_freq != 1)) {
    lost.push_back("dense layers between the MoE layers (the row is read as MoE in every layer)");
  }
  if (l.cp > 1 && l.cp_kind != spec::CpKind::kRing) lost.push_back("Ulysses context parallelism");
  if (run.train.precision == spec::Precision::kFp32) lost.push_back("fp32 training (read as bf16)");
  const auto null_if_zero = [](int64_t v) { return v > 0 ? json(v) : json(nullptr); };
  json notes = nullptr;
  if (!lost.empty()) {
    std::string text = "the row format cannot say:";
    for (const std::string& s : lost) text += " " + s + ";";
    text.pop_back();
    notes = text;
  }
  json row;
  row["id"] = run.id;
  row["source"] = {{"group", run.group}, {"name", run.id}, {"software", run.software},
                   {"date", nullptr},    {"url", nullptr}, {"notes", notes}};
  // GPT-style models tie the LM head to the embedding: the family is what says so (MapModel).
  row["model"] = {
      {"name", m.name},
      {"family", m.tied_embeddings ? "GPT" : ""},
      {"arch", m.is_moe() ? "moe" : "dense"},
      {"num_layers", m.layers},
      {"hidden_size", m.hidden},
      {"ffn_hidden_size", m.ffn_hidden},
      {"moe_ffn_hidden_size", m.is_moe() ? json(m.moe.expert_ffn_hidden) : json(nullptr)},
      {"num_attention_heads", m.heads},
      {"num_kv_heads", m.kv_heads},
      {"head_dim", m.head_dim},
      {"vocab_size", m.vocab},
      {"seq_length", run.train.seq_len},
      {"num_experts", m.is_moe() ? json(m.moe.experts) : json(nullptr)},
      {"top_k", m.is_moe() ? json(m.moe.top_k) : json(nullptr)},
      {"shared_experts", m.is_moe() ? json(m.moe.shared_experts) : json(nullptr)},
      {"activation", m.activation == spec::Activation::kSwiGLU ? "swiglu" : "gelu"}};
  row["hardware"] = {{"gpu_model", run.sku},
                     {"gpu_type", run.sku},
                     {"num_gpus", run.cluster.gpus()},
                     {"gpus_per_node", run.cluster.gpus_per_node}};
  const bool interleaved = l.schedule == spec::Schedule::kInterleaved && l.virtual_stages > 1;
  row["parallelism"] = {
      {"tp", l.tp},
      {"pp", l.pp},
      {"dp", l.dp},
      {"cp", l.cp},
      {"ep", l.ep},
      {"etp", m.is_moe() ? json(l.expert_tp()) : json(nullptr)},
      {"vpp", interleaved ? json(l.virtual_stages) : json(nullptr)},
      {"pipeline_schedule", l.pp > 1 ? json(spec::ToString(l.schedule)) : json(nullptr)},
      {"sequence_parallel", l.sp},
      {"activation_recompute", spec::ToString(l.recompute)},
      {"micro_batch_size", l.mbs},
      {"global_batch_size", null_if_zero(run.train.global_batch_seqs())},
      {"data_parallel_sharding", fmt::format("ZeRO-{}", l.zero)},
      {"precision", run.train.precision == spec::Precision::kFp8 ? "fp8" : "bf16"},
      // MapLayout reads the note as separate placement whatever ep is: written the same way.
      {"notes", l.ep_placement == spec::EpPlacement::kSeparate
                    ? json("EP not folded into the data-parallel ranks")
                    : json(nullptr)}};
  row["measured"] = {
      {"tokens_per_sec_per_gpu", run.tokens_per_s_gpu},
      {"memory_gib_per_gpu", run.memory_gib ? json(*run.memory_gib) : json(nullptr)}};
  if (dropped != nullptr) *dropped = std::move(lost);
  return row;
}

core::Status AppendRunRow(const std::string& path, const json& row) {
  json rows = json::array();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
    PM_ASSIGN_OR_RETURN(rows, spec::ParseJson(text, path));
    if (!rows.is_array()) {
      return core::Status::Error(fmt::format("{}: must be a JSON array of runs", path));
    }
  }
  const std::string id = row.value("id", "");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].is_object() && rows[i].value("id", json()) == json(id)) {
      return core::Status::Error(
          fmt::format("{}: row {} already has the id '{}' (give another with --id)", path, i, id));
    }
  }
  rows.push_back(row);
  return core::WriteFileAtomic(path, rows.dump(1) + "\n");
}

core::Result<std::vector<Run>> LoadRuns(const std::string& path) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  PM_ASSIGN_OR_RETURN(const json rows, spec::ParseJson(text, path));  // spec/json_input.h
  PM_ASSIGN_OR_RETURN(std::vector<Run> runs, RunsFromJson(rows, path));
  for (Run& r : runs) r.file = path;
  return runs;
}

core::Result<std::vector<Run>> LoadRunFiles(const std::vector<std::string>& paths) {
  std::vector<Run> all;
  std::map<std::string, std::string> first;  // id -> "FILE row N" of an earlier file
  for (const std::string& path : paths) {
    PM_ASSIGN_OR_RETURN(std::vector<Run> runs, LoadRuns(path));
    std::map<std::string, std::string> here;
    for (Run& r : runs) {
      if (!r.unreadable) {
        if (const auto it = first.find(r.id); it != first.end()) {
          Run bad;
          bad.id = r.id;
          bad.index = r.index;
          bad.file = path;
          bad.unreadable = true;
          bad.unusable = fmt::format("id is used twice (first by {})", it->second);
          r = std::move(bad);
        } else {
          here.emplace(r.id, fmt::format("{} row {}", path, r.index));
        }
      }
      all.push_back(std::move(r));
    }
    first.merge(here);
  }
  return all;
}

}  // namespace pentamesh::calib

// ModelSpec: the architecture of a Llama-style decoder (dense or MoE), as typed fields.
// Invariant: parameter counts and FLOPs are never stored here; cost/ derives them from these
// fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pentamesh::spec {

enum class Activation { kSwiGLU, kGeLU };

// Which tokens the load-balancing loss's f_i and P_i average over (model/moe.h):
//   kSequence  the micro-batch's tokens: summed over the cp ranks that share its sequences, so a
//              cp run equals one process;
//   kGlobal    also over the data-parallel ranks (Megatron's global aux loss): the tokens of the
//              micro-batch index m of every dp (and cp) rank together.
enum class AuxLossScope { kSequence, kGlobal };
// How the router turns the softmax over all experts, p, into the gates of the k chosen experts:
//   kSoftmaxTopK  gate_e = p_e (Qwen2-MoE norm_topk_prob = false; TOML "softmax_topk")
//   kTopKRenorm   gate_e = p_e / sum of the k chosen p (Mixtral, Qwen2/3-MoE norm_topk_prob = true;
//                 TOML "topk_renorm")
enum class MoeRouter { kSoftmaxTopK, kTopKRenorm };
inline const char* MoeRouterName(MoeRouter r) {
  return r == MoeRouter::kTopKRenorm ? "topk_renorm" : "softmax_topk";
}

struct MoeSpec {
  int64_t experts = 0;            // routed experts per MoE layer; 0 = dense model
  int64_t top_k = 0;              // routed experts per token
  int64_t expert_ffn_hidden = 0;  // intermediate size of one expert
  int64_t moe_layer_freq = 1;     // every k-th layer (after first_dense_layers) is MoE
  int64_t first_dense_layers =
      0;                       // leading layers that keep the dense FFN (DeepSeek's first_k_dense)
  int64_t shared_experts = 0;  // always-active experts of size expert_ffn_hidden
  double capacity_factor =
      1.0;  // tokens per expert buffer = cf * tokens * top_k / experts; 0 = dropless
  AuxLossScope aux_loss_scope = AuxLossScope::kSequence;  // "sequence" | "global"
  MoeRouter router = MoeRouter::kSoftmaxTopK;  // gates of the chosen experts (model/moe.h)
};

// Multi-head latent attention (DeepSeek-V2/V3; field names as in their config.json). Queries and
// keys have qk_nope_head_dim + qk_rope_head_dim per head, values v_head_dim; keys and values are
// up-projected from one kv_lora_rank latent, queries from a q_lora_rank latent (0: no query
// compression, a full hidden x heads*(nope+rope) projection). The rope part of the key is one
// vector shared by all heads. With MLA, heads is the number of attention heads, kv_heads equals
// heads and head_dim is not used.
struct MlaSpec {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;  // > 0 exactly when the model uses MLA
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
};

// How RoPE's frequencies are changed for a longer context (a recipe phase's `rope`, a model's
// rope_scaling). None of them changes the FLOPs or bytes of a step (RoPE is an elementwise rotation
// whatever its frequencies): the planner records them; the engine applies none, base and llama3
// (model/rope_frequencies.h) and refuses yarn (model::CheckSupported); HF export writes them.
enum class RopeScalingKind {
  kNone,        // the model's frequencies (theta may still be set: a plain base change)
  kLlama3,      // Llama 3.1's frequency-dependent interpolation (HF rope_type "llama3")
  kYarn,        // YaRN (Peng et al. 2023; HF rope_type "yarn")
  kBaseChange,  // a new base theta, no interpolation (ABF, Xiong et al. 2023)
};
const char* RopeScalingName(RopeScalingKind kind);  // "none", "llama3", "yarn", "base"

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::kNone;
  double theta = 0;  // RoPE base; 0 = the model's rope_theta
  double factor = 1;
  double low_freq_factor = 0;          // llama3
  double high_freq_factor = 0;         // llama3
  int64_t original_max_positions = 0;  // llama3, yarn: the pre-training context
  double beta_fast = 32;               // yarn (the paper's defaults)
  double beta_slow = 1;

  // The base RoPE runs with: theta when set, else the model's.
  double Theta(double model_theta) const { return theta > 0 ? theta : model_theta; }
};

struct ModelSpec {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;    // grouped-query attention; == heads for multi-head attention
  int64_t head_dim = 0;    // usually hidden / heads
  int64_t ffn_hidden = 0;  // intermediate size of the dense FFN (dense layers only in MoE models)
  int64_t vocab = 0;
  int64_t max_seq_len = 0;
  Activation activation = Activation::kSwiGLU;
  bool tied_embeddings = false;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // none by default; its theta, when set, replaces rope_theta
  MoeSpec moe;
  MlaSpec mla;
  // Sliding-window (local) attention: each query sees itself and the sliding_window - 1 tokens
  // before it; 0 = full causal attention in every layer. global_every = N >= 2: layer l (from 0)
  // keeps full attention when (l + 1) % N == 0 (one global layer after N - 1 local ones:
  // Gemma-2 is N = 2, Gemma-3 N = 6; Megatron's --window-attn-skip-freq N); 0 = every layer local
  // (Mistral 7B); 1 = every layer global (the window is never used).
  int64_t sliding_window = 0;
  int64_t global_every = 0;
  // Optional stated totals (count of parameters); cost::CheckStatedParams compares them with the
  // architecture and reports any disagreement above 1%.
  std::optional<double> total_params;
  std::optional<double> active_params;

  // RoPE's base: the scaling's theta when it sets one (a base change), else rope_theta.
  double EffectiveRopeTheta() const { return rope_scaling.Theta(rope_theta); }
  bool is_moe() const { return moe.experts > 0; }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  // REQUIRES: 0 <= layer < layers. True when the layer attends within the sliding window.
  bool IsLocalLayer(int64_t layer) const {
    if (sliding_window <= 0) return false;
    return global_every == 0 || (global_every > 1 && (layer + 1) % global_every != 0);
  }
  // REQUIRES: 0 <= layer < layers.
  bool IsMoeLayer(int64_t layer) const {
    if (!is_moe() || layer < moe.first_dense_layers) return false;
    return (layer - moe.first_dense_layers) % moe.moe_layer_freq == 0;
  }
  int64_t MoeLayerCount() const {
    int64_t n = 0;
    for (int64_t l = 0; l < layers; ++l) n += IsMoeLayer(l) ? 1 : 0;
    return n;
  }
};

}  // namespace pentamesh::spec

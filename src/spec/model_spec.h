// ModelSpec: the architecture of a Llama-style decoder (dense or MoE), as typed fields.
// Invariant: parameter counts and FLOPs are never stored here; cost/ derives them from these
// fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pentamesh::spec {

enum class Activation { kSwiGLU, kGeLU };

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
  MoeSpec moe;
  // Optional stated totals (count of parameters); cost::CheckStatedParams compares them with the
  // architecture and reports any disagreement above 1%.
  std::optional<double> total_params;
  std::optional<double> active_params;

  bool is_moe() const { return moe.experts > 0; }
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

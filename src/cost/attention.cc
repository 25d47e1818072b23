// Attention shapes: GQA (Ainslie et al. 2023; MHA when kv_heads = heads) and MLA (DeepSeek-AI,
// DeepSeek-V2 2024, section 2.1; Megatron-Core's MLASelfAttention), and sliding-window key
// lengths (Beltagy et al. 2020; Mistral 7B, Jiang et al. 2023). docs/COST_MODEL.md, "Attention
// variants".
#include "cost/attention.h"

#include <algorithm>

namespace pentamesh::cost {
namespace {

// Multi-head or grouped-query attention: one fused QKV projection (column-parallel) and the
// out-projection (row-parallel).
AttentionShape Gqa(const spec::ModelSpec& m) {
  AttentionShape a;
  const double h = static_cast<double>(m.hidden), d = static_cast<double>(m.head_dim);
  a.heads = static_cast<double>(m.heads);
  a.qk_head_dim = d;
  a.v_head_dim = d;
  a.q = static_cast<double>(m.heads * m.head_dim);
  a.k = static_cast<double>(m.kv_heads * m.head_dim);
  a.v = a.k;
  a.o = a.q;
  a.score_width = a.q;
  a.gemms[0] = {.n = a.q + 2 * a.k, .k = h, .n_over_tp = true};
  a.gemms[1] = {.n = h, .k = a.o, .k_over_tp = true};
  a.gemm_count = 2;
  a.params_tp = 2.0 * h * a.q + 2.0 * h * a.k;
  a.elementwise_tp = a.q + a.k;  // RoPE on q and k
  a.gemm_out_tp = a.q + 2 * a.k;
  a.wgrad_copy = 2.0 * h;                   // x of wq/wk/wv, dy of wo
  a.wgrad_copy_tp = 2.0 * a.q + 2.0 * a.k;  // dy of wq/wk/wv, x of wo
  a.kv_cache = a.k + a.v;
  a.kv_cache_over_tp = true;
  return a;
}

// MLA: q = W_uq RMSNorm(W_dq x) (or W_q x when q_lora_rank = 0); [c_kv, k_rope] = W_dkv x;
// [k_nope, v] = W_ukv RMSNorm(c_kv); k = [k_nope, RoPE(k_rope) for every head]; out = W_o o.
// The down-projections and the latent norms are replicated over tp (Megatron-Core), the
// up-projections column-parallel, the out-projection row-parallel.
AttentionShape Mla(const spec::ModelSpec& m) {
  AttentionShape a;
  const spec::MlaSpec& x = m.mla;
  const double h = static_cast<double>(m.hidden), heads = static_cast<double>(m.heads);
  const double q_lora = static_cast<double>(x.q_lora_rank);
  const double kv_lora = static_cast<double>(x.kv_lora_rank);
  const double nope = static_cast<double>(x.qk_nope_head_dim);
  const double rope = static_cast<double>(x.qk_rope_head_dim);
  const double vd = static_cast<double>(x.v_head_dim);
  a.heads = heads;
  a.qk_head_dim = nope + rope;
  a.v_head_dim = vd;
  a.q = heads * (nope + rope);
  a.k = a.q;
  a.v = heads * vd;
  a.o = a.v;
  a.score_width = (a.q + a.o) / 2.0;
  int g = 0;
  if (q_lora > 0) {
    a.gemms[g++] = {.n = q_lora, .k = h};                                        // W_dq
    a.gemms[g++] = {.n = a.q, .k = q_lora, .n_over_tp = true, .up_proj = true};  // W_uq
  } else {
    a.gemms[g++] = {.n = a.q, .k = h, .n_over_tp = true};  // W_q
  }
  a.gemms[g++] = {.n = kv_lora + rope, .k = h};  // W_dkv
  a.gemms[g++] = {
      .n = heads * (nope + vd), .k = kv_lora, .n_over_tp = true, .up_proj = true};  // W_ukv
  a.gemms[g++] = {.n = h, .k = a.o, .k_over_tp = true};                             // W_o
  a.gemm_count = g;
  for (int i = 0; i < g; ++i) {
    const AttentionGemm& gm = a.gemms[static_cast<size_t>(i)];
    (gm.replicated() ? a.params_rep : a.params_tp) += gm.n * gm.k;
    (gm.n_over_tp ? a.gemm_out_tp : a.gemm_out_rep) += gm.k_over_tp ? 0.0 : gm.n;
  }
  a.norm_params = q_lora + kv_lora;
  a.latent_stash = 2.0 * (q_lora + kv_lora);    // each latent and its normed copy
  a.elementwise_tp = heads * rope;              // RoPE on the queries' rope part
  a.elementwise_rep = rope + q_lora + kv_lora;  // RoPE on the shared key, the latent norms
  // x copies: the normed input once, the normed latents (inputs of W_uq, W_ukv), o (tp); dy
  // copies: the latents, q, [k_nope, v] (tp), the output.
  a.wgrad_copy = 2.0 * h + 2.0 * q_lora + 2.0 * kv_lora + rope;
  a.wgrad_copy_tp = a.q + heads * (nope + vd) + a.o;
  a.kv_cache = kv_lora + rope;  // DeepSeek-V2 section 2.1.2: (d_c + d_h^R) elements a layer
  a.kv_cache_over_tp = false;
  return a;
}

}  // namespace

AttentionShape AttentionShapeOf(const spec::ModelSpec& model) {
  return model.is_mla() ? Mla(model) : Gqa(model);
}

AttentionKeys AttentionKeysOf(const spec::ModelSpec& model, double seq_len, bool local) {
  const double w = static_cast<double>(model.sliding_window);
  if (!local || w <= 0 || w >= seq_len) return {.full = seq_len, .causal = seq_len / 2.0};
  return {.full = w, .causal = w - w * w / (2.0 * seq_len)};
}

int64_t LocalLayerCount(const spec::ModelSpec& model) {
  int64_t n = 0;
  for (int64_t l = 0; l < model.layers; ++l) n += model.IsLocalLayer(l) ? 1 : 0;
  return n;
}

}  // namespace pentamesh::cost

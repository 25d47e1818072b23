// The attention block's shapes, for grouped-query attention (GQA, MHA when kv_heads = heads),
// multi-head latent attention (MLA, DeepSeek-V2/V3) and sliding-window layers: the one place the
// cost model reads the attention architecture from. Parameter counts, FLOPs, the GEMM and
// elementwise time terms, the activation stash, CP and zero-bubble bytes all take their widths
// from AttentionShapeOf and their key lengths from AttentionKeysOf (docs/COST_MODEL.md,
// "Attention variants").
//
// Widths are elements per token of the whole layer (divide a "tp" width by tp for one rank);
// "rep" widths are held whole by every tp rank (sequence-sharded under SP). For GQA every rep
// width is 0 and the GQA formulas come out unchanged.
#pragma once

#include <array>
#include <cstdint>

#include "spec/model_spec.h"

namespace pentamesh::cost {

// One forward GEMM of the attention block for one token: output width n, reduction k.
struct AttentionGemm {
  double n = 0, k = 0;
  bool n_over_tp = false;  // column-parallel: the output is split over tp
  bool k_over_tp = false;  // row-parallel: the reduction is split over tp
  bool up_proj = false;    // MLA's up-projection from a latent (what mla_up_proj recomputes)
  // Replicated over tp (MLA's down-projections): every tp rank runs it on its own rows, the
  // sequence shard under SP, the whole sequence otherwise.
  bool replicated() const { return !n_over_tp && !k_over_tp; }
};

struct AttentionShape {
  double heads = 0;
  double qk_head_dim = 0, v_head_dim = 0;
  // Tensors core attention reads and writes, per token: queries, keys, values, output.
  double q = 0, k = 0, v = 0, o = 0;  // tp widths
  // Score width: QK^T runs over qk_head_dim, AV over v_head_dim; forward FLOPs per token and key
  // are 2 (q + o) = 4 x score_width (GQA: heads x head_dim).
  double score_width = 0;
  // Projection weights (matmul parameters) split over tp, and held whole by every tp rank.
  double params_tp = 0, params_rep = 0;
  double norm_params = 0;  // MLA's RMSNorms of the q and kv latents (rep)
  // Stashed for backward besides q, k, v, o: MLA's latents (down-projection outputs and their
  // normed copies), rep.
  double latent_stash = 0;
  // Elementwise widths read and written once each: RoPE (tp) and the latents' norms and the
  // shared RoPE key (rep).
  double elementwise_tp = 0, elementwise_rep = 0;
  // Outputs of the projections before the out-projection, tp and rep (torchtitan's per-op
  // checkpointing keeps every other matmul output).
  double gemm_out_tp = 0, gemm_out_rep = 0;
  // Zero-bubble's fp32 copies for W per token: GEMM inputs (the shared normed input once) and
  // output gradients, whole or split over tp.
  double wgrad_copy = 0, wgrad_copy_tp = 0;
  // Inference: elements one layer keeps in its KV cache per token. GQA: keys and values of the
  // kv heads, 2 x kv_heads x head_dim, split over tp by kv head. MLA: the compressed latent and
  // the shared RoPE key, kv_lora_rank + qk_rope_head_dim, which every tp rank holds whole (its
  // up-projection is split over tp, the latent is not).
  double kv_cache = 0;
  bool kv_cache_over_tp = false;
  // Forward GEMMs in order; the last one is the out-projection.
  std::array<AttentionGemm, 5> gemms{};
  int gemm_count = 0;
};
AttentionShape AttentionShapeOf(const spec::ModelSpec& model);

// Keys each query attends to on average over a sequence of seq_len tokens. full: no causal mask
// (the model-FLOP convention of 6N + 12 L h s); causal: what a causal flash kernel executes.
// Full attention: full = s, causal = s / 2. A sliding window w < s: full = w, causal = w -
// w^2 / (2 s) (query i sees min(i + 1, w) keys), which meets s / 2 at w = s.
struct AttentionKeys {
  double full = 0, causal = 0;
};
AttentionKeys AttentionKeysOf(const spec::ModelSpec& model, double seq_len, bool local);

// Layers among [0, layers) that attend within the sliding window (spec::ModelSpec::IsLocalLayer).
int64_t LocalLayerCount(const spec::ModelSpec& model);

}  // namespace pentamesh::cost

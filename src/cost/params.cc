// Parameter counts and FLOPs per token, derived from the architecture (Llama-style decoder: no
// biases, RMSNorm, GQA or MLA with optional sliding-window layers (cost/attention.h), SwiGLU or
// GELU FFN, optional MoE). Invariant: nothing here reads a stated
// total; CheckStatedParams only compares with it.
#include <fmt/format.h>

#include <cmath>

#include "cost/attention.h"
#include "cost/cost.h"

namespace pentamesh::cost {
namespace {

double MlpMatrices(spec::Activation activation) {
  return activation == spec::Activation::kSwiGLU ? 3.0 : 2.0;  // gate+up+down, or up+down
}

}  // namespace

ParamCounts CountParams(const spec::ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  const AttentionShape attn = AttentionShapeOf(m);
  const double mats = MlpMatrices(m.activation);
  const double layers = static_cast<double>(m.layers);
  const double moe_layers = static_cast<double>(m.MoeLayerCount());
  const double dense_layers = layers - moe_layers;
  const double expert_one = mats * h * static_cast<double>(m.moe.expert_ffn_hidden);

  ParamCounts c;
  c.embedding = static_cast<double>(m.vocab) * h;
  c.lm_head = m.tied_embeddings ? 0.0 : c.embedding;
  c.attention = layers * (attn.params_tp + attn.params_rep);
  c.dense_mlp = dense_layers * mats * h * static_cast<double>(m.ffn_hidden);
  c.routed_experts = moe_layers * static_cast<double>(m.moe.experts) * expert_one;
  c.shared_experts = moe_layers * static_cast<double>(m.moe.shared_experts) * expert_one;
  c.router = moe_layers * h * static_cast<double>(m.moe.experts);
  c.norms = (2.0 * layers + 1.0) * h + layers * attn.norm_params;
  c.total = c.embedding + c.lm_head + c.attention + c.dense_mlp + c.routed_experts +
            c.shared_experts + c.router + c.norms;
  const double active_experts = moe_layers * static_cast<double>(m.moe.top_k) * expert_one;
  c.active = c.total - c.routed_experts + active_experts;
  // The head matmul uses the embedding matrix when tied; the lookup itself is not a matmul.
  c.active_matmul = c.active - c.embedding - c.norms + (m.tied_embeddings ? c.embedding : 0.0);
  return c;
}

std::vector<std::string> CheckStatedParams(const spec::ModelSpec& model) {
  std::vector<std::string> out;
  const ParamCounts c = CountParams(model);
  auto check = [&](const char* field, const std::optional<double>& stated, double derived) {
    if (!stated || *stated <= 0) return;
    const double rel = derived / *stated - 1.0;
    if (std::abs(rel) > 0.01) {
      out.push_back(
          fmt::format("model {}: stated {}={:.2f}B but the architecture implies {:.2f}B ({:+.1f}%)",
                      model.name, field, *stated / 1e9, derived / 1e9, 100.0 * rel));
    }
  };
  check("total_params", model.total_params, c.total);
  check("active_params", model.active_params, c.active);
  return out;
}

double AttentionForwardFlops(const spec::ModelSpec& m, double seq_len, bool causal) {
  const double width = AttentionShapeOf(m).score_width;
  const auto local = static_cast<double>(LocalLayerCount(m));
  const double global = static_cast<double>(m.layers) - local;
  const AttentionKeys keys_global = AttentionKeysOf(m, seq_len, false);
  const AttentionKeys keys_local = AttentionKeysOf(m, seq_len, true);
  // Per token and layer, forward: QK^T and AV are 2 * keys * width FLOPs each (GQA: width =
  // heads x head_dim; keys = s over the full square, fewer in sliding-window layers).
  if (causal) return 4.0 * (global * keys_global.causal + local * keys_local.causal) * width;
  return 4.0 * (global * keys_global.full + local * keys_local.full) * width;
}

FlopsPerToken Flops(const spec::ModelSpec& m, int64_t seq_len, spec::Recompute recompute,
                    uint32_t modules) {
  const ParamCounts c = CountParams(m);
  const double s = static_cast<double>(seq_len);
  const double attn_fwd_full = AttentionForwardFlops(m, s, false);
  const double attn_fwd_causal = AttentionForwardFlops(m, s, true);
  FlopsPerToken f;
  f.model = 6.0 * c.active_matmul + 3.0 * attn_fwd_full;
  f.model_causal = 6.0 * c.active_matmul + 3.0 * attn_fwd_causal;
  f.model_6n = 6.0 * c.active;
  f.hardware = f.model;
  if (recompute == spec::Recompute::kSelective) {
    auto reruns = [&](spec::RecomputeModule module) {
      return spec::Recomputes(recompute, modules, module);
    };
    // core attention forward again (Korthikanti et al. 2022)
    if (reruns(spec::kRecomputeCoreAttn)) f.hardware += attn_fwd_full;
    if (reruns(spec::kRecomputeMlaUpProj)) {
      const AttentionShape a = AttentionShapeOf(m);
      for (int i = 0; i < a.gemm_count; ++i) {
        const AttentionGemm& g = a.gemms[static_cast<size_t>(i)];
        if (g.up_proj) f.hardware += 2.0 * g.n * g.k * static_cast<double>(m.layers);
      }
    }
    if (reruns(spec::kRecomputeMlp)) f.hardware += 2.0 * c.dense_mlp;
  } else if (recompute == spec::Recompute::kFull) {
    // Every layer's forward again; the LM head is not recomputed.
    const double head = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
    f.hardware += 2.0 * (c.active_matmul - head) + attn_fwd_full;
  }
  return f;
}

}  // namespace pentamesh::cost

// cost::Context (the per-spec context) and CheckLayout (spec::FirstBrokenRule: the rule table in
// spec/validate.cc). tests/cost/check_layout_test.cc checks CheckLayout == kOk exactly when
// spec::Validate is empty over a grid of layouts.
#include "cost/attention.h"
#include "cost/cost.h"
#include "spec/validate.h"

namespace pentamesh::cost {

Context::Context(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                 const spec::TrainSpec& train, const CostParams& params)
    : model_(model), cluster_(cluster), train_(train), params_(params) {
  counts_ = CountParams(model_);
  const double h = static_cast<double>(model_.hidden);
  attention_ = AttentionShapeOf(model_);
  const AttentionShape& attn = attention_;
  const double mats = model_.activation == spec::Activation::kSwiGLU ? 3.0 : 2.0;
  attn_params_layer = attn.params_tp;
  attn_params_rep = attn.params_rep;
  mlp_params_layer = mats * h * static_cast<double>(model_.ffn_hidden);
  expert_params_one = mats * h * static_cast<double>(model_.moe.expert_ffn_hidden);
  shared_params_layer = static_cast<double>(model_.moe.shared_experts) * expert_params_one;
  router_params_layer = h * static_cast<double>(model_.moe.experts);
  norm_params_layer = 2.0 * h + attn.norm_params;
  flops_none = Flops(model_, train_.seq_len, spec::Recompute::kNone);
  flops_selective = Flops(model_, train_.seq_len, spec::Recompute::kSelective);
  flops_full = Flops(model_, train_.seq_len, spec::Recompute::kFull);
  const int64_t layers = model_.layers > 0 ? model_.layers : 0;
  moe_prefix_.assign(static_cast<size_t>(layers) + 1, 0);
  local_prefix_.assign(static_cast<size_t>(layers) + 1, 0);
  for (int64_t l = 0; l < layers; ++l) {
    const auto i = static_cast<size_t>(l);
    moe_prefix_[i + 1] = moe_prefix_[i] + (model_.IsMoeLayer(l) ? 1 : 0);
    local_prefix_[i + 1] = local_prefix_[i] + (model_.IsLocalLayer(l) ? 1 : 0);
  }
}

double GemmEfficiency(const Context& ctx) {
  const CostParams& p = ctx.params();
  if (p.gemm_efficiency_max > 0) return p.gemm_efficiency_max;
  if (ctx.cluster().gemm_efficiency > 0) return ctx.cluster().gemm_efficiency;
  return kDefaultGemmEfficiency;
}

double AttentionFactor(const Context& ctx) {
  const double f = ctx.cluster().attention_factor;
  return f > 0 ? f : 1.0;
}

double Fp8GemmSpeedup(const Context& ctx) {
  const spec::ClusterSpec& c = ctx.cluster();
  if (ctx.params().fp8_gemm_speedup > 0) return ctx.params().fp8_gemm_speedup;
  if (c.fp8_gemm_speedup > 0) return c.fp8_gemm_speedup;
  return c.peak_fp8_tflops / c.peak_tflops;
}

double ServeGemmSpeedup(const Context& ctx, bool fp4) {
  const spec::ClusterSpec& c = ctx.cluster();
  const double peak = fp4 ? c.peak_fp4_tflops : c.peak_fp8_tflops;
  if (ctx.params().fp8_gemm_speedup > 0)
    return ctx.params().fp8_gemm_speedup * peak / c.peak_fp8_tflops;
  return peak / c.peak_tflops;
}

Rule CheckLayout(const Context& ctx, const spec::Layout& l) {
  return spec::FirstBrokenRule(ctx.model(), ctx.cluster(), ctx.train(), l);
}

}  // namespace pentamesh::cost

// cost::Model (the per-spec context) and CheckLayout (spec::FirstBrokenRule: the rule table in
// spec/validate.cc). tests/cost/check_layout_test.cc checks CheckLayout == kOk exactly when
// spec::Validate is empty over a grid of layouts.
#include "cost/cost.h"
#include "spec/validate.h"

namespace pentamesh::cost {

Model::Model(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
             const spec::TrainSpec& train, const CostParams& params)
    : model_(model), cluster_(cluster), train_(train), params_(params) {
  counts_ = CountParams(model_);
  const double h = static_cast<double>(model_.hidden);
  const double h_attn = static_cast<double>(model_.heads * model_.head_dim);
  const double h_kv = static_cast<double>(model_.kv_heads * model_.head_dim);
  const double mats = model_.activation == spec::Activation::kSwiGLU ? 3.0 : 2.0;
  attn_params_layer = 2.0 * h * h_attn + 2.0 * h * h_kv;
  mlp_params_layer = mats * h * static_cast<double>(model_.ffn_hidden);
  expert_params_one = mats * h * static_cast<double>(model_.moe.expert_ffn_hidden);
  shared_params_layer = static_cast<double>(model_.moe.shared_experts) * expert_params_one;
  router_params_layer = h * static_cast<double>(model_.moe.experts);
  norm_params_layer = 2.0 * h;
  flops_none = Flops(model_, train_.seq_len, spec::Recompute::kNone);
  flops_selective = Flops(model_, train_.seq_len, spec::Recompute::kSelective);
  flops_full = Flops(model_, train_.seq_len, spec::Recompute::kFull);
  const int64_t layers = model_.layers > 0 ? model_.layers : 0;
  moe_prefix_.assign(static_cast<size_t>(layers) + 1, 0);
  for (int64_t l = 0; l < layers; ++l) {
    moe_prefix_[static_cast<size_t>(l) + 1] =
        moe_prefix_[static_cast<size_t>(l)] + (model_.IsMoeLayer(l) ? 1 : 0);
  }
}

Rule CheckLayout(const Model& ctx, const spec::Layout& l) {
  return spec::FirstBrokenRule(ctx.model(), ctx.cluster(), ctx.train(), l);
}

}  // namespace pentamesh::cost

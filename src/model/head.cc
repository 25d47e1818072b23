#include "model/head.h"

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/softmax_xent.h"

namespace pentamesh::model {

Head::Head(ParamSet& params, int64_t hidden, int64_t vocab, double norm_eps, ParamId tied_weight,
           const ShardConfig& shard)
    : params_(params),
      norm_(params, "final_norm.weight", hidden, norm_eps),
      hidden_(hidden),
      vocab_local_(vocab / shard.tp_size) {
  if (tied_weight >= 0) {
    weight_ = tied_weight;
  } else {
    weight_ =
        params.Add("lm_head.weight", {vocab, hidden},
                   {.dim = 0, .axis = MeshAxis::kTp, .size = shard.tp_size, .rank = shard.tp_rank},
                   {.std = 0.02}, true);
  }
}

double Head::Forward(Saved& s, ConstTensor x, ConstTensor targets, const LayerContext& ctx) const {
  const int64_t T = x.dim(0);
  s.xn = NewBuffer(ctx, ctx.RoundedStashTag(core::MemTag::kActivations), {T, hidden_});
  norm_.Forward(s.xn.view(), s.norm, x, ctx);
  s.logits = NewBuffer(ctx, core::MemTag::kLogits, {T, vocab_local_});
  s.lse = NewBuffer(ctx, core::MemTag::kLogits, {T});
  kernels::linear_forward(s.logits.view(), s.xn.view(), params_.weight(weight_));
  return kernels::softmax_xent_forward(s.lse.view(), s.logits.view(), targets);
}

void Head::Backward(Tensor dx, ConstTensor x, ConstTensor targets, Saved& s, float loss_scale,
                    const LayerContext& ctx) const {
  Tensor dlogits = s.logits.view();  // in place
  kernels::softmax_xent_backward(dlogits, s.logits.view(), s.lse.view(), targets, loss_scale);
  kernels::linear_backward_weight(params_.grad(weight_), dlogits, s.xn.view());
  core::Buffer dxn = NewBuffer(ctx, core::MemTag::kOther, {x.dim(0), hidden_});
  kernels::linear_backward_input(dxn.view(), dlogits, params_.weight(weight_));
  norm_.Backward(dx, dxn.view(), x, s.norm);
  s = Saved();
}

}  // namespace pentamesh::model

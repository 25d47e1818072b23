#include "model/mlp.h"

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/swiglu.h"
#include "model/regions.h"

namespace pentamesh::model {

void SwiGluFfnForward(Tensor y, Tensor h1, Tensor h3, Tensor g, ConstTensor x, ConstTensor w1,
                      ConstTensor w3, ConstTensor w2, const LayerContext& ctx) {
  kernels::linear_forward(h1, x, w1);
  kernels::linear_forward(h3, x, w3);
  RoundActivation(ctx, h1);
  RoundActivation(ctx, h3);
  kernels::swiglu_forward(g, h1, h3);
  RoundActivation(ctx, g);
  kernels::linear_forward(y, g, w2);
  RoundActivation(ctx, y);
}

void SwiGluFfnBackward(Tensor dx, Tensor dw1, Tensor dw3, Tensor dw2, ConstTensor dy, ConstTensor x,
                       ConstTensor h1, ConstTensor h3, ConstTensor g, ConstTensor w1,
                       ConstTensor w3, ConstTensor w2, const LayerContext& ctx,
                       bool accumulate_dx) {
  WeightGradGemm(ctx, dw2, dy, g);
  core::Buffer dg = NewBuffer(ctx, core::MemTag::kOther, h1.shape());
  kernels::linear_backward_input(dg.view(), dy, w2);
  core::Buffer dh1 = NewBuffer(ctx, core::MemTag::kOther, h1.shape());
  core::Buffer dh3 = NewBuffer(ctx, core::MemTag::kOther, h1.shape());
  kernels::swiglu_backward(dh1.view(), dh3.view(), dg.view(), h1, h3);
  WeightGradGemm(ctx, dw1, dh1.view(), x);
  WeightGradGemm(ctx, dw3, dh3.view(), x);
  kernels::linear_backward_input(dx, dh1.view(), w1, accumulate_dx);
  kernels::linear_backward_input(dx, dh3.view(), w3, /*accumulate_dx=*/true);
}

Mlp::Mlp(ParamSet& params, const std::string& prefix, int64_t hidden, int64_t ffn_hidden,
         double std_out, const ShardConfig& shard)
    : params_(params),
      ends_(*shard.tp_comm, shard.sequence_parallel),
      ffn_local_(ffn_hidden / shard.tp_size) {
  const Sharding column{
      .dim = 0, .axis = MeshAxis::kTp, .size = shard.tp_size, .rank = shard.tp_rank};
  const Sharding row{.dim = 1, .axis = MeshAxis::kTp, .size = shard.tp_size, .rank = shard.tp_rank};
  w1_ = params.Add(prefix + ".w1", {ffn_hidden, hidden}, column, {.std = 0.02}, true);
  w3_ = params.Add(prefix + ".w3", {ffn_hidden, hidden}, column, {.std = 0.02}, true);
  w2_ = params.Add(prefix + ".w2", {hidden, ffn_hidden}, row, {.std = std_out}, true);
}

void Mlp::ForwardPartial(Tensor y_partial, Saved& saved, ConstTensor x, const LayerContext& ctx,
                         core::MemTag tag) const {
  const int64_t T = x.dim(0);
  saved.h1 = NewBuffer(ctx, tag, {T, ffn_local_});
  saved.h3 = NewBuffer(ctx, tag, {T, ffn_local_});
  saved.g = NewBuffer(ctx, tag, {T, ffn_local_});
  SwiGluFfnForward(y_partial, saved.h1.view(), saved.h3.view(), saved.g.view(), x,
                   params_.weight(w1_), params_.weight(w3_), params_.weight(w2_), ctx);
}

void Mlp::Forward(Tensor y, Saved& saved, ConstTensor x_rows, const LayerContext& ctx,
                  core::MemTag tag) const {
  core::Buffer gathered, partial;
  const ConstTensor x = ends_.Gather(ctx, x_rows, gathered);
  const Tensor y_full = ends_.PartialFor(ctx, y, partial);
  ForwardPartial(y_full, saved, x, ctx, tag);
  ends_.Sum(y, y_full);
}

void Mlp::BackwardPartial(Tensor dx_partial, ConstTensor dy, ConstTensor x, Saved& saved,
                          const LayerContext& ctx) const {
  SwiGluFfnBackward(dx_partial, params_.grad(w1_), params_.grad(w3_), params_.grad(w2_), dy, x,
                    saved.h1.view(), saved.h3.view(), saved.g.view(), params_.weight(w1_),
                    params_.weight(w3_), params_.weight(w2_), ctx);
  saved = Saved();
}

void Mlp::Backward(Tensor dx, ConstTensor dy_rows, ConstTensor x_rows, Saved& saved,
                   const LayerContext& ctx, bool accumulate_dx) const {
  core::Buffer dy_gathered, x_gathered, partial;
  const ConstTensor dy = ends_.Gather(ctx, dy_rows, dy_gathered);
  const ConstTensor x = ends_.Gather(ctx, x_rows, x_gathered);
  // copy_to_tp's backward sums this block's input grad alone, so an accumulating caller gets it
  // through a scratch buffer.
  core::Buffer scratch;
  Tensor dx_block = dx;
  if (accumulate_dx) {
    scratch = NewBuffer(ctx, core::MemTag::kOther, dx.shape());
    dx_block = scratch.view();
  }
  const Tensor dx_full = ends_.PartialFor(ctx, dx_block, partial);
  BackwardPartial(dx_full, dy, x, saved, ctx);
  ends_.Sum(dx_block, dx_full);
  if (accumulate_dx) kernels::add_inplace(dx, dx_block);
}

}  // namespace pentamesh::model

#include "model/block.h"

#include <fmt/format.h>

#include "kernels/cpu/elementwise.h"

namespace pentamesh::model {

Block::Block(ParamSet& params, int64_t layer, const BlockConfig& c)
    : config_(c),
      norm1_(params, fmt::format("layers.{}.attention_norm.weight", layer), c.attention.hidden,
             c.norm_eps),
      norm2_(params, fmt::format("layers.{}.ffn_norm.weight", layer), c.attention.hidden,
             c.norm_eps),
      attention_(params, fmt::format("layers.{}.attention", layer), c.attention) {
  if (c.moe) {
    moe_ = std::make_unique<Moe>(params, fmt::format("layers.{}.moe", layer), c.moe_config);
  } else {
    mlp_ = std::make_unique<Mlp>(params, fmt::format("layers.{}.mlp", layer), c.attention.hidden,
                                 c.ffn_hidden, c.attention.std_out, c.attention.shard);
  }
}

void Block::ForwardKeep(Tensor out, Saved& s, Dims dims, const LayerContext& ctx, MoeStats* stats,
                        bool keep_attention) const {
  // The rows of the residual stream this rank holds: T, or T/tp under sequence parallelism.
  const int64_t T = s.x.view().dim(0), H = config_.attention.hidden;
  const core::MemTag act = ctx.RoundedStashTag(core::MemTag::kActivations);
  s.n1 = NewBuffer(ctx, act, {T, H});
  norm1_.Forward(s.n1.view(), s.norm1, s.x.view(), ctx);
  s.h = NewBuffer(ctx, act, {T, H});
  attention_.Forward(s.h.view(), s.attention, s.n1.view(), dims, ctx, keep_attention);
  kernels::add(s.h.view(), s.h.view(), s.x.view());
  RoundActivation(ctx, s.h.view());
  s.n2 = NewBuffer(ctx, act, {T, H});
  norm2_.Forward(s.n2.view(), s.norm2, s.h.view(), ctx);
  if (moe_) {
    moe_->Forward(out, s.moe, s.n2.view(), ctx, stats);
  } else {
    mlp_->Forward(out, s.mlp, s.n2.view(), ctx, act);
  }
  kernels::add(out, out, s.h.view());
  RoundActivation(ctx, out);
}

void Block::Forward(Tensor out, Saved& saved, ConstTensor x, Dims dims, const LayerContext& ctx,
                    MoeStats* stats) const {
  saved.x = NewBuffer(ctx, ctx.RoundedStashTag(core::MemTag::kActivations),
                      {x.dim(0), config_.attention.hidden});
  kernels::copy(saved.x.view(), x);
  if (config_.recompute == spec::Recompute::kFull) {
    Saved transient;
    transient.x = std::move(saved.x);
    ForwardKeep(out, transient, dims, ctx, stats, /*keep_attention=*/false);
    saved.x = std::move(transient.x);  // everything else is freed here
  } else {
    ForwardKeep(out, saved, dims, ctx, stats, config_.recompute == spec::Recompute::kNone);
  }
  if (ctx.bf16) saved.ForEachActivation(CompactToBf16);
}

void Block::ForwardCached(Tensor out, ConstTensor x, Tensor k_cache, Tensor v_cache, int64_t pos0,
                          const LayerContext& ctx) const {
  const int64_t N = x.dim(0), H = config_.attention.hidden;
  const core::MemTag tag = core::MemTag::kOther;
  RmsNorm::Saved norm;
  core::Buffer n = NewBuffer(ctx, tag, {N, H});
  norm1_.Forward(n.view(), norm, x, ctx, tag);
  core::Buffer h = NewBuffer(ctx, tag, {N, H});
  attention_.ForwardCached(h.view(), n.view(), k_cache, v_cache, pos0, ctx);
  kernels::add(h.view(), h.view(), x);
  norm2_.Forward(n.view(), norm, h.view(), ctx, tag);
  if (moe_) {
    Moe::Saved transient;
    moe_->Forward(out, transient, n.view(), ctx, nullptr, tag);
  } else {
    Mlp::Saved transient;
    mlp_->Forward(out, transient, n.view(), ctx, tag);
  }
  kernels::add(out, out, h.view());
}

void Block::Backward(Tensor dx, ConstTensor dy, Saved& s, Dims dims,
                     const LayerContext& ctx) const {
  s.ForEachActivation(ExpandToF32);

  if (config_.recompute == spec::Recompute::kFull) {  // rerun forward, stats not counted twice
    core::Buffer out = NewBuffer(ctx, core::MemTag::kOther, {dy.dim(0), config_.attention.hidden});
    ForwardKeep(out.view(), s, dims, ctx, nullptr, /*keep_attention=*/true);
    // In bf16 the recomputed stash is, like a stored one, bf16 activations (lossless: the values
    // are already rounded); the fp32 working copies for this backward are then kOther.
    if (ctx.bf16) {
      s.ForEachActivation(CompactToBf16);
      s.ForEachActivation(ExpandToF32);
    }
  }
  const int64_t T = dy.dim(0), H = config_.attention.hidden;  // rows held (T/tp under SP)
  // FFN branch: dh = dy + d(norm2)(d ffn).
  core::Buffer dn = NewBuffer(ctx, core::MemTag::kOther, {T, H});
  if (moe_) {
    moe_->Backward(dn.view(), dy, s.n2.view(), s.moe, ctx);
  } else {
    mlp_->Backward(dn.view(), dy, s.n2.view(), s.mlp, ctx);
  }
  core::Buffer dh = NewBuffer(ctx, core::MemTag::kOther, {T, H});
  norm2_.Backward(dh.view(), dn.view(), s.h.view(), s.norm2);
  kernels::add_inplace(dh.view(), dy);
  // Attention branch: dx = dh + d(norm1)(d attention).
  attention_.Backward(dn.view(), dh.view(), s.n1.view(), s.attention, dims, ctx);
  norm1_.Backward(dx, dn.view(), s.x.view(), s.norm1);
  kernels::add_inplace(dx, dh.view());
  s = Saved();
}

}  // namespace pentamesh::model

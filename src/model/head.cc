#include "model/head.h"

#include "kernels/cpu/matmul.h"
#include "model/regions.h"

#include <algorithm>
#include <cmath>

namespace pentamesh::model {
namespace {

// Vocab-parallel cross-entropy forward over this rank's (T, V/tp) logits of vocab rows
// [vocab_begin, vocab_begin + V/tp): three fp32 all-reduces of T values over tp (the shift, the
// sum of exponentials, the target logit), the three cost::TpTerms counts. The shift is the mean
// of the shards' row maxima (the communicator reduces by sum only); exponentials are taken in
// double, so shards whose maxima differ by less than ~700 nats are exact; a non-finite log-sum-exp
// gives a non-finite loss, which the trainer skips. With tp = 1 the shift is the row max.
double VocabParallelXentForward(comm::Communicator& tp, Tensor lse, ConstTensor logits,
                                ConstTensor targets, int64_t vocab_begin) {
  const int64_t T = targets.numel(), V = logits.dim(1);
  std::vector<float> shift(static_cast<size_t>(T)), sum(static_cast<size_t>(T)),
      target_logit(static_cast<size_t>(T), 0.0f);
  const float* pl = logits.f32();
  const int32_t* pt = targets.i32();
  for (int64_t t = 0; t < T; ++t) {
    shift[static_cast<size_t>(t)] = *std::max_element(pl + t * V, pl + (t + 1) * V);
  }
  tp.all_reduce(shift.data(), T, core::Dtype::kF32);
  for (int64_t t = 0; t < T; ++t) {
    const float c = shift[static_cast<size_t>(t)] / static_cast<float>(tp.size());
    shift[static_cast<size_t>(t)] = c;
    double acc = 0;
    for (int64_t i = 0; i < V; ++i) acc += std::exp(static_cast<double>(pl[t * V + i] - c));
    sum[static_cast<size_t>(t)] = static_cast<float>(acc);
    const int64_t local = pt[t] - vocab_begin;
    if (pt[t] >= 0 && local >= 0 && local < V)
      target_logit[static_cast<size_t>(t)] = pl[t * V + local];
  }
  tp.all_reduce(sum.data(), T, core::Dtype::kF32);
  tp.all_reduce(target_logit.data(), T, core::Dtype::kF32);
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    const size_t ts = static_cast<size_t>(t);
    // A non-finite log-sum-exp (diverged weights) makes the loss non-finite; the trainer then
    // skips the step on every rank (train::Trainer::Step), so it is an outcome, not a crash.
    lse.f32()[t] = shift[ts] + static_cast<float>(std::log(static_cast<double>(sum[ts])));
    if (pt[t] >= 0) loss += static_cast<double>(lse.f32()[t]) - target_logit[ts];
  }
  return loss;
}

// dlogits = scale * (softmax - onehot(target)) on this rank's vocab rows; 0 for ignored targets.
// In place is fine (dlogits may alias logits).
void VocabParallelXentBackward(Tensor dlogits, ConstTensor logits, ConstTensor lse,
                               ConstTensor targets, float scale, int64_t vocab_begin) {
  const int64_t T = targets.numel(), V = logits.dim(1);
  const float* pl = logits.f32();
  float* pd = dlogits.f32();
  for (int64_t t = 0; t < T; ++t) {
    const int32_t target = targets.i32()[t];
    if (target < 0) {
      std::fill(pd + t * V, pd + (t + 1) * V, 0.0f);
      continue;
    }
    const float l = lse.f32()[t];
    for (int64_t i = 0; i < V; ++i) pd[t * V + i] = scale * std::exp(pl[t * V + i] - l);
    const int64_t local = target - vocab_begin;
    if (local >= 0 && local < V) pd[t * V + local] -= scale;
  }
}

}  // namespace

Head::Head(ParamSet& params, int64_t hidden, int64_t vocab, double norm_eps, ParamId tied_weight,
           const ShardConfig& shard)
    : params_(params),
      tp_(*shard.tp_comm),
      ends_(*shard.tp_comm, shard.sequence_parallel),
      norm_(params, "final_norm.weight", hidden, norm_eps),
      hidden_(hidden),
      vocab_local_(vocab / shard.tp_size),
      vocab_begin_(shard.tp_rank * vocab_local_) {
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
  const int64_t T = targets.numel();
  PM_CHECK(x.dim(0) == ends_.LocalRows(T)) << "head input " << x.shape().ToString();
  s.xn = NewBuffer(ctx, ctx.RoundedStashTag(core::MemTag::kActivations), {x.dim(0), hidden_});
  norm_.Forward(s.xn.view(), s.norm, x, ctx);
  s.logits = NewBuffer(ctx, core::MemTag::kLogits, {T, vocab_local_});
  s.lse = NewBuffer(ctx, core::MemTag::kLogits, {T});
  core::Buffer gathered;
  kernels::linear_forward(s.logits.view(), ends_.Gather(ctx, s.xn.view(), gathered),
                          params_.weight(weight_));
  return VocabParallelXentForward(tp_, s.lse.view(), s.logits.view(), targets, vocab_begin_);
}

void Head::Backward(Tensor dx, ConstTensor x, ConstTensor targets, Saved& s, float loss_scale,
                    const LayerContext& ctx) const {
  Tensor dlogits = s.logits.view();  // in place
  VocabParallelXentBackward(dlogits, s.logits.view(), s.lse.view(), targets, loss_scale,
                            vocab_begin_);
  {
    core::Buffer gathered;  // SP: the stash holds this rank's rows of xn only
    WeightGradGemm(ctx, params_.grad(weight_), dlogits, ends_.Gather(ctx, s.xn.view(), gathered));
  }
  core::Buffer dxn = NewBuffer(ctx, core::MemTag::kOther, {x.dim(0), hidden_}), partial;
  const Tensor dxn_full = ends_.PartialFor(ctx, dxn.view(), partial);
  kernels::linear_backward_input(dxn_full, dlogits, params_.weight(weight_));
  ends_.Sum(dxn.view(), dxn_full);  // the LM head is column-parallel over the vocab
  norm_.Backward(dx, dxn.view(), x, s.norm);
  s = Saved();
}

}  // namespace pentamesh::model

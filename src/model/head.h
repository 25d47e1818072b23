// The last stage's head: final RMSNorm, LM projection (vocab-parallel rows of (V, H); tied heads
// reuse the embedding table) and softmax cross-entropy normalised by the step's global valid
// tokens, vocab-parallel over shard.tp_comm (three T-value all-reduces forward, the input grad's
// all-reduce backward; model/regions.h). Saved: the normalised input, the logits (tag kLogits) and
// their log-sum-exp. Sequence parallel: x, xn and dx hold this rank's T/tp rows; the LM head's
// input is all-gathered forward (and again for the weight grad in backward), its input grad
// reduce-scattered; the cross-entropy runs over all T tokens on every tp rank.
#pragma once

#include <string>

#include "model/layer_common.h"
#include "model/norm.h"
#include "model/param_set.h"
#include "model/regions.h"

namespace pentamesh::model {

class Head {
 public:
  struct Saved {
    RmsNorm::Saved norm;
    core::Buffer xn;      // (T, H) (T/tp rows under SP)
    core::Buffer logits;  // (T, V/tp)
    core::Buffer lse;     // (T)
  };
  // tied_weight >= 0: use that (V, H) parameter (the embedding) instead of an own lm_head.
  Head(ParamSet& params, int64_t hidden, int64_t vocab, double norm_eps, ParamId tied_weight,
       const ShardConfig& shard);
  // Returns the summed cross-entropy of the valid targets (targets < 0 are ignored).
  double Forward(Saved& saved, ConstTensor x, ConstTensor targets, const LayerContext& ctx) const;
  // dx (x's rows, H) is written. loss_scale = 1 / global valid tokens of the step.
  void Backward(Tensor dx, ConstTensor x, ConstTensor targets, Saved& saved, float loss_scale,
                const LayerContext& ctx) const;
  ParamId norm_weight() const { return norm_.weight(); }

 private:
  ParamSet& params_;
  comm::Communicator& tp_;
  TpBlockEnds ends_;
  RmsNorm norm_;
  ParamId weight_;
  int64_t hidden_, vocab_local_, vocab_begin_;
};

}  // namespace pentamesh::model

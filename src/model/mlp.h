// SwiGLU feed-forward: y = (silu(x W1^T) * (x W3^T)) W2^T. W1, W3 column-parallel (F/tp rows),
// W2 row-parallel; with tp > 1 the same copy_to_tp / reduce_from_tp pair as attention wraps it
// (gather_seq_tp / scatter_seq_tp under sequence parallelism: x, y, dx, dy then hold T/tp rows).
// Saved: h1 = x W1^T, h3 = x W3^T and g = silu(h1) * h3, each (T, F) (the cost model's 3 F per
// token of a SwiGLU FFN).
// The same free functions compute one expert of an MoE layer on its gathered rows.
#pragma once

#include <string>

#include "model/layer_common.h"
#include "model/param_set.h"
#include "model/regions.h"

namespace pentamesh::model {

// y (N, H) from x (N, H) through one SwiGLU FFN; h1, h3, g (N, F) are written for backward.
void SwiGluFfnForward(Tensor y, Tensor h1, Tensor h3, Tensor g, ConstTensor x, ConstTensor w1,
                      ConstTensor w3, ConstTensor w2, const LayerContext& ctx);
// dx (N, H) is written (or accumulated when accumulate_dx); dw1, dw3, dw2 accumulate.
void SwiGluFfnBackward(Tensor dx, Tensor dw1, Tensor dw3, Tensor dw2, ConstTensor dy, ConstTensor x,
                       ConstTensor h1, ConstTensor h3, ConstTensor g, ConstTensor w1,
                       ConstTensor w3, ConstTensor w2, const LayerContext& ctx,
                       bool accumulate_dx = false);

class Mlp {
 public:
  struct Saved {
    core::Buffer h1, h3, g;  // (T, F/tp)
  };
  Mlp(ParamSet& params, const std::string& prefix, int64_t hidden, int64_t ffn_hidden,
      double std_out, const ShardConfig& shard);
  void Forward(Tensor y, Saved& saved, ConstTensor x, const LayerContext& ctx,
               core::MemTag tag = core::MemTag::kActivations) const;
  void Backward(Tensor dx, ConstTensor dy, ConstTensor x, Saved& saved, const LayerContext& ctx,
                bool accumulate_dx = false) const;
  // The block without its tp ends, for a caller that gathers and sums itself (the MoE's shared
  // experts under SP): x (T, H) all rows in, this rank's partial sum of y (T, H) out; backward
  // writes this rank's partial dx (T, H) from all rows of dy and x. No communication.
  void ForwardPartial(Tensor y_partial, Saved& saved, ConstTensor x, const LayerContext& ctx,
                      core::MemTag tag) const;
  void BackwardPartial(Tensor dx_partial, ConstTensor dy, ConstTensor x, Saved& saved,
                       const LayerContext& ctx) const;

 private:
  ParamSet& params_;
  TpBlockEnds ends_;
  int64_t ffn_local_;
  ParamId w1_, w3_, w2_;
};

}  // namespace pentamesh::model

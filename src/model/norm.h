// RMSNorm layer over the hidden dim. Replicated on every rank (never sharded).
// Saved: rstd (T). Backward accumulates the weight grad. Under sequence parallelism each tp rank
// normalises its own T/tp rows, so the weight grads are partial sums over tp: Stage sums them
// once per step (Stage::ReduceSequenceParallelGrads), or, when ZeRO-2/3 hooks hold the grads per
// layer, per layer and micro-batch in backward (Stage::ReduceNormGrads).
#pragma once

#include <string>

#include "model/layer_common.h"
#include "model/param_set.h"

namespace pentamesh::model {

class RmsNorm {
 public:
  struct Saved {
    core::Buffer rstd;  // (T)
  };
  RmsNorm(ParamSet& params, const std::string& name, int64_t hidden, double eps);
  // y (T, H) from x (T, H).
  void Forward(Tensor y, Saved& saved, ConstTensor x, const LayerContext& ctx,
               core::MemTag tag = core::MemTag::kActivations) const;
  // dx (T, H) is written.
  void Backward(Tensor dx, ConstTensor dy, ConstTensor x, const Saved& saved) const;
  ParamId weight() const { return weight_; }

 private:
  ParamSet& params_;
  ParamId weight_;
  int64_t hidden_;
  float eps_;
};

}  // namespace pentamesh::model

#include "model/embedding.h"

#include <algorithm>

#include "model/regions.h"

namespace pentamesh::model {

Embedding::Embedding(ParamSet& params, const std::string& name, int64_t vocab, int64_t hidden,
                     const ShardConfig& shard)
    : params_(params),
      ends_(*shard.tp_comm, shard.sequence_parallel),
      vocab_(vocab),
      hidden_(hidden) {
  weight_ =
      params.Add(name, {vocab, hidden},
                 {.dim = 0, .axis = MeshAxis::kTp, .size = shard.tp_size, .rank = shard.tp_rank},
                 {.kind = InitKind::kNormal, .std = 0.02}, /*weight_decay=*/true);
  vocab_local_ = vocab / shard.tp_size;
  vocab_begin_ = shard.tp_rank * vocab_local_;
}

void Embedding::Forward(Tensor y, ConstTensor tokens, const LayerContext& ctx) const {
  const int64_t T = tokens.numel();
  PM_CHECK(y.numel() == ends_.LocalRows(T) * hidden_) << "embedding y " << y.shape().ToString();
  ConstTensor w = params_.weight(weight_);
  core::Buffer partial;
  const Tensor y_full = ends_.PartialFor(ctx, y, partial);
  float* py = y_full.f32();
  for (int64_t t = 0; t < T; ++t) {
    PM_CHECK(tokens.i32()[t] >= 0 && tokens.i32()[t] < vocab_)
        << "token " << tokens.i32()[t] << " outside vocab " << vocab_;
    const int64_t row = tokens.i32()[t] - vocab_begin_;
    float* dst = py + t * hidden_;
    if (row < 0 || row >= vocab_local_) {
      std::fill(dst, dst + hidden_, 0.0f);
    } else if (w.dtype() == core::Dtype::kF32) {
      std::copy(w.f32() + row * hidden_, w.f32() + (row + 1) * hidden_, dst);
    } else {
      core::Bf16ToFloat(dst, w.bf16() + row * hidden_, hidden_);
    }
  }
  ends_.Sum(y, y_full);  // rows outside every other shard were zeros
  RoundActivation(ctx, y);
}

void Embedding::Backward(ConstTensor dy_rows, ConstTensor tokens, const LayerContext& ctx) const {
  core::Buffer gathered;
  const ConstTensor dy = ends_.Gather(ctx, dy_rows, gathered);
  Tensor g = params_.grad(weight_);
  for (int64_t t = 0; t < tokens.numel(); ++t) {
    const int64_t row = tokens.i32()[t] - vocab_begin_;
    if (row < 0 || row >= vocab_local_) continue;
    float* dst = g.f32() + row * hidden_;
    const float* src = dy.f32() + t * hidden_;
    for (int64_t i = 0; i < hidden_; ++i) dst[i] += src[i];
  }
}

}  // namespace pentamesh::model

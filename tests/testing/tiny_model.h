// Test helpers for the engine-size specs of testing/tiny_specs.h (TinyDense, TinyMoe): random
// token batches, and one forward+backward over a batch split into micro-batches (loss normalised
// by the batch's valid tokens).
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "model/stage.h"
#include "spec/model_spec.h"
#include "testing/tiny_specs.h"

namespace pentamesh::testing {

struct Batch {
  std::vector<int32_t> tokens{}, targets{};  // (B * S)
  int64_t batch = 0, seq = 0;
};

inline Batch RandomBatch(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed,
                         bool with_ignored = true) {
  Batch b{.batch = batch, .seq = seq};
  for (int64_t i = 0; i < batch * seq; ++i) {
    b.tokens.push_back(static_cast<int32_t>(
        core::CounterRng::Bits(seed, 1, static_cast<uint64_t>(i)) % static_cast<uint64_t>(vocab)));
    b.targets.push_back(static_cast<int32_t>(
        core::CounterRng::Bits(seed, 2, static_cast<uint64_t>(i)) % static_cast<uint64_t>(vocab)));
  }
  if (with_ignored) b.targets[1] = -1;
  return b;
}

struct StepResult {
  double loss = 0;  // cross-entropy / valid tokens + aux losses
  model::MoeStats moe;
};

// Zeroes grads, runs forward+backward over `microbatches` equal slices of the batch.
// keep_logits: runs backward only after copying the logits of micro-batch 0 into *logits.
inline StepResult ForwardBackward(model::Stage& stage, model::ParamSet& params, const Batch& b,
                                  int64_t microbatches = 1, std::vector<float>* logits = nullptr) {
  params.ZeroGrads();
  int64_t valid = 0;
  for (int32_t t : b.targets) valid += t >= 0 ? 1 : 0;
  const int64_t seqs = b.batch / microbatches, T = seqs * b.seq;
  StepResult r;
  double ce = 0;
  for (int64_t mb = 0; mb < microbatches; ++mb) {
    model::MicroBatch m{
        .tokens = core::ConstTensor(
            core::Tensor(const_cast<int32_t*>(b.tokens.data()) + mb * T, core::Dtype::kI32, {T})),
        .targets = core::ConstTensor(
            core::Tensor(const_cast<int32_t*>(b.targets.data()) + mb * T, core::Dtype::kI32, {T})),
        .dims = {.batch = seqs, .seq = b.seq},
        .loss_scale = 1.0f / static_cast<float>(valid),
        .aux_scale = 1.0f / static_cast<float>(microbatches)};
    model::StageForward f = stage.Forward(mb, m, {}, {});
    ce += f.loss_sum;
    r.moe.Add(f.moe);
    if (logits && mb == 0) {
      core::ConstTensor l = stage.logits(mb);
      logits->assign(l.f32(), l.f32() + l.numel());
    }
    stage.Backward(mb, {}, {});
  }
  r.loss = ce / static_cast<double>(valid) + r.moe.aux_loss + r.moe.z_loss;
  return r;
}

// Forward only (the stash is dropped): the loss as ForwardBackward computes it.
inline double LossOnly(model::Stage& stage, const Batch& b) {
  int64_t valid = 0;
  for (int32_t t : b.targets) valid += t >= 0 ? 1 : 0;
  const int64_t T = b.batch * b.seq;
  model::MicroBatch m{.tokens = core::ConstTensor(core::Tensor(
                          const_cast<int32_t*>(b.tokens.data()), core::Dtype::kI32, {T})),
                      .targets = core::ConstTensor(core::Tensor(
                          const_cast<int32_t*>(b.targets.data()), core::Dtype::kI32, {T})),
                      .dims = {.batch = b.batch, .seq = b.seq}};
  model::StageForward f = stage.Forward(999, m, {}, {});
  stage.Drop(999);
  return f.loss_sum / static_cast<double>(valid) + f.moe.aux_loss + f.moe.z_loss;
}

}  // namespace pentamesh::testing

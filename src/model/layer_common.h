// What every layer shares: micro-batch dims, the per-call context (allocator, numerics, loss
// scales) and small helpers to allocate tagged activations and round them in bf16 mode.
// Shape legend used by all layer files:
//   B = micro-batch sequences, S = sequence length, T = B*S tokens, H = hidden, V = vocab,
//   A = query heads, K = kv heads, D = head dim, F = FFN hidden, E = experts, Fe = expert FFN,
//   N = routed (token, expert) assignments. Local shapes divide A, K, F by tp and E by ep.
#pragma once

#include <cstdint>
#include <vector>

#include "core/allocator.h"
#include "core/bf16.h"
#include "core/tensor.h"

namespace pentamesh::model {

using core::ConstTensor;
using core::Tensor;

struct Dims {
  int64_t batch = 0, seq = 0;
  int64_t tokens() const { return batch * seq; }
};

struct LayerContext {
  core::Allocator* alloc = nullptr;
  bool bf16 = false;       // round activations to bf16 values as they are produced
  float aux_scale = 1.0f;  // weight of this micro-batch's auxiliary (MoE) losses in the step loss
  // Tag for a stash buffer holding bf16-rounded activations: in bf16 mode the fp32 buffer is a
  // transient working copy (kOther) until CompactToBf16 moves it into kActivations.
  core::MemTag RoundedStashTag(core::MemTag tag) const {
    return bf16 && tag == core::MemTag::kActivations ? core::MemTag::kOther : tag;
  }
};

inline core::Buffer NewBuffer(const LayerContext& ctx, core::MemTag tag, core::Shape shape) {
  return core::Buffer(*ctx.alloc, tag, core::Dtype::kF32, shape);
}

// In bf16 mode activations are rounded to bf16 values (round-to-nearest-even) when produced.
inline void RoundActivation(const LayerContext& ctx, Tensor t) {
  if (ctx.bf16) core::RoundBf16InPlace(t.f32(), t.numel());
}

// bf16 stash storage. In bf16 mode a layer's stash is produced in fp32 buffers holding values
// already rounded to bf16; after the layer's forward, Compact moves each into a bf16 kActivations
// buffer (lossless, half the bytes), and before its backward Expand restores an fp32 working
// copy (tag kOther, one layer at a time). No-ops on empty or already converted buffers.
inline void CompactToBf16(core::Buffer& b) {
  if (b.empty() || b.dtype() != core::Dtype::kF32) return;
  core::Buffer out(*b.allocator(), core::MemTag::kActivations, core::Dtype::kBF16,
                   b.view().shape());
  core::Bf16FromFloat(out.view().bf16(), b.f32(), b.view().numel());
  b = std::move(out);
}
inline void ExpandToF32(core::Buffer& b) {
  if (b.empty() || b.dtype() != core::Dtype::kBF16) return;
  core::Buffer out(*b.allocator(), core::MemTag::kOther, core::Dtype::kF32, b.view().shape());
  core::Bf16ToFloat(out.f32(), b.view().bf16(), b.view().numel());
  b = std::move(out);
}

// A small weight (a norm's H values) as fp32, whatever its stored dtype.
inline std::vector<float> WidenToF32(ConstTensor w) {
  std::vector<float> out(static_cast<size_t>(w.numel()));
  if (w.dtype() == core::Dtype::kF32) {
    std::copy(w.f32(), w.f32() + w.numel(), out.begin());
  } else {
    core::Bf16ToFloat(out.data(), w.bf16(), w.numel());
  }
  return out;
}

// Rows [begin, end) of a stacked weight (E, R, C) as an (R, C) matrix of expert e.
inline ConstTensor ExpertSlice(ConstTensor stacked, int64_t e) {
  const int64_t rows = stacked.dim(1), cols = stacked.dim(2);
  return stacked.Rows(e, e + 1).Reshape({rows, cols});
}
inline Tensor ExpertSlice(Tensor stacked, int64_t e) {
  const int64_t rows = stacked.dim(1), cols = stacked.dim(2);
  return stacked.Rows(e, e + 1).Reshape({rows, cols});
}

}  // namespace pentamesh::model

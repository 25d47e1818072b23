// What every layer shares: micro-batch dims, the per-call context (allocator, numerics, loss
// scales) and small helpers to allocate tagged activations and round them in bf16 mode.
// Shape legend used by all layer files:
//   B = micro-batch sequences, S = sequence length, T = B*S tokens, H = hidden, V = vocab,
//   A = query heads, K = kv heads, D = head dim, F = FFN hidden, E = experts, Fe = expert FFN,
//   N = routed (token, expert) assignments. Local shapes divide A, K, F by tp and E by ep.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/bf16.h"
#include "core/check.h"
#include "core/tensor.h"
#include "kernels/cpu/matmul.h"

namespace pentamesh::model {

using core::ConstTensor;
using core::Tensor;

struct Dims {
  int64_t batch = 0, seq = 0;
  int64_t tokens() const { return batch * seq; }
};

class DeferredWeightGrads;

struct LayerContext {
  core::Allocator* alloc = nullptr;
  // Zero-bubble split backward (B then W): when set, layers hand their weight-gradient GEMMs to
  // it instead of running them (see WeightGradGemm); null runs the full backward.
  DeferredWeightGrads* deferred = nullptr;
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

// The weight half of a split backward (zero-bubble "W"): the GEMMs dw += dy^T @ x that B
// deferred, with copies of their dy and x (tag kActivations: they are what W needs stashed).
// Norm and embedding weight grads (O(T*H) element-wise work) stay in B.
// Invariant: Run() applies every recorded GEMM exactly once, in recording order, into the same
// grad tensors the full backward writes, so B + W == the full backward up to the fp32 summation
// order of the grad accumulation.
class DeferredWeightGrads {
 public:
  void Add(const LayerContext& ctx, Tensor dw, ConstTensor dy, ConstTensor x) {
    PM_CHECK(dy.dtype() == core::Dtype::kF32 && x.dtype() == core::Dtype::kF32)
        << "deferred weight grad needs fp32 dy and x";
    Item item{dw, NewBuffer(ctx, core::MemTag::kActivations, dy.shape()), nullptr, x.f32()};
    std::copy(dy.f32(), dy.f32() + dy.numel(), item.dy.f32());
    // Consecutive GEMMs on the same input (wq, wk, wv; w1, w3) share one copy of it.
    if (!items_.empty() && items_.back().x_source == x.f32() &&
        items_.back().x->view().numel() == x.numel()) {
      item.x = items_.back().x;
    } else {
      item.x =
          std::make_shared<core::Buffer>(NewBuffer(ctx, core::MemTag::kActivations, x.shape()));
      std::copy(x.f32(), x.f32() + x.numel(), item.x->f32());
    }
    items_.push_back(std::move(item));
  }
  void Run() {
    for (Item& item : items_)
      kernels::linear_backward_weight(item.dw, item.dy.view(), item.x->view());
    items_.clear();
  }
  bool empty() const { return items_.empty(); }

 private:
  struct Item {
    Tensor dw;
    core::Buffer dy;
    std::shared_ptr<core::Buffer> x;
    const float* x_source = nullptr;  // where x was copied from (sharing test only)
  };
  std::vector<Item> items_;
};

// dw += dy^T @ x now, or recorded for W when the context defers weight gradients.
inline void WeightGradGemm(const LayerContext& ctx, Tensor dw, ConstTensor dy, ConstTensor x) {
  if (ctx.deferred) {
    ctx.deferred->Add(ctx, dw, dy, x);
  } else {
    kernels::linear_backward_weight(dw, dy, x);
  }
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

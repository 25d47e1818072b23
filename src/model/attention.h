// Causal self-attention with RoPE and grouped-query heads.
//   q = x Wq^T, k = x Wk^T, v = x Wv^T (column-parallel: this rank's A/tp and K/tp heads),
//   rope(q), rope(k), o = flash_attention(q, k, v), y = o Wo^T (row-parallel over A/tp * D).
// The input enters through copy_to_tp and y leaves through reduce_from_tp (model/regions.h) on
// config.shard.tp_comm; with tp = 1 both are the identity. Sequence parallel (shard.
// sequence_parallel): x, y, dx and dy hold this rank's T/tp rows, the input is all-gathered
// (again in backward) and y reduce-scattered (model/regions.h, TpBlockEnds); dims stay the full
// micro-batch's.
// Context parallel (config.cp set, size > 1): x holds this rank's two chunks of each sequence
// (data::Sampler's 2 x CP order, dims.seq = S / cp local rows); RoPE uses the rows' GLOBAL
// positions and the attention core is model/cp_attention.h (ring or Ulysses, config.cp_kind).
// Saved: q, k (after RoPE), v, o and the log-sum-exp; never the S x S scores. Under selective
// recomputation nothing is saved and Backward recomputes them from the layer input.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/rope.h"
#include "model/cp_attention.h"
#include "model/layer_common.h"
#include "model/param_set.h"
#include "model/regions.h"
#include "spec/model_spec.h"

namespace pentamesh::model {

struct AttentionConfig {
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double rope_theta = 10000.0;
  spec::RopeScaling rope_scaling{};  // applied by RopeInverseFrequencies
  int64_t max_seq = 0;
  double std_out = 0.02;  // init std of Wo
  ShardConfig shard{};
  comm::Communicator* cp = nullptr;  // the cp group; null or size 1 = no context parallelism
  spec::CpKind cp_kind = spec::CpKind::kRing;
};

class Attention {
 public:
  struct Saved {
    core::Buffer q;       // (T, A, D) after RoPE
    core::Buffer k;       // (T, K, D) after RoPE
    core::Buffer v;       // (T, K, D)
    core::Buffer o;       // (T, A, D)
    core::Buffer lse;     // (B, A, S)
    CpAttentionSaved cp;  // context parallel: the attention core's stash instead of lse
    bool empty() const { return o.empty(); }  // Ulysses frees q, k, v (its core keeps its own)
  };

  Attention(ParamSet& params, const std::string& prefix, const AttentionConfig& config);
  // y (T, H) (T/tp rows under SP). keep_internals = false (selective recompute) leaves `saved`
  // empty.
  void Forward(Tensor y, Saved& saved, ConstTensor x, Dims dims, const LayerContext& ctx,
               bool keep_internals) const;
  // Generation (model/kv_cache.h): y (N, H) for the N new tokens x (N, H) of one sequence at
  // positions pos0 .. pos0 + N - 1. Writes their keys (after RoPE) and values into rows
  // [pos0, pos0 + N) of this layer's cache k_cache, v_cache (capacity, K/tp, D) and attends over
  // rows [0, pos0 + N) (kernels::attention_cached); y leaves through reduce_from_tp. No stash.
  // REQUIRES: no sequence or context parallelism (a decode step has one token).
  void ForwardCached(Tensor y, ConstTensor x, Tensor k_cache, Tensor v_cache, int64_t pos0,
                     const LayerContext& ctx) const;
  // dx (T, H) is written; weight grads accumulate.
  void Backward(Tensor dx, ConstTensor dy, ConstTensor x, Saved& saved, Dims dims,
                const LayerContext& ctx) const;

 private:
  // Fills q, k, v, o, lse of `s` (buffers of `tag`) from x.
  void Internals(Saved& s, ConstTensor x, Dims dims, const LayerContext& ctx,
                 core::MemTag tag) const;
  bool context_parallel() const { return config_.cp != nullptr && config_.cp->size() > 1; }
  // The attention kernels' shapes of this rank's heads: the whole sequence under cp (CpDims), the
  // local rows otherwise (LocalDims).
  CpAttentionDims CpDims(Dims dims) const;
  kernels::AttentionDims LocalDims(Dims dims) const;
  // RoPE (or its inverse) of x (T, N, D) at the rows' global positions (chunks under cp).
  void Rope(Tensor x, Dims dims, bool inverse) const;
  ParamSet& params_;
  AttentionConfig config_;
  TpBlockEnds ends_;
  int64_t heads_local_, kv_heads_local_;
  ParamId wq_, wk_, wv_, wo_;
  kernels::RopeTable rope_;
};

}  // namespace pentamesh::model

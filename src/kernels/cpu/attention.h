// Causal self-attention with grouped-query heads, FlashAttention-2 style on CPU: queries and keys
// are processed in tiles with an online softmax, and only the log-sum-exp per (query, head) is kept
// for backward, which recomputes the scores tile by tile.
// Invariant: no buffer of S x S scores is ever allocated (memory is O(S * D) per head), matching
// the cost model's flash-attention case.
//
// B = batch, S = sequence, A = query heads, K = kv heads (A % K == 0), D = head dim.
// q, o: (B*S, A, D);  k, v: (B*S, K, D);  lse: (B, A, S).  Query head h reads kv head h / (A/K).
#pragma once

#include "core/tensor.h"

namespace pentamesh::kernels {

using core::ConstTensor;
using core::Tensor;

struct AttentionDims {
  int64_t batch, seq, heads, kv_heads, head_dim;
};

void attention_forward(Tensor o, Tensor lse, ConstTensor q, ConstTensor k, ConstTensor v,
                       const AttentionDims& dims);
// dq, dk, dv are written (not accumulated).
void attention_backward(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, ConstTensor q,
                        ConstTensor k, ConstTensor v, ConstTensor o, ConstTensor lse,
                        const AttentionDims& dims);

// Attention of one sequence's new queries against a key/value cache (generation, model/
// kv_cache.h): q, o (N, A, D) are the queries at positions pos0 .. pos0 + N - 1; k, v hold at
// least pos0 + N cached rows (rows, K, D). Query i attends keys [0, pos0 + i] (causal with the
// cache offset), with the same scale and softmax as attention_forward.
struct CachedAttentionDims {
  int64_t queries, pos0, heads, kv_heads, head_dim;
};
void attention_cached(Tensor o, ConstTensor q, ConstTensor k, ConstTensor v,
                      const CachedAttentionDims& dims);

}  // namespace pentamesh::kernels

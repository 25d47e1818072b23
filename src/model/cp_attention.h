// Context-parallel attention core: the causal GQA attention of q, k, v (after RoPE) when the
// sequence is split over the cp group with the 2 x CP chunk load balance (rank i holds chunks i
// and 2CP-1-i of every sequence, data::Sampler's order), in two variants (spec::CpKind):
//  - ring: K and V blocks travel around the cp ring; each rank attends its queries to the block
//    it holds, masked by GLOBAL positions, and merges partials with the online-softmax rule. The
//    next block's transfer overlaps the current block's compute (post_send before computing,
//    recv_tagged after). Backward passes K, V on the same ring with the partial dK, dV riding
//    one step behind (also overlapped: a step's contribution is computed while the accumulated
//    partial is in flight), so every gradient ends on its owner. Bytes per call: forward (cp-1)
//    K+V chunks, backward 2 (cp-1).
//  - ulysses: all-to-all from sequence-sharded to head-sharded (every rank then holds the whole
//    sequence for heads/cp query heads and kv_heads/cp kv heads), plain causal attention, and the
//    output back (heads -> sequence). Backward: dO in, dQ/dK/dV out.
// Invariant: outputs and gradients equal single-process attention over the whole sequence
// (up to fp32 summation order); bytes sent equal cost::CpTerms's cp_bytes_layer.
//
// Local shapes (L = 2 * chunk = S / cp rows per sequence, T = B * L):
//   q, o, dq: (T, A, D); k, v, dk, dv: (T, K, D); lse: (B, A, L) for ring.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/tensor.h"
#include "spec/layout.h"

namespace pentamesh::model {

struct CpAttentionDims {
  int64_t batch = 0, seq = 0;  // seq = GLOBAL sequence length (divisible by 2 cp)
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
};

// Global positions of the L = seq / cp local rows of cp rank `rank` (chunk rank, then chunk
// 2cp-1-rank). REQUIRES seq % (2 cp) == 0.
std::vector<int64_t> CpLocalPositions(int64_t seq, int cp, int rank);

// What forward keeps for backward. Ring: o and lse of the local queries. Ulysses: the
// head-sharded full-sequence q, k, v, o, lse (B*S, A/cp | K/cp, D).
struct CpAttentionSaved {
  core::Buffer q, k, v, o, lse;
};

// o (T, A, D) is written. `alloc` holds the saved buffers (tag kActivations) and the work and
// transfer buffers (kOther / kComm).
void CpAttentionForward(core::Tensor o, CpAttentionSaved& saved, core::ConstTensor q,
                        core::ConstTensor k, core::ConstTensor v, const CpAttentionDims& dims,
                        spec::CpKind kind, comm::Communicator& cp, core::Allocator& alloc);
// dq, dk, dv are written (not accumulated). Consumes `saved`.
void CpAttentionBackward(core::Tensor dq, core::Tensor dk, core::Tensor dv, core::ConstTensor dout,
                         core::ConstTensor q, core::ConstTensor k, core::ConstTensor v,
                         core::ConstTensor o, CpAttentionSaved& saved, const CpAttentionDims& dims,
                         spec::CpKind kind, comm::Communicator& cp, core::Allocator& alloc);

}  // namespace pentamesh::model

// Conjugate communication regions of tensor parallelism (Megatron's f / g pairs), each a pair of
// functions named by the direction of the pass. They act on the tp Communicator a layer was given
// at construction; a group of one rank makes every function a no-op, so layers call them
// unconditionally (never `if (tp > 1)`).
//
//   region            forward                     backward
//   copy_to_tp        identity                    all-reduce(dx) over tp
//   reduce_from_tp    all-reduce(y) over tp       identity
//   gather_seq_tp     all-gather on the seq dim   reduce-scatter on the seq dim   (SP)
//   scatter_seq_tp    reduce-scatter on seq       all-gather on seq               (SP)
//
// Invariant: a column-parallel layer's input passes copy_to_tp and the matching row-parallel
// layer's output passes reduce_from_tp, so the forward costs one all-reduce per block and the
// backward its conjugate; bytes are those cost::TpTerms predicts (docs/parallelism.md).
// Buffers are fp32 (T, H) activations, T = tokens of the micro-batch (T/tp rows under SP).
#pragma once

#include "comm/communicator.h"
#include "core/tensor.h"

namespace pentamesh::model {

// Forward of reduce_from_tp / backward of copy_to_tp: x <- sum over tp of x.
inline void AllReduceTp(comm::Communicator& tp, core::Tensor x) {
  tp.all_reduce(x.data(), x.numel(), core::Dtype::kF32);
}

// copy_to_tp: forward is the identity (nothing to call); backward sums the input grads.
inline void CopyToTpBackward(comm::Communicator& tp, core::Tensor dx) { AllReduceTp(tp, dx); }
// reduce_from_tp: forward sums the partial outputs; backward is the identity.
inline void ReduceFromTpForward(comm::Communicator& tp, core::Tensor y) { AllReduceTp(tp, y); }

// gather_seq_tp forward / scatter_seq_tp backward: full (T, H) <- the tp ranks' (T/tp, H) rows in
// rank order.
inline void GatherSeqTp(comm::Communicator& tp, core::Tensor full, core::ConstTensor local) {
  PM_CHECK(full.numel() == local.numel() * tp.size()) << "gather_seq_tp shapes";
  tp.all_gather(full.data(), local.f32(), local.numel(), core::Dtype::kF32);
}
// scatter_seq_tp forward / gather_seq_tp backward: local (T/tp, H) <- rows of this rank of the
// sum over tp of full (T, H).
inline void ScatterSeqTp(comm::Communicator& tp, core::Tensor local, core::ConstTensor full) {
  PM_CHECK(full.numel() == local.numel() * tp.size()) << "scatter_seq_tp shapes";
  tp.reduce_scatter(local.data(), full.f32(), local.numel(), core::Dtype::kF32);
}

}  // namespace pentamesh::model

// Conjugate communication regions of tensor parallelism (Megatron's f / g pairs). The halves that
// communicate are AllReduceTp (CopyToTpBackward, ReduceFromTpForward), GatherSeqTp and
// ScatterSeqTp, each the forward of one region and the backward of its conjugate; layers reach
// them through TpBlockEnds. They act on the tp Communicator a layer was given at construction; a
// group of one rank needs no communication, so layers call them unconditionally
// (never `if (tp > 1)`).
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
// Under sequence parallelism (TpBlockEnds with sp) the pair becomes gather_seq_tp /
// scatter_seq_tp, and the block's input rows are gathered once more in backward for the weight
// GEMMs (Megatron keeps only the T/tp-row shard in the stash).
// Buffers are fp32 (T, H) activations, T = tokens of the micro-batch (T/tp rows under SP): the
// rows of the flattened (B*S) token dim are cut into tp contiguous slices in rank order.
#pragma once

#include "comm/communicator.h"
#include "core/tensor.h"
#include "model/layer_common.h"

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

// The two ends of one tensor-parallel block (column-parallel GEMMs in, row-parallel GEMM out) in
// either mode; a layer holds one and never branches on the mode itself:
//                      no SP (T rows held)              SP (T/tp rows held)
//   Gather(x)          x itself                         all-gather of the ranks' rows
//   PartialFor(out)    out itself                       a (T, H) scratch of tag kComm
//   Sum(out, partial)  all-reduce in place              reduce-scatter of partial's rows
// Forward: x_full = Gather(x); ...; Sum(y, PartialFor(y)) (copy_to_tp / reduce_from_tp, or
// gather_seq_tp / scatter_seq_tp). Backward: dy_full = Gather(dy), x_full = Gather(x) again
// (SP: the stash holds the shard only), then Sum(dx, PartialFor(dx)) (the conjugates).
class TpBlockEnds {
 public:
  TpBlockEnds(comm::Communicator& tp, bool sequence_parallel)
      : tp_(tp), sp_(sequence_parallel && tp.size() > 1) {}
  bool sequence_parallel() const { return sp_; }
  // Rows this rank holds of a block input with `tokens` rows.
  int64_t LocalRows(int64_t tokens) const { return sp_ ? tokens / tp_.size() : tokens; }
  // The full (T, H) rows of x (x itself without SP); `gathered` holds them under SP.
  ConstTensor Gather(const LayerContext& ctx, ConstTensor x, core::Buffer& gathered) const {
    if (!sp_) return x;
    gathered = core::Buffer(*ctx.alloc, core::MemTag::kComm, core::Dtype::kF32,
                            {x.dim(0) * tp_.size(), x.numel() / x.dim(0)});
    GatherSeqTp(tp_, gathered.view(), x);
    return gathered.view();
  }
  // The full (T, H) tensor a row-parallel GEMM writes its partial sums of `out` into.
  Tensor PartialFor(const LayerContext& ctx, Tensor out, core::Buffer& partial) const {
    if (!sp_) return out;
    partial = core::Buffer(*ctx.alloc, core::MemTag::kComm, core::Dtype::kF32,
                           {out.dim(0) * tp_.size(), out.numel() / out.dim(0)});
    return partial.view();
  }
  // out <- this rank's rows of the sum over tp of `partial` (from PartialFor(out)).
  void Sum(Tensor out, ConstTensor partial) const {
    if (sp_) {
      ScatterSeqTp(tp_, out, partial);
    } else {
      PM_CHECK(out.f32() == partial.f32()) << "TpBlockEnds::Sum without SP sums in place";
      AllReduceTp(tp_, out);
    }
  }

 private:
  comm::Communicator& tp_;
  bool sp_;
};

}  // namespace pentamesh::model

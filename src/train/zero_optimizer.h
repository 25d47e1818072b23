// ZeroOptimizer: the data-parallel half of an optimizer step over a ParamSet's flat buffers:
// reduce the gradients over the gradient group (dp x cp), clip by the exact global norm, AdamW,
// and leave every rank with the same updated weights. ZeRO stages differ only in which ranges
// are reduced, kept and gathered (docs/parallelism.md):
//   0  all-reduce of the accumulated grads in buckets of bucket_elems; full AdamW state per rank
//   1  reduce-scatter of the grads; this rank updates its 1/dp range of the flat buffers with
//      Adam m/v of that range only; all-gather of the updated weights
//   2  as 1 (the engine accumulates micro-batch grads in the full flat buffer, so the full grad
//      buffer still exists during backward; the sharded grad is what the update reads)
//   3  not implemented yet: Create rejects it naming layout.zero
// Global-norm clipping is exact across all groups: each rank sums the squares of the gradient
// elements it alone is responsible for (its dp range, or dp rank 0 at stage 0; TP-sharded params
// on every tp rank, TP-replicated ones such as norms on tp rank 0 only) and one fp64 sum
// over `norm_group` (SumOverGroup) (the world, which is not one of the mesh's groups and so not in
// comm_bytes) gives the global sum. Invariant: with loss scales of 1 / global valid tokens, the
// update equals the single-process AdamWStep on the full-batch gradient up to fp32 summation order.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/status.h"
#include "model/param_set.h"
#include "train/optimizer.h"

namespace pentamesh::train {

struct ZeroConfig {
  int stage = 0;
  int64_t bucket_elems = int64_t{1} << 20;  // stage 0 all-reduce bucket
};

// Sum of `value` over the group's ranks, in rank order (an all-gather of the fp64 values): the
// same result on every member.
double SumOverGroup(comm::Communicator& group, double value);

class ZeroOptimizer {
 public:
  // The ParamSet layout a stage needs (pad to the dp size and no Adam state in the ParamSet for
  // stages >= 1), to pass to model::Model before Finalize.
  static model::ParamLayout ParamLayoutFor(int stage, int64_t grad_group_size);
  // Errors name layout.zero. REQUIRES: params finalized with ParamLayoutFor(stage, grad.size()).
  static core::Result<std::unique_ptr<ZeroOptimizer>> Create(
      model::ParamSet& params, core::Allocator& alloc, comm::Communicator& grad_group,
      comm::Communicator& norm_group, int64_t tp_rank, const ZeroConfig& zero,
      const AdamWConfig& adamw);

  // Reduces, clips, updates (step is 1-based) and gathers; returns the grad norm before
  // clipping. When that global norm is not finite, or loss_finite is false (the caller's loss,
  // which must be the same on every rank), nothing is updated: every rank skips together.
  double Step(double lr, int64_t step, bool loss_finite = true);
  int stage() const { return zero_.stage; }
  // This rank's range [begin, end) of the flat buffers (the whole buffer at stage 0).
  int64_t shard_begin() const { return begin_; }
  int64_t shard_end() const { return end_; }
  // Stages >= 1: Adam m and v of this rank's range (flat index shard_begin() + i), for
  // checkpoints. This rank's rank in the gradient group (dp x cp).
  core::Tensor shard_m() const { return m_.view(); }
  core::Tensor shard_v() const { return v_.view(); }
  int grad_rank() const { return grad_.rank(); }

 private:
  ZeroOptimizer(model::ParamSet& params, core::Allocator& alloc, comm::Communicator& grad_group,
                comm::Communicator& norm_group, int64_t tp_rank, const ZeroConfig& zero,
                const AdamWConfig& adamw);
  // Sum of squares of the elements of `g` (flat range [begin, begin + n)) this rank counts.
  double OwnedSquares(const float* g, int64_t begin, int64_t n) const;
  void UpdateShard(double lr, double grad_scale, int64_t step);

  model::ParamSet& params_;
  comm::Communicator& grad_;
  comm::Communicator& norm_;
  int64_t tp_rank_;
  ZeroConfig zero_;
  AdamWConfig adamw_;
  int64_t begin_ = 0, end_ = 0;
  core::Buffer grad_shard_, m_, v_;  // stages >= 1: this rank's range only
};

}  // namespace pentamesh::train

// ZeroOptimizer: the data-parallel half of an optimizer step over a ParamSet's flat buffers:
// reduce the gradients over the gradient group (dp x cp), clip by the exact global norm, AdamW,
// and leave every rank with the same updated weights. ZeRO stages differ only in which ranges
// are reduced, kept and gathered (docs/parallelism.md):
//   0  all-reduce of the accumulated grads in buckets of bucket_elems; full AdamW state per rank
//   1  reduce-scatter of the grads; this rank updates its 1/dp range of the flat buffers with
//      Adam m/v of that range only; all-gather of the updated weights
//   2  gradients sharded too: every layer (ParamSet unit, padded to the dp size) owns a 1/dp slice
//      per rank; around each layer's backward (ParamHooks) a transient full fp32 gradient buffer
//      of that layer (MemTag::kComm) is bound, then reduce-scattered and added into this rank's
//      sharded fp32 accumulator (MemTag::kGrads), once per micro-batch; the update then reads the
//      accumulator and the weights are all-gathered per layer. A zero-bubble B parks the buffer
//      (Park) and it is reduce-scattered after that micro-batch's W (FinishWeightGrads)
//   3  weights sharded too (ParamLayout::sharded_weights): each rank keeps its slice of every
//      layer; around every layer's forward and backward the layer's full weights are all-gathered
//      into a transient buffer (MemTag::kComm) and freed after, and gradients go as at ZeRO-2.
//      The update writes the slice in place (fp32) or rounds the fp32 master slice into it (bf16):
//      no all-gather at the step's end. Per micro-batch and layer: forward all-gather, backward
//      all-gather, reduce-scatter (cost::CommBytesForStage). A tied embedding is gathered twice
//      in forward (embedding, head), which the cost model does not count.
// Expert parallel (ZeroConfig::expert_grad_group, stages 1 to 3): the dense params shard over
// grad_group (dp x cp) and the routed experts' over expert-dp; each group's params are packed
// (the whole buffer at ZeRO-1, each unit at ZeRO-2) and reduce-scattered / all-gathered on their
// own group (PackedGroup; docs/zero-ep.md). At ZeRO-3 the ParamSet's weight slice holds the same
// packed shards, and each unit's dense and expert params are all-gathered over their own group.
// bf16 (stages >= 1): the fp32 master weights of this rank's slice live here (MemTag::kOptimizer);
// after the update they are rounded to bf16 into the slice of the bf16 weights, which are then
// all-gathered (2 bytes per element on the wire); the gradients stay fp32.
// Global-norm clipping is exact across all groups: each rank sums the squares of the gradient
// elements it alone is responsible for (its dp range, or dp rank 0 at stage 0; TP-sharded params
// on every tp rank, TP-replicated ones such as norms on tp rank 0 only) and one fp64 sum
// over `norm_group` (SumOverGroup) (the world, which is not one of the mesh's groups and so not in
// comm_bytes) gives the global sum. Invariant: with loss scales of 1 / global valid tokens, the
// update equals the single-process AdamWStep on the full-batch gradient up to fp32 summation order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/status.h"
#include "model/param_set.h"
#include "train/optimizer.h"

namespace pentamesh::train {

struct ZeroConfig {
  int stage = 0;
  int64_t bucket_elems = int64_t{1} << 20;  // stage 0 all-reduce bucket
  // Expert parallel (ep > 1): the expert-data-parallel group (mesh expert_dp). The experts'
  // params (sharded over ep) then form a second param group whose grads reduce over it, while
  // the dense params reduce over grad_group; each group's elements count once in the norm (on
  // its group's rank 0). Null: every param is dense. ZeRO-1 packs each group's params into one
  // buffer, ZeRO-2 and 3 each unit's, sharded over that group (ZeroOptimizer::PackedGroup).
  comm::Communicator* expert_grad_group = nullptr;
  // etp = 1: the expert shards are distinct across the tp ranks too (ep spans them), so they
  // count in the norm on every tp rank; otherwise experts are replicated over tp like a norm.
  bool experts_span_tp = false;
};

// Sum of `value` over the group's ranks, in rank order (an all-gather of the fp64 values): the
// same result on every member.
double SumOverGroup(comm::Communicator& group, double value);

class ZeroOptimizer : public model::ParamHooks {
 public:
  // The ParamSet layout a stage needs (pad to the dp size and no Adam state in the ParamSet for
  // stages >= 1), to pass to model::Model before Finalize.
  // expert_group (size 0: none): the expert-dp group, whose slice of the routed experts a ZeRO-3
  // ParamSet keeps.
  static model::ParamLayout ParamLayoutFor(int stage, int64_t grad_group_size,
                                           int64_t grad_group_rank = 0,
                                           model::GroupShape expert_group = {.size = 0, .rank = 0});
  // Errors name layout.zero. REQUIRES: params finalized with
  // ParamLayoutFor(stage, grad.size(), grad.rank()) and initialised (ParamSet::Init: the bf16
  // masters of the slice are recomputed from its seed).
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
  // (ZeRO-1: one contiguous range; ZeRO-2: the first unit's slice.)
  int64_t shard_begin() const { return segs_.front().flat_begin; }
  int64_t shard_end() const { return segs_.front().flat_begin + segs_.front().n; }
  // The hooks a Stage must call (ZeRO-2 and 3), or null.
  model::ParamHooks* hooks() { return zero_.stage >= 2 ? this : nullptr; }
  void Acquire(int32_t unit, model::Pass pass) override;
  void Release(int32_t unit, model::Pass pass) override;
  void Park(int32_t unit, int64_t mb_id) override;
  void FinishWeightGrads(int32_t unit, int64_t mb_id) override;
  // Stages >= 1, for checkpoints: Adam m and v of this rank's slice, this rank's rank in the
  // gradient group (dp x cp), the flat range [lo, hi) of parameter p this rank owns (empty when
  // none; one range, since a parameter lies in one unit), and pointers to p's element 0 in the
  // slice's m, v and fp32 master (valid only at the owned indices).
  core::Tensor shard_m() const { return m_.view(); }
  core::Tensor shard_v() const { return v_.view(); }
  int grad_rank() const { return grad_.rank(); }
  // Stage 0: whether this rank is the first of `p`'s grad group (the dense or, with ep > 1, the
  // expert group), i.e. the one replica that writes p's state to a checkpoint.
  bool FirstOfGradGroup(const model::ParamInfo& p) const { return GradGroupOf(p).rank() == 0; }
  std::pair<int64_t, int64_t> OwnedFlat(const model::ParamInfo& p) const;
  float* ParamM(const model::ParamInfo& p) const;
  float* ParamV(const model::ParamInfo& p) const;
  float* ParamMaster(const model::ParamInfo& p);
  // After the slice's masters were written (checkpoint restore): round (bf16) and all-gather the
  // weights, as after an update; every rank of the gradient group must call it.
  void SyncWeights() { GatherWeights(); }
  // Fault injection: makes this rank's gradient (or gradient slice) non-finite.
  void PoisonGrads();
  // The full fp32 master weights (numel_padded elements, in flat order), all-gathered over the
  // gradient group at stages >= 1: every rank of the group must call it. For tests and exports.
  std::vector<float> FullMaster();

 private:
  ZeroOptimizer(model::ParamSet& params, core::Allocator& alloc, comm::Communicator& grad_group,
                comm::Communicator& norm_group, int64_t tp_rank, const ZeroConfig& zero,
                const AdamWConfig& adamw);
  // A piece of this rank's slice: flat elements [flat_begin, flat_begin + n) are elements
  // [local, local + n) of the sharded buffers (grad accumulator, m, v, bf16 master).
  struct Segment {
    int64_t flat_begin = 0, n = 0, local = 0;
  };
  // With an expert group: the params reducing over one group (dense: grad_group, routed
  // experts: expert_grad_group), in flat order, packed into `padded` elements (numel rounded up
  // to the group size). Rank r of the group owns packed elements [r * shard, (r + 1) * shard),
  // which are elements [local, local + shard) of the sharded buffers (and at ZeRO-3 of the
  // ParamSet's weight slice); the segments of this rank are the flat pieces of that range
  // (model::PlanShards). unit: the ParamSet unit (-1 at ZeRO-1: the whole buffer).
  struct PackedGroup : model::ShardGroup {
    comm::Communicator* comm = nullptr;
  };
  // ZeRO-1: one dense and one expert group over the whole buffer; ZeRO-2/3 (per_unit): the two
  // of every ParamSet unit. Fills packed_, segs_ and shard_numel_.
  void BuildPackedGroups(bool per_unit);
  // Copies pg's packed elements (pg.numel, dtype size elem) to their runs in `flat`, whose
  // element 0 is flat index flat_first.
  static void Unpack(const PackedGroup& pg, const char* packed, char* flat, int64_t flat_first,
                     int64_t elem);
  // ZeRO-3: all-gathers a unit's full weights into unit_weights_[unit] (dense and expert params
  // over their groups with ep > 1).
  void GatherUnitWeights(int32_t unit);
  // ZeRO-1: packs the runs' grads, reduce-scatters each group into its part of grad_shard_.
  void ReduceScatterPacked();
  // Packs pg's runs of `grads` (flat elements from grads_first on) and reduce-scatters them into
  // out (pg.shard elements).
  void ReduceScatterGroup(const PackedGroup& pg, const float* grads, int64_t grads_first,
                          float* out);
  // All-gathers `flat` (dtype elements in flat order; this rank's segments hold its values) over
  // every packed group: afterwards every run of `flat` holds the group's values.
  void AllGatherPacked(void* flat, core::Dtype dtype);
  // Sum of squares of the elements of `g` (flat range [begin, begin + n)) this rank counts.
  double OwnedSquares(const float* g, int64_t begin, int64_t n) const;
  // Whether this rank counts `p`'s (reduced) grad elements in the norm at all.
  bool CountsParam(const model::ParamInfo& p) const;
  // The group a param's grad reduces over (the expert group for ep-sharded params).
  comm::Communicator& GradGroupOf(const model::ParamInfo& p) const;
  // Stage 0: the bucketed all-reduce of every param group's grads.
  void AllReduceGrads(float* grads);
  void UpdateShard(double lr, double grad_scale, int64_t step);
  void UpdateSegment(const Segment& seg, double lr, double grad_scale, int64_t step);
  // Stores the updated masters of this rank's slice into the weights and all-gathers them.
  void GatherWeights();
  float* MasterAt(const Segment& seg);
  // The segment of this rank's slice overlapping flat range [lo, hi), or null.
  const Segment* SegmentOf(int64_t lo, int64_t hi) const;

  model::ParamSet& params_;
  comm::Communicator& grad_;
  comm::Communicator& norm_;
  int64_t tp_rank_;
  ZeroConfig zero_;
  AdamWConfig adamw_;
  core::Allocator& alloc_;
  std::vector<Segment> segs_;        // ascending flat_begin
  std::vector<int32_t> unit_seg_;    // ZeRO-2: segment of each ParamSet unit
  std::vector<PackedGroup> packed_;  // ZeRO-1/2 with ep > 1: dense, then expert (per unit)
  int64_t shard_numel_ = 0;
  core::Buffer grad_shard_, m_, v_;         // stages >= 1: this rank's slice only
  core::Buffer master_;                     // bf16 stages >= 1: fp32 master of the slice
  std::vector<int> acquired_;               // ZeRO-2: Acquire count per unit
  std::vector<int> gathered_;               // ZeRO-3: Acquire count per unit (both passes)
  std::vector<core::Buffer> unit_weights_;  // ZeRO-3: gathered full weights per unit
  std::vector<core::Buffer> unit_grads_;    // ZeRO-2: bound full grads per unit
  // Zero-bubble: full grads of (unit, micro-batch) between its B (Park) and W (FinishWeightGrads).
  std::map<std::pair<int32_t, int64_t>, core::Buffer> parked_;
  // Releases the ZeRO-3 gathered weights of `unit` (the last of its nested Acquires); and for the
  // backward pass whether this was the last grads Acquire (the grads are then complete).
  bool ReleaseUnit(int32_t unit, model::Pass pass);
  // Reduce-scatters a unit's full grads `grads` and adds this rank's slice to the accumulator.
  void ReduceUnitGrads(int32_t unit, const float* grads);
};

}  // namespace pentamesh::train

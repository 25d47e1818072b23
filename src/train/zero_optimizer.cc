#include "train/zero_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/adamw.h"

namespace pentamesh::train {

double SumOverGroup(comm::Communicator& group, double value) {
  // The communicator reduces f32/i32/i64 only: gather the fp64 bit patterns as i64 and sum them
  // in rank order, which is also deterministic.
  std::vector<double> all(static_cast<size_t>(group.size()));
  std::memcpy(&all[static_cast<size_t>(group.rank())], &value, sizeof(double));
  double* base = all.data();
  group.all_gather(base, base + group.rank(), 1, core::Dtype::kI64);
  double sum = 0;
  for (double x : all) sum += x;
  return sum;
}

model::ParamLayout ZeroOptimizer::ParamLayoutFor(int stage, int64_t grad_group_size,
                                                 int64_t grad_group_rank,
                                                 model::GroupShape expert_group) {
  if (stage == 0) return {};
  return {.pad_multiple = grad_group_size,
          .optimizer_state = false,
          .unit_pad = stage >= 2,
          .sharded_grads = stage >= 2,
          .sharded_weights = stage >= 3,
          .shard_rank = stage >= 3 ? grad_group_rank : 0,
          .expert_pad_multiple = stage >= 3 ? expert_group.size : 0,
          .expert_shard_rank = stage >= 3 ? expert_group.rank : 0};
}

core::Result<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::Create(
    model::ParamSet& params, core::Allocator& alloc, comm::Communicator& grad_group,
    comm::Communicator& norm_group, int64_t tp_rank, const ZeroConfig& zero,
    const AdamWConfig& adamw) {
  if (zero.stage < 0 || zero.stage > 3) {
    return core::Status::Error(
        fmt::format("layout.zero: {} is not a ZeRO stage (0, 1, 2 or 3)", zero.stage));
  }
  if (zero.bucket_elems <= 0) return core::Status::Error("zero.bucket_elems: must be positive");
  PM_CHECK(params.finalized()) << "ZeroOptimizer before ParamSet::Finalize";
  const comm::Communicator* expert = zero.expert_grad_group;
  const model::ParamLayout want =
      ParamLayoutFor(zero.stage, grad_group.size(), grad_group.rank(),
                     expert ? model::GroupShape{expert->size(), expert->rank()}
                            : model::GroupShape{.size = 0, .rank = 0});
  const model::ParamLayout& got = params.layout();
  PM_CHECK(got.optimizer_state == want.optimizer_state && got.unit_pad == want.unit_pad &&
           got.sharded_grads == want.sharded_grads && got.sharded_weights == want.sharded_weights &&
           got.shard_rank == want.shard_rank && params.numel_padded() % want.pad_multiple == 0)
      << "ParamSet not laid out for ZeRO-" << zero.stage;
  PM_CHECK(got.expert_pad_multiple == want.expert_pad_multiple &&
           got.expert_shard_rank == want.expert_shard_rank)
      << "ParamSet's expert slice does not match the expert group (ZeRO-" << zero.stage << ")";
  return std::unique_ptr<ZeroOptimizer>(
      new ZeroOptimizer(params, alloc, grad_group, norm_group, tp_rank, zero, adamw));
}

ZeroOptimizer::ZeroOptimizer(model::ParamSet& params, core::Allocator& alloc,
                             comm::Communicator& grad_group, comm::Communicator& norm_group,
                             int64_t tp_rank, const ZeroConfig& zero, const AdamWConfig& adamw)
    : params_(params),
      grad_(grad_group),
      norm_(norm_group),
      tp_rank_(tp_rank),
      zero_(zero),
      adamw_(adamw),
      alloc_(alloc) {
  if (zero.stage == 0) {
    segs_.push_back({.flat_begin = 0, .n = params.numel_padded(), .local = 0});
    return;
  }
  const int64_t g = grad_group.size(), r = grad_group.rank();
  if (zero.expert_grad_group != nullptr) {
    BuildPackedGroups(zero.stage >= 2);
  } else if (zero.stage == 1) {
    const int64_t shard = params.numel_padded() / g;
    segs_.push_back({.flat_begin = shard * r, .n = shard, .local = 0});
  } else {
    for (const model::ParamUnit& u : params.units()) {
      const int64_t n = u.numel_padded / g;
      unit_seg_.push_back(static_cast<int32_t>(segs_.size()));
      segs_.push_back({.flat_begin = u.offset + n * r, .n = n, .local = shard_numel_});
      shard_numel_ += n;
    }
  }
  if (zero.stage >= 2) {
    acquired_.assign(params.units().size(), 0);
    gathered_.assign(params.units().size(), 0);
    unit_grads_.resize(params.units().size());
    unit_weights_.resize(params.units().size());
  }
  for (const Segment& seg : segs_) shard_numel_ = std::max(shard_numel_, seg.local + seg.n);
  PM_CHECK(zero.stage < 3 || params.weight_slice().numel() == shard_numel_)
      << "ZeRO-3: the ParamSet's weight slice (" << params.weight_slice().numel()
      << ") is not this rank's shard (" << shard_numel_ << ")";
  const int64_t n = shard_numel_;
  // ZeRO-1 reduce-scatters the full grads into a communication buffer; ZeRO-2 accumulates the
  // micro-batches' reduced gradients in it, so it is the (sharded) gradient memory.
  grad_shard_ = core::Buffer(alloc, zero.stage >= 2 ? core::MemTag::kGrads : core::MemTag::kComm,
                             core::Dtype::kF32, {n});
  m_ = core::Buffer(alloc, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  v_ = core::Buffer(alloc, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  std::fill(grad_shard_.f32(), grad_shard_.f32() + n, 0.0f);
  std::fill(m_.f32(), m_.f32() + n, 0.0f);
  std::fill(v_.f32(), v_.f32() + n, 0.0f);
  if (params.weight_dtype() == core::Dtype::kBF16) {
    master_ = core::Buffer(alloc, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
    for (const Segment& seg : segs_) {
      params.InitValues(params.init_seed(), seg.flat_begin, seg.n, master_.f32() + seg.local);
    }
  }
}

void ZeroOptimizer::BuildPackedGroups(bool per_unit) {
  // The same plan as a ZeRO-3 ParamSet's weight slice (ParamSet::Finalize), so that segment
  // `local` offsets index that slice too.
  comm::Communicator& expert = *zero_.expert_grad_group;
  const model::ShardPlan plan = model::PlanShards(params_, per_unit, {grad_.size(), grad_.rank()},
                                                  {expert.size(), expert.rank()});
  for (const model::ShardGroup& g : plan.groups) {
    packed_.push_back({g, g.expert ? &expert : &grad_});
  }
  for (const model::ShardPiece& piece : plan.pieces) {
    segs_.push_back({.flat_begin = piece.flat_begin, .n = piece.n, .local = piece.local});
  }
  // The sharded buffers hold every group's shard (padding included), and segs_ may be empty.
  shard_numel_ = plan.numel;
  if (segs_.empty()) segs_.push_back({.flat_begin = 0, .n = 0, .local = 0});
}

void ZeroOptimizer::ReduceScatterPacked() {
  const float* grads = params_.flat_grads().f32();
  for (const PackedGroup& pg : packed_)
    ReduceScatterGroup(pg, grads, 0, grad_shard_.f32() + pg.local);
}

void ZeroOptimizer::ReduceScatterGroup(const PackedGroup& pg, const float* grads,
                                       int64_t grads_first, float* out) {
  core::Buffer packed(alloc_, core::MemTag::kComm, core::Dtype::kF32, {pg.padded});
  float* at = packed.f32();
  for (const auto& [begin, end] : pg.runs) {
    at = std::copy(grads + (begin - grads_first), grads + (end - grads_first), at);
  }
  std::fill(at, packed.f32() + pg.padded, 0.0f);
  pg.comm->reduce_scatter(out, packed.f32(), pg.shard, core::Dtype::kF32);
}

void ZeroOptimizer::AllGatherPacked(void* flat, core::Dtype dtype) {
  const auto elem = static_cast<int64_t>(core::DtypeSize(dtype));
  char* base = static_cast<char*>(flat);
  for (const PackedGroup& pg : packed_) {
    core::Buffer packed(alloc_, core::MemTag::kComm, dtype, {pg.padded});
    char* out = static_cast<char*>(packed.view().data());
    char* mine = out + pg.shard * pg.comm->rank() * elem;
    std::memset(mine, 0, static_cast<size_t>(pg.shard * elem));
    for (const Segment& seg : segs_) {
      if (seg.local < pg.local || seg.local >= pg.local + pg.shard || seg.n == 0) continue;
      std::memcpy(mine + (seg.local - pg.local) * elem, base + seg.flat_begin * elem,
                  static_cast<size_t>(seg.n * elem));
    }
    pg.comm->all_gather(out, mine, pg.shard, dtype);
    Unpack(pg, out, base, 0, elem);
  }
}

void ZeroOptimizer::Unpack(const PackedGroup& pg, const char* packed, char* flat,
                           int64_t flat_first, int64_t elem) {
  for (const auto& [begin, end] : pg.runs) {
    std::memcpy(flat + (begin - flat_first) * elem, packed,
                static_cast<size_t>((end - begin) * elem));
    packed += (end - begin) * elem;
  }
}

void ZeroOptimizer::GatherUnitWeights(int32_t unit) {
  const auto u = static_cast<size_t>(unit);
  const model::ParamUnit& pu = params_.units()[u];
  const core::Dtype dtype = params_.weight_dtype();
  unit_weights_[u] = core::Buffer(alloc_, core::MemTag::kComm, dtype, {pu.numel_padded});
  char* full = static_cast<char*>(unit_weights_[u].view().data());
  if (packed_.empty()) {  // the unit's slices are its flat range in rank order
    const core::Tensor shard = params_.unit_weight_shard(unit);
    grad_.all_gather(full, shard.data(), shard.numel(), dtype);
    return;
  }
  // ep > 1: the unit's dense and expert params, each gathered over its group and unpacked.
  const auto elem = static_cast<int64_t>(core::DtypeSize(dtype));
  std::memset(full, 0, static_cast<size_t>(pu.numel_padded * elem));  // the unit's padding
  const char* slice = static_cast<const char*>(params_.weight_slice().data());
  for (const PackedGroup& pg : packed_) {
    if (pg.unit != unit) continue;
    core::Buffer packed(alloc_, core::MemTag::kComm, dtype, {pg.padded});
    char* out = static_cast<char*>(packed.view().data());
    pg.comm->all_gather(out, slice + pg.local * elem, pg.shard, dtype);
    Unpack(pg, out, full, pu.offset, elem);
  }
}

void ZeroOptimizer::Acquire(int32_t unit, model::Pass pass) {
  const auto u = static_cast<size_t>(unit);
  const int64_t n = params_.units()[u].numel_padded;
  if (n == 0) return;
  if (zero_.stage >= 3 && gathered_[u]++ == 0) {  // gather the layer's full weights
    GatherUnitWeights(unit);
    params_.BindUnitWeights(unit, unit_weights_[u].view().data());
  }
  if (pass != model::Pass::kBackward || acquired_[u]++ > 0) return;
  unit_grads_[u] = core::Buffer(alloc_, core::MemTag::kComm, core::Dtype::kF32, {n});
  std::fill(unit_grads_[u].f32(), unit_grads_[u].f32() + n, 0.0f);
  params_.BindUnitGrads(unit, unit_grads_[u].f32());
}

bool ZeroOptimizer::ReleaseUnit(int32_t unit, model::Pass pass) {
  const auto u = static_cast<size_t>(unit);
  if (params_.units()[u].numel_padded == 0) return false;
  if (zero_.stage >= 3) {
    PM_CHECK(gathered_[u] > 0) << "Release of unit " << unit << " not gathered";
    if (--gathered_[u] == 0) {
      params_.UnbindUnitWeights(unit);
      unit_weights_[u] = core::Buffer();
    }
  }
  if (pass != model::Pass::kBackward) return false;
  PM_CHECK(acquired_[u] > 0) << "Release of unit " << unit << " not acquired";
  if (--acquired_[u] > 0) return false;
  params_.UnbindUnitGrads(unit);
  return true;
}

void ZeroOptimizer::Release(int32_t unit, model::Pass pass) {
  if (!ReleaseUnit(unit, pass)) return;
  const auto u = static_cast<size_t>(unit);
  ReduceUnitGrads(unit, unit_grads_[u].f32());
  unit_grads_[u] = core::Buffer();
}

void ZeroOptimizer::Park(int32_t unit, int64_t mb_id) {
  if (!ReleaseUnit(unit, model::Pass::kBackward)) return;
  auto [it, inserted] = parked_.emplace(std::make_pair(unit, mb_id),
                                        std::move(unit_grads_[static_cast<size_t>(unit)]));
  PM_CHECK(inserted) << "unit " << unit << " parked twice for micro-batch " << mb_id;
  unit_grads_[static_cast<size_t>(unit)] = core::Buffer();
}

void ZeroOptimizer::FinishWeightGrads(int32_t unit, int64_t mb_id) {
  auto it = parked_.find({unit, mb_id});
  if (it == parked_.end()) {  // empty unit (nothing was acquired)
    PM_CHECK(params_.units()[static_cast<size_t>(unit)].numel_padded == 0)
        << "FinishWeightGrads of unit " << unit << " without Park (micro-batch " << mb_id << ")";
    return;
  }
  ReduceUnitGrads(unit, it->second.f32());
  parked_.erase(it);
}

void ZeroOptimizer::ReduceUnitGrads(int32_t unit, const float* grads) {
  const auto u = static_cast<size_t>(unit);
  if (!packed_.empty()) {  // ep > 1: the unit's dense and expert params, each over its group
    for (const PackedGroup& pg : packed_) {
      if (pg.unit != unit) continue;
      core::Buffer part(alloc_, core::MemTag::kComm, core::Dtype::kF32, {pg.shard});
      ReduceScatterGroup(pg, grads, params_.units()[u].offset, part.f32());
      float* acc = grad_shard_.f32() + pg.local;
      for (int64_t i = 0; i < pg.shard; ++i) acc[i] += part.f32()[i];
    }
    return;
  }
  const Segment& seg = segs_[static_cast<size_t>(unit_seg_[u])];
  // Reduce-scatter this micro-batch's layer gradients and add them to the accumulator.
  core::Buffer part(alloc_, core::MemTag::kComm, core::Dtype::kF32, {seg.n});
  grad_.reduce_scatter(part.f32(), grads, seg.n, core::Dtype::kF32);
  float* acc = grad_shard_.f32() + seg.local;
  for (int64_t i = 0; i < seg.n; ++i) acc[i] += part.f32()[i];
}

std::vector<float> ZeroOptimizer::FullMaster() {
  std::vector<float> out(static_cast<size_t>(params_.numel_padded()), 0.0f);
  if (zero_.stage == 0) {
    const core::Tensor m = params_.flat_master();
    std::copy(m.f32(), m.f32() + m.numel(), out.begin());
    return out;
  }
  if (!packed_.empty()) {
    for (const Segment& seg : segs_) {
      std::copy(MasterAt(seg), MasterAt(seg) + seg.n, out.begin() + seg.flat_begin);
    }
    AllGatherPacked(out.data(), core::Dtype::kF32);
    return out;
  }
  for (const Segment& seg : segs_) {
    std::copy(MasterAt(seg), MasterAt(seg) + seg.n, out.begin() + seg.flat_begin);
    float* first = out.data() + seg.flat_begin - seg.n * grad_.rank();
    grad_.all_gather(first, out.data() + seg.flat_begin, seg.n, core::Dtype::kF32);
  }
  return out;
}

const ZeroOptimizer::Segment* ZeroOptimizer::SegmentOf(int64_t lo, int64_t hi) const {
  for (const Segment& seg : segs_) {
    if (std::max(lo, seg.flat_begin) < std::min(hi, seg.flat_begin + seg.n)) return &seg;
  }
  return nullptr;
}

std::pair<int64_t, int64_t> ZeroOptimizer::OwnedFlat(const model::ParamInfo& p) const {
  const Segment* seg = SegmentOf(p.offset, p.offset + p.numel());
  if (seg == nullptr) return {0, 0};
  return {std::max(p.offset, seg->flat_begin),
          std::min(p.offset + p.numel(), seg->flat_begin + seg->n)};
}

float* ZeroOptimizer::ParamM(const model::ParamInfo& p) const {
  const Segment* seg = SegmentOf(p.offset, p.offset + p.numel());
  return seg ? m_.f32() + seg->local + (p.offset - seg->flat_begin) : nullptr;
}

float* ZeroOptimizer::ParamV(const model::ParamInfo& p) const {
  const Segment* seg = SegmentOf(p.offset, p.offset + p.numel());
  return seg ? v_.f32() + seg->local + (p.offset - seg->flat_begin) : nullptr;
}

float* ZeroOptimizer::ParamMaster(const model::ParamInfo& p) {
  const Segment* seg = SegmentOf(p.offset, p.offset + p.numel());
  return seg ? MasterAt(*seg) + (p.offset - seg->flat_begin) : nullptr;
}

void ZeroOptimizer::PoisonGrads() {
  float* g = zero_.stage >= 2 ? grad_shard_.f32() : params_.flat_grads().f32();
  g[0] = std::numeric_limits<float>::quiet_NaN();
}

comm::Communicator& ZeroOptimizer::GradGroupOf(const model::ParamInfo& p) const {
  return model::IsRoutedExpert(p) && zero_.expert_grad_group != nullptr ? *zero_.expert_grad_group
                                                                        : grad_;
}

bool ZeroOptimizer::CountsParam(const model::ParamInfo& p) const {
  // TP-replicated parameters (norms, and anything not sharded over tp) count on tp rank 0;
  // experts whose ep group spans the tp ranks (etp = 1) are not replicated over tp.
  const bool tp_sharded = p.sharding.axis == model::MeshAxis::kTp && p.sharding.size > 1;
  const bool expert = model::IsRoutedExpert(p);
  if (!tp_sharded && !(expert && zero_.experts_span_tp) && tp_rank_ != 0) return false;
  // Stage 0: every member of a param's grad group holds the same reduced grad; its rank 0 counts.
  return zero_.stage > 0 || GradGroupOf(p).rank() == 0;
}

void ZeroOptimizer::AllReduceGrads(float* grads) {
  // Runs of consecutive params reducing over the same group, each in buckets of bucket_elems.
  model::ParamId id = 0;
  while (id < params_.size()) {
    comm::Communicator& group = GradGroupOf(params_.info(id));
    const int64_t first = params_.info(id).offset;
    int64_t last = first + params_.info(id).numel();
    for (++id; id < params_.size() && &GradGroupOf(params_.info(id)) == &group &&
               params_.info(id).offset == last;
         ++id) {
      last += params_.info(id).numel();
    }
    for (int64_t b = first; b < last; b += zero_.bucket_elems) {
      group.all_reduce(grads + b, std::min(zero_.bucket_elems, last - b), core::Dtype::kF32);
    }
  }
}

double ZeroOptimizer::OwnedSquares(const float* g, int64_t begin, int64_t n) const {
  const int64_t end = begin + n;
  double sum = 0;
  for (model::ParamId id = 0; id < params_.size(); ++id) {
    const model::ParamInfo& p = params_.info(id);
    if (!CountsParam(p)) continue;
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel());
    for (int64_t i = lo; i < hi; ++i) {
      const double x = g[i - begin];
      sum += x * x;
    }
  }
  return sum;
}

float* ZeroOptimizer::MasterAt(const Segment& seg) {
  if (!master_.empty()) return master_.f32() + seg.local;
  if (zero_.stage >= 3) return params_.weight_slice().f32() + seg.local;
  return params_.flat_master().f32() + seg.flat_begin;
}

void ZeroOptimizer::UpdateSegment(const Segment& seg, double lr, double grad_scale, int64_t step) {
  float* master = MasterAt(seg);
  float* g = grad_shard_.f32() + seg.local;
  const int64_t end = seg.flat_begin + seg.n;
  for (model::ParamId id = 0; id < params_.size(); ++id) {
    const model::ParamInfo& p = params_.info(id);
    const int64_t lo = std::max(seg.flat_begin, p.offset), hi = std::min(end, p.offset + p.numel());
    if (lo >= hi) continue;
    const kernels::AdamWHyper h = AdamWHyperFor(adamw_, p.weight_decay, lr, grad_scale);
    const int64_t n = hi - lo, at = lo - seg.flat_begin, local = seg.local + at;
    kernels::adamw_update(core::Tensor(master + at, core::Dtype::kF32, {n}),
                          core::Tensor(m_.f32() + local, core::Dtype::kF32, {n}),
                          core::Tensor(v_.f32() + local, core::Dtype::kF32, {n}),
                          core::Tensor(g + at, core::Dtype::kF32, {n}), h, step);
  }
}

void ZeroOptimizer::UpdateShard(double lr, double grad_scale, int64_t step) {
  for (const Segment& seg : segs_) UpdateSegment(seg, lr, grad_scale, step);
}

void ZeroOptimizer::GatherWeights() {
  const core::Dtype dtype = params_.weight_dtype();
  if (zero_.stage >= 3) {  // the slice is the weights: round the bf16 copy, gather nothing
    if (dtype != core::Dtype::kBF16) return;
    auto* slice = static_cast<uint16_t*>(params_.weight_slice().data());
    for (const Segment& seg : segs_) core::Bf16FromFloat(slice + seg.local, MasterAt(seg), seg.n);
    return;
  }
  const size_t elem = core::DtypeSize(dtype);
  char* weights = static_cast<char*>(params_.flat_weights().data());
  if (!packed_.empty()) {
    for (const Segment& seg : segs_) {
      if (dtype == core::Dtype::kBF16) {
        core::Bf16FromFloat(reinterpret_cast<uint16_t*>(weights + seg.flat_begin * elem),
                            MasterAt(seg), seg.n);
      }
    }
    AllGatherPacked(weights, dtype);
    return;
  }
  for (const Segment& seg : segs_) {
    if (dtype == core::Dtype::kBF16) {
      core::Bf16FromFloat(reinterpret_cast<uint16_t*>(weights + seg.flat_begin * elem),
                          MasterAt(seg), seg.n);
    }
    // The segment's unit (or, at ZeRO-1, the whole buffer) starts g slices before... its own.
    const int64_t first = seg.flat_begin - seg.n * grad_.rank();
    grad_.all_gather(weights + first * static_cast<int64_t>(elem),
                     weights + seg.flat_begin * static_cast<int64_t>(elem), seg.n, dtype);
  }
}

double ZeroOptimizer::Step(double lr, int64_t step, bool loss_finite) {
  PM_CHECK(parked_.empty()) << parked_.size() << " layer grads parked without their W";
  double squares = 0;
  if (zero_.stage == 0) {
    // Bucketed all-reduce: every rank then holds the full-batch gradient of its params.
    float* grads = params_.flat_grads().f32();
    AllReduceGrads(grads);
    squares = OwnedSquares(grads, 0, params_.numel());
  } else {
    if (zero_.stage == 1 && !packed_.empty()) {
      ReduceScatterPacked();
    } else if (zero_.stage == 1) {
      const Segment& seg = segs_.front();
      grad_.reduce_scatter(grad_shard_.f32(), params_.flat_grads().f32(), seg.n, core::Dtype::kF32);
    }
    for (const Segment& seg : segs_) {
      squares += OwnedSquares(grad_shard_.f32() + seg.local, seg.flat_begin, seg.n);
    }
  }
  const double grad_norm = std::sqrt(SumOverGroup(norm_, squares));
  const bool ok = std::isfinite(grad_norm) && loss_finite;  // the same on every rank
  if (ok) {
    const double scale = ClipScale(grad_norm, adamw_.grad_clip);
    if (zero_.stage == 0) {
      AdamWStep(params_, adamw_, lr, scale, step);
    } else {
      UpdateShard(lr, scale, step);
      GatherWeights();
    }
  }
  // ZeRO-2's accumulator holds this step's gradients only (ParamSet::ZeroGrads has no buffer).
  if (zero_.stage >= 2) std::fill(grad_shard_.f32(), grad_shard_.f32() + shard_numel_, 0.0f);
  return grad_norm;
}

}  // namespace pentamesh::train

#include "train/zero_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

model::ParamLayout ZeroOptimizer::ParamLayoutFor(int stage, int64_t grad_group_size) {
  if (stage == 0) return {};
  return {.pad_multiple = grad_group_size, .optimizer_state = false};
}

core::Result<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::Create(
    model::ParamSet& params, core::Allocator& alloc, comm::Communicator& grad_group,
    comm::Communicator& norm_group, int64_t tp_rank, const ZeroConfig& zero,
    const AdamWConfig& adamw) {
  if (zero.stage < 0 || zero.stage > 2) {
    return core::Status::Error(fmt::format(
        "layout.zero: {} is not implemented by the engine (stages 0, 1 and 2 are; ZeRO-3's "
        "per-layer weight gathering is not yet)",
        zero.stage));
  }
  if (zero.bucket_elems <= 0) return core::Status::Error("zero.bucket_elems: must be positive");
  if (zero.expert_grad_group != nullptr && zero.stage > 0) {
    return core::Status::Error(fmt::format(
        "layout.zero: {} with ep > 1 is not implemented by the engine yet (the expert and the "
        "dense grads reduce over different groups; ZeRO-0 handles both)",
        zero.stage));
  }
  PM_CHECK(params.finalized()) << "ZeroOptimizer before ParamSet::Finalize";
  const model::ParamLayout want = ParamLayoutFor(zero.stage, grad_group.size());
  PM_CHECK(params.has_optimizer_state() == want.optimizer_state &&
           params.numel_padded() % want.pad_multiple == 0)
      << "ParamSet not laid out for ZeRO-" << zero.stage;
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
      adamw_(adamw) {
  if (zero.stage == 0) {
    begin_ = 0;
    end_ = params.numel();
    return;
  }
  const int64_t shard = params.numel_padded() / grad_group.size();
  begin_ = shard * grad_group.rank();
  end_ = begin_ + shard;
  grad_shard_ = core::Buffer(alloc, core::MemTag::kComm, core::Dtype::kF32, {shard});
  m_ = core::Buffer(alloc, core::MemTag::kOptimizer, core::Dtype::kF32, {shard});
  v_ = core::Buffer(alloc, core::MemTag::kOptimizer, core::Dtype::kF32, {shard});
  std::fill(m_.f32(), m_.f32() + shard, 0.0f);
  std::fill(v_.f32(), v_.f32() + shard, 0.0f);
}

comm::Communicator& ZeroOptimizer::GradGroupOf(const model::ParamInfo& p) const {
  const bool expert = p.sharding.axis == model::MeshAxis::kEp && p.sharding.size > 1;
  return expert && zero_.expert_grad_group != nullptr ? *zero_.expert_grad_group : grad_;
}

bool ZeroOptimizer::CountsParam(const model::ParamInfo& p) const {
  // TP-replicated parameters (norms, and anything not sharded over tp) count on tp rank 0.
  const bool tp_sharded = p.sharding.axis == model::MeshAxis::kTp && p.sharding.size > 1;
  if (!tp_sharded && tp_rank_ != 0) return false;
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
  const int64_t end = std::min(begin + n, params_.numel());
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

void ZeroOptimizer::UpdateShard(double lr, double grad_scale, int64_t step) {
  const float* g = grad_shard_.f32();
  core::Tensor master = params_.flat_master();
  const int64_t end = std::min(end_, params_.numel());
  for (model::ParamId id = 0; id < params_.size(); ++id) {
    const model::ParamInfo& p = params_.info(id);
    const int64_t lo = std::max(begin_, p.offset), hi = std::min(end, p.offset + p.numel());
    if (lo >= hi) continue;
    const kernels::AdamWHyper h{
        .lr = static_cast<float>(lr),
        .beta1 = static_cast<float>(adamw_.beta1),
        .beta2 = static_cast<float>(adamw_.beta2),
        .eps = static_cast<float>(adamw_.eps),
        .weight_decay = p.weight_decay ? static_cast<float>(adamw_.weight_decay) : 0.0f,
        .grad_scale = static_cast<float>(grad_scale)};
    const int64_t n = hi - lo, local = lo - begin_;
    kernels::adamw_update(core::Tensor(master.f32() + lo, core::Dtype::kF32, {n}),
                          core::Tensor(m_.f32() + local, core::Dtype::kF32, {n}),
                          core::Tensor(v_.f32() + local, core::Dtype::kF32, {n}),
                          core::Tensor(const_cast<float*>(g) + local, core::Dtype::kF32, {n}), h,
                          step);
  }
}

double ZeroOptimizer::Step(double lr, int64_t step, bool loss_finite) {
  float* grads = params_.flat_grads().f32();
  double squares = 0;
  if (zero_.stage == 0) {
    // Bucketed all-reduce: every rank then holds the full-batch gradient of its params.
    AllReduceGrads(grads);
    squares = OwnedSquares(grads, 0, params_.numel());
  } else {
    const int64_t shard = end_ - begin_;
    grad_.reduce_scatter(grad_shard_.f32(), grads, shard, core::Dtype::kF32);
    squares = OwnedSquares(grad_shard_.f32(), begin_, shard);
  }
  const double grad_norm = std::sqrt(SumOverGroup(norm_, squares));
  if (!std::isfinite(grad_norm) || !loss_finite) return grad_norm;  // same on every rank
  const double scale = ClipScale(grad_norm, adamw_.grad_clip);
  if (zero_.stage == 0) {
    AdamWStep(params_, adamw_, lr, scale, step);
    return grad_norm;
  }
  UpdateShard(lr, scale, step);
  float* master = params_.flat_master().f32();
  grad_.all_gather(master, master + begin_, end_ - begin_, core::Dtype::kF32);
  params_.SyncWeightsFromMaster();
  return grad_norm;
}

}  // namespace pentamesh::train

#include "model/param_set.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/rng.h"

namespace pentamesh::model {

const char* ToString(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kNone:
      return "none";
    case MeshAxis::kTp:
      return "tp";
    case MeshAxis::kEp:
      return "ep";
  }
  return "?";
}

ParamSet::ParamSet(core::Allocator& alloc, core::Dtype weight_dtype)
    : alloc_(alloc), weight_dtype_(weight_dtype) {
  PM_CHECK(weight_dtype == core::Dtype::kF32 || weight_dtype == core::Dtype::kBF16)
      << "weights must be f32 or bf16, got " << core::DtypeName(weight_dtype);
}

ParamId ParamSet::Add(const std::string& name, core::Shape global_shape, Sharding sharding,
                      InitRule init, bool weight_decay) {
  PM_CHECK(!finalized_) << "Add(" << name << ") after Finalize";
  PM_CHECK(!by_name_.count(name)) << "duplicate parameter " << name;
  core::Shape local = global_shape;
  if (sharding.dim >= 0) {
    PM_CHECK(sharding.dim < global_shape.rank) << name << " sharded dim " << sharding.dim;
    PM_CHECK(sharding.size >= 1 && sharding.rank >= 0 && sharding.rank < sharding.size)
        << name << " shard " << sharding.rank << "/" << sharding.size;
    PM_CHECK(global_shape.dims[sharding.dim] % sharding.size == 0)
        << name << " dim " << sharding.dim << "=" << global_shape.dims[sharding.dim]
        << " not divisible by " << ToString(sharding.axis) << " size " << sharding.size;
    local.dims[sharding.dim] /= sharding.size;
  }
  ParamInfo info{.name = name,
                 .global_shape = global_shape,
                 .local_shape = local,
                 .sharding = sharding,
                 .init = init,
                 .weight_decay = weight_decay,
                 .offset = numel_};
  numel_ += local.numel();
  const ParamId id = static_cast<ParamId>(infos_.size());
  infos_.push_back(std::move(info));
  by_name_[name] = id;
  return id;
}

int32_t ParamSet::BeginUnit() {
  PM_CHECK(!finalized_) << "BeginUnit after Finalize";
  if (unit_starts_.back() != size()) unit_starts_.push_back(size());
  return static_cast<int32_t>(unit_starts_.size()) - 1;
}

void ParamSet::Finalize(const ParamLayout& layout) {
  PM_CHECK(!finalized_) << "Finalize twice";
  PM_CHECK(layout.pad_multiple >= 1) << "pad_multiple " << layout.pad_multiple;
  PM_CHECK(!layout.sharded_grads || layout.unit_pad) << "sharded grads need unit padding";
  finalized_ = true;
  layout_ = layout;
  const auto pad = [&](int64_t n) {
    return (n + layout.pad_multiple - 1) / layout.pad_multiple * layout.pad_multiple;
  };
  // Units in order; offsets are recomputed so that each unit starts on its padded boundary.
  int64_t offset = 0;
  unit_of_.assign(infos_.size(), 0);
  for (size_t u = 0; u < unit_starts_.size(); ++u) {
    ParamUnit unit{.first = unit_starts_[u],
                   .last = u + 1 < unit_starts_.size() ? unit_starts_[u + 1] : size(),
                   .offset = offset};
    int64_t n = 0;
    for (ParamId id = unit.first; id < unit.last; ++id) {
      infos_[static_cast<size_t>(id)].offset = offset + n;
      unit_of_[static_cast<size_t>(id)] = static_cast<int32_t>(u);
      n += info(id).numel();
    }
    unit.numel_padded = layout.unit_pad ? pad(n) : n;
    offset += unit.numel_padded;
    units_.push_back(unit);
  }
  numel_padded_ = pad(offset);
  if (!units_.empty()) units_.back().numel_padded += layout.unit_pad ? 0 : numel_padded_ - offset;
  unit_grads_.assign(units_.size(), nullptr);
  unit_weights_.assign(units_.size(), nullptr);
  const int64_t n = numel_padded_;
  if (layout.sharded_weights) {
    PM_CHECK(layout.sharded_grads && !layout.optimizer_state)
        << "sharded weights need sharded grads and a sharded optimizer";
    PM_CHECK(layout.shard_rank >= 0 && layout.shard_rank < layout.pad_multiple)
        << "shard_rank " << layout.shard_rank;
    PM_CHECK(
        layout.expert_pad_multiple == 0 ||
        (layout.expert_shard_rank >= 0 && layout.expert_shard_rank < layout.expert_pad_multiple))
        << "expert_shard_rank " << layout.expert_shard_rank;
    const ShardPlan plan =
        PlanShards(*this, /*per_unit=*/true, {layout.pad_multiple, layout.shard_rank},
                   {layout.expert_pad_multiple, layout.expert_shard_rank});
    unit_shard_offset_.assign(units_.size(), 0);
    unit_shard_numel_.assign(units_.size(), 0);
    int64_t local = 0;  // units without params have an empty slice
    for (size_t u = 0; u < units_.size(); ++u) {
      unit_shard_offset_[u] = local;
      for (const ShardGroup& g : plan.groups) {
        if (g.unit == static_cast<int32_t>(u)) unit_shard_numel_[u] += g.shard;
      }
      local += unit_shard_numel_[u];
    }
    PM_CHECK(local == plan.numel) << "slice " << local << " vs plan " << plan.numel;
    weight_pieces_ = plan.pieces;
    weights_ = core::Buffer(alloc_, core::MemTag::kWeights, weight_dtype_, {local});
  } else {
    weights_ = core::Buffer(alloc_, core::MemTag::kWeights, weight_dtype_, {n});
  }
  if (!layout.sharded_grads) {
    grads_ = core::Buffer(alloc_, core::MemTag::kGrads, core::Dtype::kF32, {n});
  }
  if (!layout.optimizer_state) return;
  adam_m_ = core::Buffer(alloc_, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  adam_v_ = core::Buffer(alloc_, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  if (weight_dtype_ == core::Dtype::kBF16) {
    master_ = core::Buffer(alloc_, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  }
}

int32_t ParamSet::unit_of(ParamId id) const { return unit_of_.at(static_cast<size_t>(id)); }

void ParamSet::BindUnitGrads(int32_t unit, float* grads) {
  PM_CHECK(layout_.sharded_grads) << "BindUnitGrads without sharded grads";
  PM_CHECK(unit_grads_.at(static_cast<size_t>(unit)) == nullptr) << "unit " << unit << " bound";
  unit_grads_[static_cast<size_t>(unit)] = grads;
}

void ParamSet::UnbindUnitGrads(int32_t unit) {
  PM_CHECK(unit_grads_.at(static_cast<size_t>(unit)) != nullptr) << "unit " << unit << " unbound";
  unit_grads_[static_cast<size_t>(unit)] = nullptr;
}

Tensor ParamSet::unit_weight_shard(int32_t unit) const {
  PM_CHECK(layout_.sharded_weights) << "unit_weight_shard without sharded weights";
  const auto u = static_cast<size_t>(unit);
  char* base = static_cast<char*>(weights_.view().data());
  return Tensor(
      base + unit_shard_offset_.at(u) * static_cast<int64_t>(core::DtypeSize(weight_dtype_)),
      weight_dtype_, {unit_shard_numel_.at(u)});
}

Tensor ParamSet::weight_slice() const {
  PM_CHECK(layout_.sharded_weights) << "weight_slice without sharded weights";
  return weights_.view();
}

void ParamSet::BindUnitWeights(int32_t unit, void* weights) {
  PM_CHECK(layout_.sharded_weights) << "BindUnitWeights without sharded weights";
  PM_CHECK(unit_weights_.at(static_cast<size_t>(unit)) == nullptr) << "unit " << unit << " bound";
  unit_weights_[static_cast<size_t>(unit)] = weights;
}

void ParamSet::UnbindUnitWeights(int32_t unit) {
  PM_CHECK(unit_weights_.at(static_cast<size_t>(unit)) != nullptr) << "unit " << unit << " unbound";
  unit_weights_[static_cast<size_t>(unit)] = nullptr;
}

Tensor ParamSet::flat_weights() const {
  PM_CHECK(finalized_ && !layout_.sharded_weights) << "flat_weights: the weights are sharded";
  return weights_.view();
}

Tensor ParamSet::flat_grads() const {
  PM_CHECK(finalized_ && !layout_.sharded_grads) << "flat_grads: no full gradient buffer";
  return grads_.view();
}

Tensor ParamSet::flat_master() const {
  PM_CHECK(finalized_) << "flat_master before Finalize";
  PM_CHECK((weight_dtype_ == core::Dtype::kF32 && !layout_.sharded_weights) || !master_.empty())
      << "no master weights here";
  return weight_dtype_ == core::Dtype::kF32 ? weights_.view() : master_.view();
}

bool IsRoutedExpert(const ParamInfo& p) {
  return p.sharding.axis == MeshAxis::kEp && p.sharding.size > 1;
}

namespace {

// Cuts group g's packed range of `rank` into the flat pieces of the runs it covers.
void AppendPieces(const ShardGroup& g, std::vector<ShardPiece>& pieces) {
  const int64_t lo = g.shard * g.rank, hi = lo + g.shard;
  int64_t packed_at = 0;
  for (const auto& [begin, end] : g.runs) {
    const int64_t a = std::max(lo, packed_at), b = std::min(hi, packed_at + end - begin);
    if (a < b)
      pieces.push_back(
          {.flat_begin = begin + (a - packed_at), .n = b - a, .local = g.local + (a - lo)});
    packed_at += end - begin;
  }
}

}  // namespace

ShardPlan PlanShards(const ParamSet& params, bool per_unit, GroupShape dense, GroupShape expert) {
  PM_CHECK(dense.size >= 1 && expert.size >= 0) << dense.size << " " << expert.size;
  // Group 2u is unit u's dense params, 2u + 1 its experts' (u = 0: the whole buffer).
  const size_t units = per_unit ? params.units().size() : 1;
  std::vector<ShardGroup> groups(2 * units);
  for (size_t i = 0; i < groups.size(); ++i) {
    groups[i].expert = i % 2 == 1;
    groups[i].unit = per_unit ? static_cast<int32_t>(i / 2) : -1;
    groups[i].rank = groups[i].expert ? expert.rank : dense.rank;
  }
  for (ParamId id = 0; id < params.size(); ++id) {
    const ParamInfo& p = params.info(id);
    const size_t unit = per_unit ? static_cast<size_t>(params.unit_of(id)) : 0;
    ShardGroup& g = groups[2 * unit + (expert.size > 0 && IsRoutedExpert(p) ? 1 : 0)];
    if (!g.runs.empty() && g.runs.back().second == p.offset) {
      g.runs.back().second += p.numel();
    } else {
      g.runs.emplace_back(p.offset, p.offset + p.numel());
    }
    g.numel += p.numel();
  }
  std::erase_if(groups, [](const ShardGroup& g) { return g.numel == 0; });
  ShardPlan plan;
  for (ShardGroup& g : groups) {
    const int64_t size = g.expert ? expert.size : dense.size;
    g.padded = (g.numel + size - 1) / size * size;
    g.shard = g.padded / size;
    g.local = plan.numel;
    plan.numel += g.shard;
    AppendPieces(g, plan.pieces);
  }
  std::sort(plan.pieces.begin(), plan.pieces.end(),
            [](const ShardPiece& x, const ShardPiece& y) { return x.flat_begin < y.flat_begin; });
  plan.groups = std::move(groups);
  return plan;
}

int64_t GlobalIndex(const ParamInfo& info, int64_t local_index) {
  if (info.sharding.dim < 0 || info.sharding.size == 1) return local_index;
  const core::Shape& l = info.local_shape;
  const core::Shape& g = info.global_shape;
  int64_t coords[core::Shape::kMaxDims] = {};
  int64_t rest = local_index;
  for (int d = l.rank - 1; d >= 0; --d) {
    coords[d] = rest % l.dims[d];
    rest /= l.dims[d];
  }
  coords[info.sharding.dim] += info.sharding.rank * l.dims[info.sharding.dim];
  int64_t global = 0;
  for (int d = 0; d < g.rank; ++d) global = global * g.dims[d] + coords[d];
  return global;
}

void ParamSet::InitValues(uint64_t seed, int64_t begin, int64_t n, float* out) const {
  std::fill(out, out + n, 0.0f);
  const int64_t end = begin + n;
  for (ParamId id = 0; id < size(); ++id) {
    const ParamInfo& p = info(id);
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel());
    if (lo >= hi) continue;
    const uint64_t stream = core::HashName(p.name);
    for (int64_t f = lo; f < hi; ++f) {
      const int64_t i = f - p.offset;
      float& w = out[f - begin];
      switch (p.init.kind) {
        case InitKind::kOnes:
          w = 1.0f;
          break;
        case InitKind::kZeros:
          w = 0.0f;
          break;
        case InitKind::kNormal:
          w = static_cast<float>(
              p.init.std *
              core::CounterRng::Normal(seed, stream, static_cast<uint64_t>(GlobalIndex(p, i))));
          break;
      }
    }
  }
}

void ParamSet::Init(uint64_t seed) {
  PM_CHECK(finalized_) << "Init before Finalize";
  seed_ = seed;
  if (layout_.sharded_weights) {  // this rank's slice of every unit (padding stays 0)
    Tensor slice = weights_.view();
    std::vector<float> values(static_cast<size_t>(slice.numel()), 0.0f);
    for (const ShardPiece& piece : weight_pieces_) {
      InitValues(seed, piece.flat_begin, piece.n, values.data() + piece.local);
    }
    if (weight_dtype_ == core::Dtype::kF32) {
      std::copy(values.begin(), values.end(), slice.f32());
    } else {
      core::Bf16FromFloat(static_cast<uint16_t*>(slice.data()), values.data(), slice.numel());
    }
  } else if (weight_dtype_ == core::Dtype::kF32 || !master_.empty()) {
    InitValues(seed, 0, numel_padded_, flat_master().f32());
    SyncWeightsFromMaster();
  } else {  // bf16 weights whose fp32 masters a sharded optimizer keeps: round the init values
    std::vector<float> values(static_cast<size_t>(numel_padded_));
    InitValues(seed, 0, numel_padded_, values.data());
    core::Bf16FromFloat(static_cast<uint16_t*>(weights_.view().data()), values.data(),
                        numel_padded_);
  }
  ZeroGrads();
  if (!layout_.optimizer_state) return;
  std::fill(adam_m_.f32(), adam_m_.f32() + numel_padded_, 0.0f);
  std::fill(adam_v_.f32(), adam_v_.f32() + numel_padded_, 0.0f);
}

Tensor ParamSet::Slice(const core::Buffer& buf, core::Dtype dtype, ParamId id) const {
  PM_CHECK(finalized_) << "parameter access before Finalize";
  const ParamInfo& p = info(id);
  char* base = static_cast<char*>(buf.view().data());
  return Tensor(base + p.offset * static_cast<int64_t>(core::DtypeSize(dtype)), dtype,
                p.local_shape);
}

ConstTensor ParamSet::weight(ParamId id) const {
  if (!layout_.sharded_weights) return Slice(weights_, weight_dtype_, id);
  const int32_t u = unit_of(id);
  char* base = static_cast<char*>(unit_weights_[static_cast<size_t>(u)]);
  PM_CHECK(base != nullptr) << "weight(" << info(id).name << "): its unit " << u
                            << " is not gathered (ZeRO-3 shards the weights)";
  const ParamInfo& p = info(id);
  return Tensor(base + (p.offset - units_[static_cast<size_t>(u)].offset) *
                           static_cast<int64_t>(core::DtypeSize(weight_dtype_)),
                weight_dtype_, p.local_shape);
}
Tensor ParamSet::grad(ParamId id) const {
  if (!layout_.sharded_grads) return Slice(grads_, core::Dtype::kF32, id);
  const int32_t u = unit_of(id);
  float* base = unit_grads_[static_cast<size_t>(u)];
  PM_CHECK(base != nullptr) << "grad(" << info(id).name << "): its unit " << u
                            << " has no gradient buffer bound (ZeRO-2 shards the gradients)";
  const ParamInfo& p = info(id);
  return Tensor(base + (p.offset - units_[static_cast<size_t>(u)].offset), core::Dtype::kF32,
                p.local_shape);
}
Tensor ParamSet::master(ParamId id) const {
  PM_CHECK((weight_dtype_ == core::Dtype::kF32 && !layout_.sharded_weights) || !master_.empty())
      << "master(" << info(id).name << "): the sharded optimizer keeps the fp32 masters";
  return weight_dtype_ == core::Dtype::kF32 ? Slice(weights_, core::Dtype::kF32, id)
                                            : Slice(master_, core::Dtype::kF32, id);
}

ParamId ParamSet::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

void ParamSet::ZeroGrads() {
  if (!grads_.empty()) std::fill(grads_.f32(), grads_.f32() + numel_padded_, 0.0f);
}

void ParamSet::ForEach(const Visitor& fn) {
  PM_CHECK(layout_.optimizer_state) << "ForEach visits Adam state, which a sharded optimizer owns";
  for (ParamId id = 0; id < size(); ++id) {
    fn(info(id), master(id), grad(id), Slice(adam_m_, core::Dtype::kF32, id),
       Slice(adam_v_, core::Dtype::kF32, id));
  }
}

void ParamSet::SyncWeightsFromMaster() {
  if (weight_dtype_ != core::Dtype::kBF16) return;
  if (master_.empty()) return;  // the sharded optimizer writes the bf16 weights
  core::Bf16FromFloat(static_cast<uint16_t*>(weights_.view().data()), master_.f32(), numel_padded_);
}

}  // namespace pentamesh::model

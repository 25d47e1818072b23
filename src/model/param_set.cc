#include "model/param_set.h"

#include <algorithm>

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

void ParamSet::Finalize(const ParamLayout& layout) {
  PM_CHECK(!finalized_) << "Finalize twice";
  PM_CHECK(layout.pad_multiple >= 1) << "pad_multiple " << layout.pad_multiple;
  PM_CHECK(layout.optimizer_state || weight_dtype_ == core::Dtype::kF32)
      << "a sharded optimizer keeps bf16 master weights itself: not implemented";
  finalized_ = true;
  layout_ = layout;
  numel_padded_ = (numel_ + layout.pad_multiple - 1) / layout.pad_multiple * layout.pad_multiple;
  const int64_t n = numel_padded_;
  weights_ = core::Buffer(alloc_, core::MemTag::kWeights, weight_dtype_, {n});
  grads_ = core::Buffer(alloc_, core::MemTag::kGrads, core::Dtype::kF32, {n});
  if (weight_dtype_ == core::Dtype::kF32) {
    std::fill(weights_.f32(), weights_.f32() + n, 0.0f);
  }
  std::fill(grads_.f32(), grads_.f32() + n, 0.0f);
  if (!layout.optimizer_state) return;
  adam_m_ = core::Buffer(alloc_, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  adam_v_ = core::Buffer(alloc_, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  if (weight_dtype_ == core::Dtype::kBF16) {
    master_ = core::Buffer(alloc_, core::MemTag::kOptimizer, core::Dtype::kF32, {n});
  }
}

Tensor ParamSet::flat_grads() const {
  PM_CHECK(finalized_) << "flat_grads before Finalize";
  return grads_.view();
}

Tensor ParamSet::flat_master() const {
  PM_CHECK(finalized_) << "flat_master before Finalize";
  return weight_dtype_ == core::Dtype::kF32 ? weights_.view() : master_.view();
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

void ParamSet::Init(uint64_t seed) {
  PM_CHECK(finalized_) << "Init before Finalize";
  for (ParamId id = 0; id < size(); ++id) {
    const ParamInfo& p = info(id);
    float* w = master(id).f32();
    const uint64_t stream = core::HashName(p.name);
    for (int64_t i = 0; i < p.numel(); ++i) {
      switch (p.init.kind) {
        case InitKind::kOnes:
          w[i] = 1.0f;
          break;
        case InitKind::kZeros:
          w[i] = 0.0f;
          break;
        case InitKind::kNormal:
          w[i] = static_cast<float>(
              p.init.std *
              core::CounterRng::Normal(seed, stream, static_cast<uint64_t>(GlobalIndex(p, i))));
          break;
      }
    }
  }
  SyncWeightsFromMaster();
  ZeroGrads();
  if (!layout_.optimizer_state) return;
  std::fill(adam_m_.f32(), adam_m_.f32() + numel_, 0.0f);
  std::fill(adam_v_.f32(), adam_v_.f32() + numel_, 0.0f);
}

Tensor ParamSet::Slice(const core::Buffer& buf, core::Dtype dtype, ParamId id) const {
  PM_CHECK(finalized_) << "parameter access before Finalize";
  const ParamInfo& p = info(id);
  char* base = static_cast<char*>(buf.view().data());
  return Tensor(base + p.offset * static_cast<int64_t>(core::DtypeSize(dtype)), dtype,
                p.local_shape);
}

ConstTensor ParamSet::weight(ParamId id) const { return Slice(weights_, weight_dtype_, id); }
Tensor ParamSet::grad(ParamId id) const { return Slice(grads_, core::Dtype::kF32, id); }
Tensor ParamSet::master(ParamId id) const {
  return weight_dtype_ == core::Dtype::kF32 ? Slice(weights_, core::Dtype::kF32, id)
                                            : Slice(master_, core::Dtype::kF32, id);
}

ParamId ParamSet::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

void ParamSet::ZeroGrads() { std::fill(grads_.f32(), grads_.f32() + numel_, 0.0f); }

void ParamSet::ForEach(const Visitor& fn) {
  PM_CHECK(layout_.optimizer_state) << "ForEach visits Adam state, which a sharded optimizer owns";
  for (ParamId id = 0; id < size(); ++id) {
    fn(info(id), master(id), grad(id), Slice(adam_m_, core::Dtype::kF32, id),
       Slice(adam_v_, core::Dtype::kF32, id));
  }
}

void ParamSet::SyncWeightsFromMaster() {
  if (weight_dtype_ != core::Dtype::kBF16) return;
  core::Bf16FromFloat(static_cast<uint16_t*>(weights_.view().data()), master_.f32(), numel_);
}

}  // namespace pentamesh::model

#include "ckpt/train_state.h"

#include <fmt/format.h>

#include <cstring>

namespace pentamesh::ckpt {
namespace {

std::vector<int64_t> Dims(const core::Shape& shape) {
  std::vector<int64_t> d;
  for (int i = 0; i < shape.rank; ++i) d.push_back(shape[i]);
  return d;
}

// The global start of a local box: the local shard is itself a box of the global tensor.
std::vector<int64_t> GlobalStart(const model::ParamInfo& info, std::vector<int64_t> start) {
  if (info.sharding.dim >= 0)
    start[static_cast<size_t>(info.sharding.dim)] +=
        info.sharding.rank * info.local_shape[info.sharding.dim];
  return start;
}

// The local flat range [lo, hi) of each parameter this rank writes: at ZeRO stage 0 the whole
// shard on the first rank of the gradient group (its replicas hold the same state), at stages
// >= 1 the part of the parameter inside this rank's range of the flat buffers.
std::pair<int64_t, int64_t> OwnedRange(const model::ParamInfo& p, const train::ZeroOptimizer& opt) {
  if (opt.stage() == 0)
    return opt.grad_rank() == 0 ? std::pair{int64_t{0}, p.numel()}
                                : std::pair{int64_t{0}, int64_t{0}};
  const int64_t lo = std::max(opt.shard_begin(), p.offset);
  const int64_t hi = std::min(opt.shard_end(), p.offset + p.numel());
  return lo < hi ? std::pair{lo - p.offset, hi - p.offset} : std::pair{int64_t{0}, int64_t{0}};
}

// Stages >= 1: master weights, Adam m and v of the parameters' owned ranges, as boxes of the
// global tensors.
std::vector<Slice> SnapshotOwned(train::Trainer& trainer) {
  model::ParamSet& params = trainer.params();
  const train::ZeroOptimizer& opt = trainer.optimizer();
  std::vector<Slice> out;
  for (model::ParamId id = 0; id < params.size(); ++id) {
    const model::ParamInfo& info = params.info(id);
    const auto [lo, hi] = OwnedRange(info, opt);
    const std::vector<Box> boxes = FlatRangeBoxes(Dims(info.local_shape), lo, hi);
    // Element i of the local shard in the master weight, Adam m and Adam v.
    const float* master = params.master(id).f32();
    const float* m = opt.shard_m().f32() + info.offset - opt.shard_begin();
    const float* v = opt.shard_v().f32() + info.offset - opt.shard_begin();
    for (size_t b = 0; b < boxes.size(); ++b) {
      const Box& box = boxes[b];
      int64_t n = 1;
      for (int64_t d : box.shape) n *= d;
      const std::pair<std::string, const float*> parts[] = {
          {info.name, master}, {AdamMName(info.name), m}, {AdamVName(info.name), v}};
      for (const auto& [name, base] : parts) {
        Slice s{.name = name,
                .key = boxes.size() == 1 ? name : fmt::format("{}#{}", name, b),
                .dtype = "F32",
                .global_shape = Dims(info.global_shape),
                .start = GlobalStart(info, box.start),
                .shape = box.shape,
                .bytes = std::string(reinterpret_cast<const char*>(base + box.flat_begin),
                                     static_cast<size_t>(n) * sizeof(float))};
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

// Stage 0: every replica in the gradient group holds the same full state; its first rank writes
// it (the ParamSet's master, m and v of the local shard).
std::vector<Slice> SnapshotStage0(train::Trainer& trainer) {
  if (trainer.optimizer().grad_rank() != 0) return {};
  return SnapshotParams(trainer.params());
}

// Stages >= 1: master weights of the whole local shard (every rank holds them), Adam m and v of
// this rank's range of the flat buffers.
core::Status RestoreSharded(const Checkpoint& ckpt, train::Trainer& trainer) {
  model::ParamSet& params = trainer.params();
  const train::ZeroOptimizer& opt = trainer.optimizer();
  for (model::ParamId id = 0; id < params.size(); ++id) {
    const model::ParamInfo& info = params.info(id);
    const std::vector<int64_t> global = Dims(info.global_shape), local = Dims(info.local_shape);
    PM_RETURN_IF_ERROR(ckpt.ReadRegion(info.name, global,
                                       GlobalStart(info, std::vector<int64_t>(local.size(), 0)),
                                       local, params.master(id).f32()));
    const auto [lo, hi] = OwnedRange(info, opt);
    float* m = opt.shard_m().f32() + info.offset - opt.shard_begin();
    float* v = opt.shard_v().f32() + info.offset - opt.shard_begin();
    for (const Box& box : FlatRangeBoxes(local, lo, hi)) {
      const std::vector<int64_t> start = GlobalStart(info, box.start);
      PM_RETURN_IF_ERROR(
          ckpt.ReadRegion(AdamMName(info.name), global, start, box.shape, m + box.flat_begin));
      PM_RETURN_IF_ERROR(
          ckpt.ReadRegion(AdamVName(info.name), global, start, box.shape, v + box.flat_begin));
    }
  }
  params.SyncWeightsFromMaster();
  return core::Status::Ok();
}

}  // namespace

Snapshot TrainerSnapshot(train::Trainer& trainer, int rank, int world) {
  Snapshot s;
  s.step = trainer.step();
  s.rank = rank;
  s.world = world;
  const train::RunConfig& c = trainer.config();
  s.state = {{"step", trainer.step()},
             {"sampler", nlohmann::json::parse(data::SamplerStateToJson(trainer.sampler_state()))},
             {"rng", {{"kind", "counter"}, {"seed", c.run.seed}}},
             {"precision", c.train.precision == spec::Precision::kBf16 ? "bf16" : "fp32"},
             {"layout", spec::ShortLayout(c.run.layout)},
             {"nonfinite_total", trainer.nonfinite_total()},
             {"config_toml", c.toml}};
  s.tensors = trainer.optimizer().stage() == 0 ? SnapshotStage0(trainer) : SnapshotOwned(trainer);
  return s;
}

core::Status RestoreTrainer(const Checkpoint& ckpt, train::Trainer& trainer) {
  const nlohmann::json& st = ckpt.state();
  if (!st.contains("sampler") || !st.contains("step") || !st["step"].is_number_integer())
    return core::Status::Error(
        fmt::format("{}: manifest state lacks the step or the sampler position", ckpt.dir()));
  const uint64_t seed = st.value("/rng/seed"_json_pointer, uint64_t{0});
  if (seed != trainer.config().run.seed)
    return core::Status::Error(fmt::format(
        "run.seed: {} differs from the checkpoint's {} ({}); the data order would change",
        trainer.config().run.seed, seed, ckpt.dir()));
  if (trainer.optimizer().stage() == 0) {
    PM_RETURN_IF_ERROR(RestoreParams(ckpt, trainer.params()));
  } else {
    PM_RETURN_IF_ERROR(RestoreSharded(ckpt, trainer));
  }
  PM_ASSIGN_OR_RETURN(data::SamplerState sampler, data::SamplerStateFromJson(st["sampler"].dump()));
  core::Status s = trainer.RestoreProgress(st["step"].get<int64_t>(), sampler);
  if (!s.ok())
    return core::Status::Error(fmt::format("{}: data position: {}", ckpt.dir(), s.message()));
  return core::Status::Ok();
}

}  // namespace pentamesh::ckpt

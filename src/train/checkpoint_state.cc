#include "train/checkpoint_state.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

namespace pentamesh::train {
namespace {

using ckpt::AdamMName;
using ckpt::AdamVName;
using ckpt::Box;
using ckpt::Checkpoint;
using ckpt::FlatRangeBoxes;
using ckpt::Slice;
using ckpt::Snapshot;

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
std::pair<int64_t, int64_t> OwnedRange(const model::ParamInfo& p, const ZeroOptimizer& opt) {
  if (opt.stage() == 0)
    return opt.grad_rank() == 0 ? std::pair{int64_t{0}, p.numel()}
                                : std::pair{int64_t{0}, int64_t{0}};
  const auto [lo, hi] = opt.OwnedFlat(p);
  return lo < hi ? std::pair{lo - p.offset, hi - p.offset} : std::pair{int64_t{0}, int64_t{0}};
}

// Stages >= 1: master weights, Adam m and v of the parameters' owned ranges, as boxes of the
// global tensors.
std::vector<Slice> SnapshotOwned(Trainer& trainer) {
  model::ParamSet& params = trainer.params();
  ZeroOptimizer& opt = trainer.optimizer();
  std::vector<Slice> out;
  for (model::ParamId id = 0; id < params.size(); ++id) {
    const model::ParamInfo& info = params.info(id);
    const auto [lo, hi] = OwnedRange(info, opt);
    const std::vector<Box> boxes = FlatRangeBoxes(Dims(info.local_shape), lo, hi);
    // Element i of the local shard in the master weight, Adam m and Adam v.
    if (lo >= hi) continue;
    const float* master = opt.ParamMaster(info);
    const float* m = opt.ParamM(info);
    const float* v = opt.ParamV(info);
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
// With ep > 1 the experts' replicas are the expert-dp group, whose first rank writes them.
// kOwnRank: every rank writes its whole shard.
std::vector<Slice> SnapshotStage0(Trainer& trainer, SnapshotScope scope) {
  const ZeroOptimizer& opt = trainer.optimizer();
  model::ParamSet& params = trainer.params();
  std::set<std::string> mine;
  for (model::ParamId id = 0; id < params.size(); ++id) {
    const model::ParamInfo& info = params.info(id);
    if (scope == SnapshotScope::kShared && !opt.FirstOfGradGroup(info)) continue;
    mine.insert({info.name, AdamMName(info.name), AdamVName(info.name)});
  }
  if (mine.empty()) return {};
  std::vector<Slice> all = ckpt::SnapshotParams(params);
  std::erase_if(all, [&](const Slice& s) { return !mine.count(s.name); });
  return all;
}

// Stages >= 1: master weights, Adam m and v of this rank's slice of the flat buffers (the
// optimizer holds the masters: the weights themselves at fp32 ZeRO-1/2, the weight slice at
// ZeRO-3, its own fp32 slice in bf16), then the weights are rounded and gathered as after an
// update (every rank of the gradient group restores).
core::Status RestoreSharded(const Checkpoint& ckpt, Trainer& trainer) {
  model::ParamSet& params = trainer.params();
  ZeroOptimizer& opt = trainer.optimizer();
  core::Status status = core::Status::Ok();
  for (model::ParamId id = 0; id < params.size() && status.ok(); ++id) {
    const model::ParamInfo& info = params.info(id);
    const std::vector<int64_t> global = Dims(info.global_shape), local = Dims(info.local_shape);
    const auto [lo, hi] = OwnedRange(info, opt);
    if (lo >= hi) continue;
    const std::pair<std::string, float*> parts[] = {{info.name, opt.ParamMaster(info)},
                                                    {AdamMName(info.name), opt.ParamM(info)},
                                                    {AdamVName(info.name), opt.ParamV(info)}};
    for (const Box& box : FlatRangeBoxes(local, lo, hi)) {
      const std::vector<int64_t> start = GlobalStart(info, box.start);
      for (const auto& [name, base] : parts) {
        status = ckpt.ReadRegion(name, global, start, box.shape, base + box.flat_begin);
        if (!status.ok()) break;
      }
      if (!status.ok()) break;
    }
  }
  // Collective: every rank gathers even when its read failed, so none waits forever; the error is
  // still returned.
  opt.SyncWeights();
  return status;
}

// Aux-loss-free balancing: every MoE layer's routing bias (E), not a parameter but state a
// resume needs. Every rank of a layer holds the same bias (the update uses counts summed over all
// data ranks); the first rank of the gradient group writes it (tp replicas write the same box).
// kOwnRank: every rank writes the biases of its layers.
std::vector<Slice> SnapshotMoeBias(Trainer& trainer, SnapshotScope scope) {
  std::vector<Slice> out;
  if (scope == SnapshotScope::kShared && trainer.optimizer().grad_rank() != 0) return out;
  for (const auto& [layer, moe] : trainer.MoeLayers()) {
    const std::vector<float>& bias = moe->bias();
    const int64_t e = static_cast<int64_t>(bias.size());
    out.push_back(Slice{.name = MoeBiasName(layer),
                        .key = {},
                        .dtype = "F32",
                        .global_shape = {e},
                        .start = {0},
                        .shape = {e},
                        .bytes = std::string(reinterpret_cast<const char*>(bias.data()),
                                             bias.size() * sizeof(float))});
  }
  return out;
}

core::Status RestoreMoeBias(const Checkpoint& ckpt, Trainer& trainer) {
  for (const auto& [layer, moe] : trainer.MoeLayers()) {
    const std::string name = MoeBiasName(layer);
    if (!ckpt.Has(name)) {
      if (trainer.config().optim.bias_update_rate == 0) continue;  // bias stays 0, as saved
      return core::Status::Error(
          fmt::format("{}: has no '{}' (saved before routing biases were checkpointed); "
                      "optim.bias_update_rate > 0 needs it to resume exactly",
                      ckpt.dir(), name));
    }
    std::vector<float> bias(moe->bias().size());
    const int64_t e = static_cast<int64_t>(bias.size());
    PM_RETURN_IF_ERROR(ckpt.ReadRegion(name, {e}, {0}, {e}, bias.data()));
    moe->set_bias(bias);
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<RunConfig> RunConfigOfCheckpoint(const Checkpoint& ckpt) {
  const nlohmann::json& state = ckpt.state();
  const std::string toml = state.contains("config_toml") && state["config_toml"].is_string()
                               ? state["config_toml"].get<std::string>()
                               : "";
  return RunConfigFromToml(toml, ckpt.dir() + "/manifest.json state.config_toml");
}

Snapshot TrainerSnapshot(Trainer& trainer, int rank, int world, SnapshotScope scope) {
  Snapshot s;
  s.step = trainer.step();
  s.rank = rank;
  s.world = world;
  const RunConfig& c = trainer.config();
  s.state = {{"step", trainer.step()},
             {"sampler", nlohmann::json::parse(data::SamplerStateToJson(trainer.sampler_state()))},
             {"rng", {{"kind", "counter"}, {"seed", c.run.seed}}},
             {"precision", c.train.precision == spec::Precision::kBf16 ? "bf16" : "fp32"},
             {"layout", spec::ShortLayout(c.run.layout)},
             {"nonfinite_total", trainer.nonfinite_total()},
             {"config_toml", c.toml}};
  s.tensors =
      trainer.optimizer().stage() == 0 ? SnapshotStage0(trainer, scope) : SnapshotOwned(trainer);
  for (Slice& bias : SnapshotMoeBias(trainer, scope)) s.tensors.push_back(std::move(bias));
  return s;
}

core::Status RestoreTrainer(const Checkpoint& ckpt, Trainer& trainer) {
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
    PM_RETURN_IF_ERROR(ckpt::RestoreParams(ckpt, trainer.params()));
  } else {
    PM_RETURN_IF_ERROR(RestoreSharded(ckpt, trainer));
  }
  PM_RETURN_IF_ERROR(RestoreMoeBias(ckpt, trainer));
  PM_ASSIGN_OR_RETURN(data::SamplerState sampler, data::SamplerStateFromJson(st["sampler"].dump()));
  core::Status s = trainer.RestoreProgress(st["step"].get<int64_t>(), sampler);
  if (!s.ok())
    return core::Status::Error(fmt::format("{}: data position: {}", ckpt.dir(), s.message()));
  return core::Status::Ok();
}

}  // namespace pentamesh::train

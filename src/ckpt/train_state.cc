#include "ckpt/train_state.h"

#include <fmt/format.h>

namespace pentamesh::ckpt {

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
  s.tensors = SnapshotParams(trainer.params());
  return s;
}

core::Status RestoreTrainer(const Checkpoint& ckpt, train::Trainer& trainer) {
  if (trainer.optimizer().stage() >= 1)
    return core::Status::Error(fmt::format(
        "run.layout: zero={} keeps Adam state in the sharded optimizer, which checkpoints do not "
        "cover yet; resume needs zero=0",
        trainer.optimizer().stage()));
  const nlohmann::json& st = ckpt.state();
  if (!st.contains("sampler") || !st.contains("step") || !st["step"].is_number_integer())
    return core::Status::Error(
        fmt::format("{}: manifest state lacks the step or the sampler position", ckpt.dir()));
  const uint64_t seed = st.value("/rng/seed"_json_pointer, uint64_t{0});
  if (seed != trainer.config().run.seed)
    return core::Status::Error(fmt::format(
        "run.seed: {} differs from the checkpoint's {} ({}); the data order would change",
        trainer.config().run.seed, seed, ckpt.dir()));
  PM_RETURN_IF_ERROR(RestoreParams(ckpt, trainer.params()));
  PM_ASSIGN_OR_RETURN(data::SamplerState sampler, data::SamplerStateFromJson(st["sampler"].dump()));
  core::Status s = trainer.RestoreProgress(st["step"].get<int64_t>(), sampler);
  if (!s.ok())
    return core::Status::Error(fmt::format("{}: data position: {}", ckpt.dir(), s.message()));
  return core::Status::Ok();
}

}  // namespace pentamesh::ckpt

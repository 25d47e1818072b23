// The Trainer's pipeline path (pp > 1) and its trace: this rank's model chunks (V virtual stages
// of the layout's schedule, embedding on stage 0, head on the last), RunBatch through a
// PipelineExecutor on mesh.pp(), and the Chrome trace of actions, p2p and collectives.
// Invariant: a pipelined step computes what the one-process step computes: the same micro-batches
// with loss scale 1 / global valid tokens, the summed cross-entropy (which lives on the last
// stage's ranks) summed over the world, MoE stats summed over the world (Trainer::SumMoeStats),
// dense grads reduced by the ZeroOptimizer over dp_cp per stage and expert grads over expert_dp,
// and the grad norm summed over the world from disjoint owners. With cp each micro-batch holds this
// rank's 2 chunks of its sequences (S/cp rows per sequence, their global positions from the cp
// rank), so the p2p buffers carry T/cp (/tp under SP) rows; ep's all-to-alls and cp's exchanges
// run inside the stage's actions, whose order is the same on every rank of one pp stage.
#include <fmt/format.h>

#include <cmath>

#include "spec/validate.h"
#include "train/trainer.h"

namespace pentamesh::train {
namespace {

// The layout's schedule with the step's micro-batch count. REQUIRES: CheckEngineLayout passed.
schedule::ScheduleSpec PipelineSpec(const RunConfig& c) {
  auto spec = schedule::FromLayout(c.run.layout, spec::MicroBatches(c.train, c.run.layout));
  PM_CHECK(spec.ok()) << spec.status().message();
  return *spec;
}

}  // namespace

std::vector<model::StageConfig> Trainer::PipelineChunks(const model::StageConfig& base) const {
  const schedule::Topology topo = PipelineSpec(config_).topology();
  std::vector<model::StageConfig> chunks;
  for (int c = 0; c < topo.virtual_stages; ++c)
    chunks.push_back(ChunkConfig(base, topo.Stage(mesh_->pp().rank(), c), topo.stages()));
  return chunks;
}

void Trainer::InitPipeline() {
  std::vector<model::Stage*> chunks;
  for (size_t c = 0; c < model_->chunks(); ++c) chunks.push_back(&model_->chunk(c));
  pipeline_ =
      std::make_unique<PipelineExecutor>(PipelineSpec(config_), mesh_->pp(), chunks, alloc_);
  // What this rank holds is its own stage's memory (the estimate's is the most loaded stage's).
  predicted_.memory = PredictRankMemory(config_, mesh_->pp().rank());
}

double Trainer::RunPipelineBatch(const data::Batch& batch, bool train, model::MoeStats* moe,
                                 int64_t* valid) {
  const std::vector<model::MicroBatch> mbatches = SplitBatch(batch, valid);
  const int64_t hidden = config_.model.hidden;
  const PipelineStepResult r =
      train ? pipeline_->Run(mbatches, hidden) : pipeline_->Forward(mbatches, hidden);
  if (moe) moe->Add(r.moe);  // this rank's chunks; Step sums them over the world
  if (train) bubble_ = MeasureBubble(*world_, mesh_->pp().rank(), PipelineSpec(config_), r.timing);
  // The cross-entropy is summed on the last stage's ranks only (0 elsewhere): the world sum holds
  // every replica's loss once per tp rank.
  return SumOverGroup(*world_, r.loss_sum) / static_cast<double>(mesh_->layout().tp);
}

void Trainer::set_tracing(bool on) {
  tracing_ = on;
  if (pipeline_) pipeline_->set_tracing(on);
  std::vector<comm::CommEvent>* sink = on ? &comm_events_ : nullptr;
  world_->set_event_sink(sink);
  if (mesh_) {
    for (mesh::GroupKind kind : mesh::kAllGroupKinds) mesh_->group(kind).set_event_sink(sink);
  }
}

std::string Trainer::GatherTrace() {
  std::vector<TraceEvent> events;
  if (pipeline_) events = pipeline_->trace();
  for (const comm::CommEvent& e : comm_events_) {
    // The executor records its p2p transfers itself, named by micro-batch.
    if (e.op == comm::Op::kSend || e.op == comm::Op::kRecv) continue;
    events.push_back({.name = fmt::format("{} {}", e.group, comm::OpName(e.op)),
                      .cat = "collective",
                      .ts_us = e.start_us,
                      .dur_us = e.dur_us,
                      .bytes = std::llround(e.bytes_wire)});
  }
  set_tracing(false);
  comm_events_.clear();
  return GatherChromeTrace(*world_, events);
}

}  // namespace pentamesh::train

// Trainer: one training run, on one process or as one rank of a distributed job. Wires the run from
// a RunConfig: opens (or builds) the tokenized dataset, builds the model (a model::Model), and runs
// optimizer steps of global_batch_seqs sequences split into micro-batches of layout.mbs sequences,
// with grads accumulated in fp32 and the loss normalised by the step's global valid tokens.
// Distributed (a Mesh given): this rank builds its TP shard of the model (layers communicate over
// mesh.tp(); with sp=on the residual stream is sequence-sharded and the norm grads are summed over
// tp: model::Stage::ReduceSequenceParallelGrads in Step, or per layer in backward at ZeRO-2/3),
// reads its dp slice of every global batch, and a
// ZeroOptimizer reduces the grads over mesh.dp_cp() (at ZeRO-2/3 it is also the Stage's
// ParamHooks: per-layer gradient reduce-scatters and weight gathers); scalars (valid tokens, loss
// sums, the grad norm) are summed over the world communicator, which is not a mesh group and so
// not part of comm_bytes. Context parallel: each cp rank reads its 2 balanced chunks of every
// sequence (with their global positions) and the layers exchange K/V over mesh.cp(). Expert
// parallel: each of the dp x ep data ranks (separate placement) reads its own sequences, MoE
// layers dispatch over mesh.ep() and expert grads reduce over mesh.expert_dp(). pp > 1: this rank
// builds the model chunks of its pp rank and RunBatch runs the layout's schedule through a
// PipelineExecutor on mesh.pp() (pipeline_batch.cc, docs/pipeline.md), with cp, ep, dp and tp
// as above on every stage (docs/pipeline.md "pp with cp and ep").
// Invariants: the same config and seed give bitwise the same losses (counter-RNG init, a
// deterministic sampler, fixed BLAS threads); every layout starts from the same global weights
// and sees the same global batches; each step's memory peaks are measured per tag and its
// communication per mesh group.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/status.h"
#include "cost/cost.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "mesh/mesh.h"
#include "model/stage.h"
#include "train/divergence.h"
#include "train/host_cost.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/pipeline.h"
#include "train/run_config.h"
#include "train/zero_optimizer.h"

namespace pentamesh::train {

struct StepStats {
  int64_t step = 0;    // 1-based: the number of optimizer steps done
  double loss = 0;     // ce_loss + aux_loss + z_loss
  double ce_loss = 0;  // cross-entropy per valid token
  double lr = 0;
  double grad_norm = 0;  // before clipping
  int64_t tokens = 0;    // tokens in the step
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;  // model FLOPs (cost::Flops) * tokens/s / run.peak_gflops
  std::array<int64_t, core::kMemTagCount> peak_bytes{};  // per MemTag during the step
  int64_t peak_bytes_total = 0;
  model::MoeStats moe;    // empty for dense models
  int64_t moe_top_k = 0;  // experts each token is routed to (the collapse threshold depends on it)
  std::optional<double> eval_loss;
  // The loss or grad norm was not finite: no update was applied and step did not advance (the
  // batch is consumed). nonfinite_in_row counts such attempts since the last good step.
  bool skipped = false;
  int64_t nonfinite_in_row = 0;
  int64_t nonfinite_total = 0;  // skipped steps so far in this process's run
  // A good step whose loss exceeded run.spike_factor x loss_median (train/divergence.h).
  bool loss_spike = false;
  double loss_median = 0;
  // pp > 1: the step's measured pipeline bubble next to the simulator's (train/pipeline.h).
  std::optional<PipelineBubble> bubble;
  // Mesh groups' counters during the step: {"tp": comm::ToJson(...), ...}; empty on one process.
  nlohmann::json comm_bytes = nlohmann::json::object();
};

// The distributed context of a run; both outlive the Trainer. Default: one process.
struct Distributed {
  mesh::Mesh* mesh = nullptr;
  comm::Communicator* world = nullptr;  // REQUIRED when mesh is set
};

// Cross-entropy baselines of the held-out split without context, in nats per token.
struct UnigramBaseline {
  double train_entropy = 0;  // entropy of the train split's unigram distribution
  double heldout_xent = 0;   // held-out tokens under the (add-one smoothed) train unigram
};

class Trainer {
 public:
  static core::Result<std::unique_ptr<Trainer>> Create(const RunConfig& config,
                                                       const Distributed& dist = {});

  StepStats Step();
  // Mean cross-entropy over the first run.eval_batches held-out batches (fixed, unshuffled).
  double Evaluate();
  core::Result<UnigramBaseline> Baseline() const;

  int64_t step() const { return step_; }
  int64_t nonfinite_total() const { return nonfinite_total_; }
  // The data position (rank independent) and a restore of step + data position, for checkpoints
  // (at step run.data_start_step the saved position is not restored: the order starts there).
  data::SamplerState sampler_state() const { return sampler_->state(); }
  core::Status RestoreProgress(int64_t step, const data::SamplerState& sampler);
  int64_t total_steps() const { return config_.total_steps(); }
  const RunConfig& config() const { return config_; }
  model::ParamSet& params() { return model_->params(); }
  // This rank's MoE layers over all its chunks, as (global layer index, layer).
  std::vector<std::pair<int64_t, model::Moe*>> MoeLayers();
  const ZeroOptimizer& optimizer() const { return *optimizer_; }
  ZeroOptimizer& optimizer() { return *optimizer_; }
  // World rank (0 on one process); rank 0 prints and writes metrics.
  int rank() const { return world_->rank(); }
  const core::Allocator& allocator() const { return alloc_; }
  const data::Dataset& dataset() const { return *dataset_; }
  // The cost model's prediction for this model and layout on this host (memory per category of
  // this rank's pp stage, FLOPs, step-time terms).
  const cost::Estimate& predicted() const { return predicted_; }
  double flops_per_token() const { return flops_per_token_; }
  // Records a Chrome trace event for every pipeline action and p2p transfer and every counted
  // collective of this rank's mesh groups and world (from the next Step/Evaluate on).
  void set_tracing(bool on);
  // Collective over the world: every rank's events as one Chrome trace JSON on world rank 0 (an
  // empty string elsewhere); tracing is off afterwards.
  std::string GatherTrace();
  int64_t pp_size() const { return mesh_ ? mesh_->layout().pp : 1; }

 private:
  Trainer(const RunConfig& config, data::Dataset dataset, const Distributed& dist);
  model::ShardConfig Shard() const;
  // The group whose ranks' tokens form one micro-batch's load-balancing statistics: cp, or dp x cp
  // (the dense grid's dp x ep x cp ranks) under model.moe.aux_loss_scope = "global"; null on one
  // process.
  comm::Communicator* BalanceGroup() const;
  // Data ranks (each reads its own sequences): dp, times ep under the separate placement.
  int64_t dp_size() const;
  int64_t dp_rank() const;
  int64_t cp_size() const { return mesh_ ? mesh_->layout().cp : 1; }
  int64_t cp_rank() const { return mesh_ ? mesh_->coords().dense.cp : 0; }
  // MoE routing: whether each tp rank routes only its own T/tp rows (spec::RoutesRankRows: etp = 1
  // under sp), ranks that route the same rows (tp: the tp ranks route alike, except when each
  // routes its own rows: 1), and ranks whose routed rows together make one micro-batch (cp,
  // times tp when each routes its own rows).
  bool moe_routes_rank_rows() const;
  int64_t route_copies() const;
  int64_t route_shards() const;
  // MoE statistics of a step summed over the data, cp and pp ranks (every rank: global counts).
  void SumMoeStats(model::MoeStats& moe);
  // Aux-loss-free balancing: every MoE layer's bias from its routed counts of the step, summed
  // over all ranks holding the layer so every rank applies the same update.
  void UpdateMoeBias();
  // Sums a per-rank value over the data-parallel replicas (world sum / tp).
  double SumOverReplicas(double value);
  // This rank's part of the batch as micro-batches of layout.mbs sequences, with the loss scale
  // (1 / valid tokens of the global batch, returned in *valid_tokens) and the aux-loss scale.
  std::vector<model::MicroBatch> SplitBatch(const data::Batch& batch, int64_t* valid_tokens);
  // Forward (+ backward when train) of one global batch; returns summed CE and MoE stats.
  double RunBatch(const data::Batch& batch, bool train, model::MoeStats* moe, int64_t* valid);
  // pp > 1 (pipeline_batch.cc): this rank's chunks, and RunBatch through the executor.
  std::vector<model::StageConfig> PipelineChunks(const model::StageConfig& base) const;
  void InitPipeline();  // the executor over model_'s chunks
  double RunPipelineBatch(const data::Batch& batch, bool train, model::MoeStats* moe,
                          int64_t* valid);

  RunConfig config_;
  mesh::Mesh* mesh_ = nullptr;
  std::unique_ptr<comm::Communicator> self_;  // world and gradient group of a one-process run
  comm::Communicator* world_ = nullptr;
  core::Allocator alloc_;
  std::unique_ptr<data::Dataset> dataset_;
  std::unique_ptr<data::Sampler> sampler_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<PipelineExecutor> pipeline_;  // pp > 1 only
  PipelineBubble bubble_;                       // of the last training RunPipelineBatch
  std::vector<comm::CommEvent> comm_events_;    // --trace
  bool tracing_ = false;
  std::unique_ptr<ZeroOptimizer> optimizer_;
  LrSchedule schedule_;
  data::Batch batch_;
  cost::Estimate predicted_;
  double flops_per_token_ = 0;
  int64_t step_ = 0;
  int64_t attempts_ = 0;  // Step() calls, including skipped ones (for fault injection)
  int64_t nonfinite_in_row_ = 0, nonfinite_total_ = 0;
  LossSpikeDetector spikes_{config_.run.spike_factor, config_.run.spike_window};
};

// Opens config.dataset; when it has no manifest and config.corpus is set, trains a tokenizer of
// `vocab` tokens and tokenizes the corpus into it first, unpacking an .xz corpus there before
// (prints what it does).
core::Result<data::Dataset> OpenOrBuildDataset(const DataConfig& config, int64_t vocab);

}  // namespace pentamesh::train

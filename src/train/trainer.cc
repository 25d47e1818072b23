#include "train/trainer.h"

#include <fmt/format.h>

#include <malloc.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "data/xz_text.h"
#include "kernels/cpu/matmul.h"
#include "spec/moe_routing.h"
#include "train/engine_rules.h"

namespace pentamesh::train {

core::Result<data::Dataset> OpenOrBuildDataset(const DataConfig& c, int64_t vocab) {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(c.dataset) / data::kManifestFile)) {
    if (c.corpus.empty()) {
      return core::Status::Error(
          fmt::format("data.dataset: {} has no {} (tokenize a corpus into it, or set data.corpus)",
                      c.dataset, data::kManifestFile));
    }
    if (!fs::exists(c.corpus)) {
      return core::Status::Error(fmt::format("data.corpus: {} does not exist", c.corpus));
    }
    std::error_code ec;
    fs::create_directories(c.dataset, ec);
    if (ec)
      return core::Status::Error(
          fmt::format("data.dataset: cannot create {}: {}", c.dataset, ec.message()));
    if (data::IsXz(c.corpus)) fmt::print("data: unpacking {} into {}\n", c.corpus, c.dataset);
    PM_ASSIGN_OR_RETURN(const std::string corpus,
                        data::UnpackedText(c.corpus, c.dataset, "data.corpus"));
    if (!data::HasText(corpus)) {
      return core::Status::Error(
          fmt::format("data.corpus: {} holds no text (no non-empty line to train on)", c.corpus));
    }
    const std::string prefix = (fs::path(c.dataset) / "tokenizer").string();
    fmt::print("data: training a {}-token BPE tokenizer on {}\n", vocab, corpus);
    PM_ASSIGN_OR_RETURN(auto tstats, data::TrainTokenizer({.inputs = {corpus},
                                                           .model_prefix = prefix,
                                                           .vocab_size = static_cast<int>(vocab)}));
    (void)tstats;
    fmt::print("data: tokenizing {} into {}\n", corpus, c.dataset);
    PM_ASSIGN_OR_RETURN(auto stats, data::TokenizeCorpus({.inputs = {corpus},
                                                          .model_path = prefix + ".model",
                                                          .output_dir = c.dataset,
                                                          .heldout_fraction = c.heldout_fraction,
                                                          .split_seed = c.split_seed}));
    fmt::print("data: {} train tokens, {} held-out tokens\n", stats.train_tokens,
               stats.heldout_tokens);
  }
  return data::Dataset::Open(c.dataset);
}

core::Result<std::unique_ptr<Trainer>> Trainer::Create(const RunConfig& config,
                                                       const Distributed& dist) {
  PM_RETURN_IF_ERROR(CheckEngineLayout(config));
  PM_CHECK(!dist.mesh || dist.world) << "a distributed Trainer needs the world communicator";
  if (!dist.mesh && config.run.layout.gpus() != 1) {
    return core::Status::Error(fmt::format(
        "run.layout: '{}' needs {} ranks; launch with mpirun -np {}",
        spec::ShortLayout(config.run.layout), config.run.layout.gpus(), config.run.layout.gpus()));
  }
  model::ShardConfig shard;
  if (dist.mesh) {
    shard.tp_size = dist.mesh->layout().tp;
    shard.tp_rank = dist.mesh->coords().dense.tp;
    shard.ep_size = dist.mesh->layout().ep;
    shard.ep_rank = dist.mesh->coords().ep;
  }
  PM_RETURN_IF_ERROR(model::CheckSupported(config.model));
  // Before anything is allocated (the dataset's reader buffers are not the allocator's).
  const int64_t pp_rank = dist.mesh ? dist.mesh->pp().rank() : 0;
  PM_RETURN_IF_ERROR(CheckMemoryLimit(config, PredictRankMemory(config, pp_rank)));
  PM_ASSIGN_OR_RETURN(data::Dataset dataset, OpenOrBuildDataset(config.data, config.model.vocab));
  if (dataset.vocab_size() != config.model.vocab) {
    return core::Status::Error(
        fmt::format("model.vocab: {} does not match the tokenizer's vocab {} of data.dataset={}",
                    config.model.vocab, dataset.vocab_size(), config.data.dataset));
  }
  std::unique_ptr<Trainer> t(new Trainer(config, std::move(dataset), dist));
  PM_ASSIGN_OR_RETURN(
      data::Sampler sampler,
      data::Sampler::Create(*t->dataset_, {.split = data::Split::kTrain,
                                           .seq_len = config.train.seq_len,
                                           .global_batch_seqs = config.train.global_batch_seqs(),
                                           .seed = config.run.seed,
                                           .dp_rank = static_cast<int>(t->dp_rank()),
                                           .dp_size = static_cast<int>(t->dp_size()),
                                           .cp_rank = static_cast<int>(t->cp_rank()),
                                           .cp_size = static_cast<int>(t->cp_size())}));
  t->sampler_ = std::make_unique<data::Sampler>(std::move(sampler));
  comm::Communicator& grad_group = dist.mesh ? dist.mesh->dp_cp() : *t->world_;
  // Expert grads reduce over expert_dp (the ranks holding the same experts) when ep > 1.
  comm::Communicator* expert_group = shard.ep_size > 1 ? &dist.mesh->expert_dp() : nullptr;
  PM_ASSIGN_OR_RETURN(
      t->optimizer_,
      ZeroOptimizer::Create(t->params(), t->alloc_, grad_group, *t->world_, shard.tp_rank,
                            {.stage = config.run.layout.zero,
                             .expert_grad_group = expert_group,
                             .experts_span_tp = t->moe_routes_rank_rows()},
                            t->config_.optim.adamw));
  // Every chunk of this rank (pp > 1: its virtual stages): the pipeline executor's F and B
  // actions then gather (ZeRO-3) and reduce-scatter each layer's grads per micro-batch, in
  // program order, which is the same on every dp x cp rank of a pp stage.
  for (size_t c = 0; c < t->model_->chunks(); ++c)
    t->model_->chunk(c).SetParamHooks(t->optimizer_->hooks());
  return t;
}

model::ShardConfig Trainer::Shard() const {
  if (!mesh_) return {};
  return {.tp_size = mesh_->layout().tp,
          .tp_rank = mesh_->coords().dense.tp,
          .ep_size = mesh_->layout().ep,
          .ep_rank = mesh_->coords().ep,
          .tp_comm = &mesh_->tp(),
          .sequence_parallel = mesh_->layout().sp && mesh_->layout().tp > 1};
}

comm::Communicator* Trainer::BalanceGroup() const {
  if (!mesh_) return nullptr;
  return config_.model.moe.aux_loss_scope == spec::AuxLossScope::kGlobal ? &mesh_->dp_cp()
                                                                         : &mesh_->cp();
}

int64_t Trainer::dp_size() const { return mesh_ ? mesh_->layout().data_ranks() : 1; }

bool Trainer::moe_routes_rank_rows() const {
  // The engine replicates its routed experts over tp when etp = tp (EngineCostParams says so).
  return mesh_ && spec::RoutesRankRows(mesh_->layout(), EngineCostParams().moe_replicated_over_tp);
}
int64_t Trainer::route_copies() const {
  return mesh_ && !moe_routes_rank_rows() ? mesh_->layout().tp : 1;
}
int64_t Trainer::route_shards() const {
  return cp_size() * (moe_routes_rank_rows() ? mesh_->layout().tp : 1);
}

int64_t Trainer::dp_rank() const {
  if (!mesh_) return 0;
  // Data ranks are the dense grid's dp x ep ranks (ep is 1 there under the folded placement).
  const mesh::Coords& d = mesh_->coords().dense;
  return d.dp * mesh_->grid().dense().degrees().ep + d.ep;
}

void Trainer::SumMoeStats(model::MoeStats& moe) {
  if (!mesh_ || !config_.model.is_moe()) return;
  // Every rank holds its own tokens' stats of its own stage's MoE layers (a pp stage without MoE
  // layers holds zeros): the world sum counts every (token, layer) once per route copy (tp ranks
  // route alike, unless etp = 1). The world is not a mesh group, so this is not in comm_bytes.
  const auto E = static_cast<size_t>(config_.model.moe.experts);
  moe.routed.resize(E, 0);
  moe.kept.resize(E, 0);
  const int64_t copies = route_copies();
  std::vector<int64_t> counts = moe.routed;
  counts.insert(counts.end(), moe.kept.begin(), moe.kept.end());
  counts.push_back(moe.dropped);
  world_->all_reduce(counts.data(), static_cast<int64_t>(counts.size()), core::Dtype::kI64);
  for (size_t e = 0; e < E; ++e) {
    moe.routed[e] = counts[e] / copies;
    moe.kept[e] = counts[E + e] / copies;
  }
  moe.dropped = counts[2 * E] / copies;
  moe.aux_loss = SumOverGroup(*world_, moe.aux_loss) / static_cast<double>(copies);
  moe.z_loss = SumOverGroup(*world_, moe.z_loss) / static_cast<double>(copies);
}

void Trainer::UpdateMoeBias() {
  if (config_.optim.bias_update_rate == 0) return;
  // Every chunk of this rank (pp > 1: its stage's layers only). The counts of every layer are
  // summed over all ranks holding that layer (every dp, ep and cp rank of its pp stage) in one
  // world all-reduce of a (layers x E) table indexed by global layer, other stages' layers
  // contributing zeros; tp ranks route alike (unless etp = 1), so the sum is divided by
  // route_copies(). Every rank holding a
  // layer then applies the same update, the one process's.
  std::vector<std::vector<std::vector<int64_t>>> routed(model_->chunks());
  for (size_t c = 0; c < model_->chunks(); ++c)
    routed[c] = model_->chunk(c).TakeRoutedPerMoeLayer();
  if (mesh_ && config_.model.is_moe()) {
    const auto E = static_cast<size_t>(config_.model.moe.experts);
    std::vector<int64_t> table(static_cast<size_t>(config_.model.layers) * E, 0);
    auto slot = [&](size_t c, size_t i) {
      return static_cast<size_t>(model_->chunk(c).config().first_layer) * E + i * E;
    };
    for (size_t c = 0; c < routed.size(); ++c) {
      for (size_t i = 0; i < routed[c].size(); ++i) {
        if (routed[c][i].empty()) continue;
        PM_CHECK(routed[c][i].size() == E) << routed[c][i].size() << " routed counts for " << E;
        std::copy(routed[c][i].begin(), routed[c][i].end(), table.begin() + slot(c, i));
      }
    }
    world_->all_reduce(table.data(), static_cast<int64_t>(table.size()), core::Dtype::kI64);
    const int64_t copies = route_copies();
    for (size_t c = 0; c < routed.size(); ++c) {
      for (size_t i = 0; i < routed[c].size(); ++i) {
        if (routed[c][i].empty()) continue;
        for (size_t e = 0; e < E; ++e) routed[c][i][e] = table[slot(c, i) + e] / copies;
      }
    }
  }
  for (size_t c = 0; c < model_->chunks(); ++c) model_->chunk(c).UpdateMoeBias(routed[c]);
}

std::vector<std::pair<int64_t, model::Moe*>> Trainer::MoeLayers() {
  std::vector<std::pair<int64_t, model::Moe*>> out;
  for (size_t c = 0; c < model_->chunks(); ++c) {
    for (const auto& layer : model_->chunk(c).MoeLayers()) out.push_back(layer);
  }
  return out;
}

double Trainer::SumOverReplicas(double value) {
  // Every tp and pp rank of a replica holds the replica's value.
  const double copies = mesh_ ? static_cast<double>(mesh_->layout().tp * mesh_->layout().pp) : 1.0;
  return SumOverGroup(*world_, value) / copies;
}

Trainer::Trainer(const RunConfig& c, data::Dataset dataset, const Distributed& dist)
    : config_(c), mesh_(dist.mesh), dataset_(std::make_unique<data::Dataset>(std::move(dataset))) {
  if (dist.mesh) {
    world_ = dist.world;
  } else {
    self_ = std::make_unique<comm::SelfCommunicator>("world", 0);
    world_ = self_.get();
  }
  // Stashes are allocated and freed every micro-batch: keep freed memory in the heap instead of
  // returning large blocks to the OS (each fresh mmap costs page faults on every step).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  alloc_.set_limit_bytes(c.run.memory_limit_bytes);  // from the first allocation on
  kernels::SetBlasThreads(c.run.threads);
  const model::StageConfig base{.model = c.model,
                                .shard = Shard(),
                                .cp = mesh_ ? &mesh_->cp() : nullptr,
                                .cp_kind = c.run.layout.cp_kind,
                                .ep = mesh_ ? &mesh_->ep() : nullptr,
                                .moe_routes_rank_rows = moe_routes_rank_rows(),
                                .balance = BalanceGroup(),
                                .bias_update_rate = c.optim.bias_update_rate,
                                .recompute = c.run.layout.recompute,
                                .bf16 = c.train.precision == spec::Precision::kBf16,
                                .aux_loss_coef = c.optim.aux_loss_coef,
                                .z_loss_coef = c.optim.z_loss_coef};
  // ep > 1: the routed experts' slice is over expert_dp (as the optimizer's expert group).
  const bool expert_group = mesh_ && c.run.layout.ep > 1;
  const model::ParamLayout param_layout = ZeroOptimizer::ParamLayoutFor(
      c.run.layout.zero, mesh_ ? mesh_->dp_cp().size() : 1, mesh_ ? mesh_->dp_cp().rank() : 0,
      expert_group ? model::GroupShape{mesh_->expert_dp().size(), mesh_->expert_dp().rank()}
                   : model::GroupShape{.size = 0, .rank = 0});
  if (pp_size() > 1) {
    model_ = std::make_unique<model::Model>(PipelineChunks(base), alloc_, param_layout);
  } else {
    model_ = std::make_unique<model::Model>(base, alloc_, param_layout);
  }
  model_->params().Init(c.run.seed);
  schedule_ = {.lr_max = c.optim.lr,
               .lr_min = c.optim.min_lr,
               .warmup_steps = c.optim.warmup_steps,
               .total_steps = c.schedule_steps()};
  predicted_ = PredictRun(c);
  if (pp_size() > 1) InitPipeline();  // after predicted_: it sets this stage's memory
  flops_per_token_ = cost::Flops(c.model, c.train.seq_len, c.run.layout.recompute).model;
}

std::vector<model::MicroBatch> Trainer::SplitBatch(const data::Batch& batch,
                                                   int64_t* valid_tokens) {
  const int64_t S = batch.local_seq_len, G = batch.local_batch_seqs, mbs = config_.run.layout.mbs;
  int64_t local_valid = 0;
  for (int32_t t : batch.targets) local_valid += t >= 0 ? 1 : 0;
  // The loss is normalised by the valid tokens of the GLOBAL batch (all dp ranks).
  *valid_tokens =
      static_cast<int64_t>(std::llround(SumOverReplicas(static_cast<double>(local_valid))));
  std::vector<model::MicroBatch> out;
  for (int64_t first = 0; first < G * S; first += mbs * S) {
    const int64_t T = mbs * S;
    out.push_back({.tokens = core::ConstTensor(core::Tensor(
                       const_cast<int32_t*>(batch.tokens.data()) + first, core::Dtype::kI32, {T})),
                   .targets = core::ConstTensor(core::Tensor(
                       const_cast<int32_t*>(batch.targets.data()) + first, core::Dtype::kI32, {T})),
                   .dims = {.batch = mbs, .seq = S},
                   .loss_scale = 1.0f / static_cast<float>(std::max<int64_t>(*valid_tokens, 1)),
                   // Per-token aux terms (z-loss) are means over this rank's routed rows: 1 / cp of
                   // a sequence (and 1 / tp of those with etp = 1).
                   .aux_scale = static_cast<float>(mbs) /
                                static_cast<float>(G * dp_size() * route_shards())});
  }
  return out;
}

double Trainer::RunBatch(const data::Batch& batch, bool train, model::MoeStats* moe,
                         int64_t* valid) {
  if (pipeline_) return RunPipelineBatch(batch, train, moe, valid);
  const std::vector<model::MicroBatch> mbatches = SplitBatch(batch, valid);
  model::Stage& stage = model_->stage();
  double ce = 0;
  for (size_t mb = 0; mb < mbatches.size(); ++mb) {
    model::StageForward f = stage.Forward(static_cast<int64_t>(mb), mbatches[mb], {}, {});
    ce += f.loss_sum;
    if (moe) moe->Add(f.moe);
    if (train) {
      stage.Backward(static_cast<int64_t>(mb), {}, {});
    } else {
      stage.Drop(static_cast<int64_t>(mb));
    }
  }
  return SumOverReplicas(ce);
}

StepStats Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  alloc_.ResetPeaks();
  if (mesh_) mesh_->ResetStats();
  sampler_->NextInto(batch_);
  model::ParamSet& params = model_->params();
  params.ZeroGrads();
  for (size_t c = 0; c < model_->chunks(); ++c)
    model_->chunk(c).TakeRoutedPerMoeLayer();  // drops counts of evaluation forwards
  StepStats s;
  int64_t valid = 0;
  const double ce = RunBatch(batch_, /*train=*/true, &s.moe, &valid);
  if (pipeline_) s.bubble = bubble_;
  SumMoeStats(s.moe);
  s.moe_top_k = config_.model.moe.top_k;
  model_->ReduceSequenceParallelGrads();  // SP: every chunk's norm grads summed over tp
  ++attempts_;
  const RunOptions& run = config_.run;
  if (run.debug_nan_step > 0 && attempts_ >= run.debug_nan_step &&
      attempts_ < run.debug_nan_step + run.debug_nan_count) {
    optimizer_->PoisonGrads();
  }
  s.lr = LearningRate(schedule_, step_);
  // ce is the sum over replicas and the norm is global, so every rank takes the same branch.
  const bool ce_finite = std::isfinite(ce);
  s.grad_norm = optimizer_->Step(s.lr, step_ + 1, ce_finite);
  s.skipped = !std::isfinite(s.grad_norm) || !ce_finite;
  if (s.skipped) {
    ++nonfinite_in_row_;
    ++nonfinite_total_;
  } else {
    nonfinite_in_row_ = 0;
    ++step_;
  }
  UpdateMoeBias();  // after a good step; a skipped step only drops its routed counts
  s.nonfinite_in_row = nonfinite_in_row_;
  s.step = step_;
  if (mesh_) s.comm_bytes = mesh_->StatsJson();
  s.ce_loss = ce / static_cast<double>(std::max<int64_t>(valid, 1));
  s.loss = s.ce_loss + s.moe.aux_loss + s.moe.z_loss;
  s.nonfinite_total = nonfinite_total_;
  if (!s.skipped) {
    s.loss_spike = spikes_.Observe(s.loss);
    s.loss_median = spikes_.last_median();
  }
  s.tokens = config_.train.global_batch_tokens;
  s.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  s.tokens_per_s = static_cast<double>(s.tokens) / s.step_time_s;
  s.mfu = cost::Mfu(flops_per_token_, s.tokens_per_s, HostCluster(config_));
  for (int i = 0; i < core::kMemTagCount; ++i)
    s.peak_bytes[static_cast<size_t>(i)] = alloc_.peak_bytes(static_cast<core::MemTag>(i));
  s.peak_bytes_total = alloc_.peak_bytes_total();
  return s;
}

core::Status Trainer::RestoreProgress(int64_t step, const data::SamplerState& sampler) {
  // run.data_start_step: this run's order starts here, at its first sequence.
  if (step != config_.run.data_start_step || step == 0)
    PM_RETURN_IF_ERROR(sampler_->Restore(sampler));
  step_ = step;
  return core::Status::Ok();
}

double Trainer::Evaluate() {
  auto sampler =
      data::Sampler::Create(*dataset_, {.split = data::Split::kHeldout,
                                        .seq_len = config_.train.seq_len,
                                        .global_batch_seqs = config_.train.global_batch_seqs(),
                                        .seed = config_.run.seed,
                                        .shuffle = false,
                                        .dp_rank = static_cast<int>(dp_rank()),
                                        .dp_size = static_cast<int>(dp_size()),
                                        .cp_rank = static_cast<int>(cp_rank()),
                                        .cp_size = static_cast<int>(cp_size())});
  PM_CHECK(sampler.ok()) << sampler.status().message();
  const int64_t batches = std::min<int64_t>(
      config_.run.eval_batches,
      static_cast<int64_t>(sampler->windows_per_epoch()) / config_.train.global_batch_seqs());
  PM_CHECK(batches >= 1) << "held-out split smaller than one global batch";
  double ce = 0;
  int64_t tokens = 0;
  data::Batch b;
  for (int64_t i = 0; i < batches; ++i) {
    sampler->NextInto(b);
    int64_t valid = 0;
    ce += RunBatch(b, /*train=*/false, nullptr, &valid);
    tokens += valid;
  }
  return ce / static_cast<double>(tokens);
}

core::Result<UnigramBaseline> Trainer::Baseline() const {
  const int64_t V = config_.model.vocab;
  std::vector<double> counts(static_cast<size_t>(V), 1.0);  // add-one smoothing
  std::vector<int32_t> chunk;
  auto read_split = [&](data::Split split, auto&& fn) {
    const uint64_t n = dataset_->tokens(split);
    for (uint64_t start = 0; start < n; start += 1 << 20) {
      const uint64_t count = std::min<uint64_t>(1 << 20, n - start);
      chunk.resize(count);
      dataset_->Read(split, start, count, chunk.data());
      for (int32_t t : chunk) fn(t);
    }
    return n;
  };
  const double train_n = static_cast<double>(
      read_split(data::Split::kTrain, [&](int32_t t) { counts[static_cast<size_t>(t)] += 1; }));
  const double total = train_n + static_cast<double>(V);
  UnigramBaseline b;
  for (double c : counts) b.train_entropy -= (c / total) * std::log(c / total);
  double xent = 0;
  const double held_n = static_cast<double>(read_split(data::Split::kHeldout, [&](int32_t t) {
    xent -= std::log(counts[static_cast<size_t>(t)] / total);
  }));
  if (held_n == 0) return core::Status::Error("data.dataset: the held-out split is empty");
  b.heldout_xent = xent / held_n;
  return b;
}

}  // namespace pentamesh::train

#include "train/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/rng.h"
#include "kernels/cpu/matmul.h"
#include "train/checkpoint_state.h"
#include "train/engine_rules.h"
#include "train/host_cost.h"
#include "train/run_config.h"

namespace pentamesh::train {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Token ids in order of decreasing logit (the lower id first on ties).
std::vector<int32_t> ByLogit(std::span<const float> logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  return ids;
}

}  // namespace

int32_t SampleToken(std::span<const float> logits, const SamplingOptions& o, int64_t step) {
  PM_CHECK(!logits.empty()) << "no logits";
  if (o.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const std::vector<int32_t> ids = ByLogit(logits);
  size_t keep = o.top_k > 0 ? std::min(ids.size(), static_cast<size_t>(o.top_k)) : ids.size();
  // Softmax of logits / T over the kept ids, in double.
  const double top = logits[static_cast<size_t>(ids[0])];
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(ids[i])] - top) / o.temperature);
    sum += p[i];
  }
  if (o.top_p < 1) {  // the smallest prefix whose probability reaches top_p
    double mass = 0;
    size_t n = 0;
    while (n < keep && mass < o.top_p * sum) mass += p[n++];
    keep = std::max<size_t>(n, 1);
    sum = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  const double u =
      core::CounterRng::Uniform(o.seed, core::HashName("generate"), static_cast<uint64_t>(step)) *
      sum;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u <= acc) return ids[i];
  }
  return ids[keep - 1];
}

std::vector<std::string> GenerateLayoutViolations(const spec::ModelSpec& model,
                                                  const spec::Layout& layout, int ranks) {
  std::vector<std::string> out;
  const std::pair<const char*, int64_t> single[] = {
      {"pp", layout.pp}, {"cp", layout.cp}, {"dp", layout.dp}};
  for (const auto& [axis, degree] : single) {
    if (degree != 1)
      out.push_back(fmt::format(
          "layout: {}={}: generate runs tp and ep only ({} must be 1; one sequence, no pipeline "
          "or context split)",
          axis, degree, axis));
  }
  // The planner's and the engine's rules on the model and the degrees (a run of one sequence).
  RunConfig c;
  c.model = model;
  c.run.layout = layout;
  c.run.layout.mbs = 1;
  c.run.layout.sp = false;  // a decode step has one token: nothing to split over tp
  c.train.seq_len = 2;
  c.train.global_batch_tokens = 2 * std::max<int64_t>(layout.data_ranks(), 1);
  if (out.empty()) {
    for (std::string& v : EngineLayoutViolations(c))  // the layout is generate's, not run.layout
      out.push_back(v.starts_with("run.layout:") ? v.substr(4) : v);
  }
  if (out.empty() && layout.gpus() != ranks)
    out.push_back(
        fmt::format("layout: {} needs {} ranks (tp*ep), the job has {}{}",
                    spec::ShortLayout(layout), layout.gpus(), ranks,
                    ranks == 1 ? fmt::format("; run under mpirun -np {}", layout.gpus()) : ""));
  return out;
}

core::Result<std::unique_ptr<Generator>> Generator::Create(const spec::ModelSpec& model,
                                                           const spec::Layout& layout_in,
                                                           comm::World* world) {
  PM_RETURN_IF_ERROR(model::CheckSupported(model));
  spec::Layout layout = layout_in;
  layout.sp = false;  // a decode step has one token: nothing to split over tp
  const std::vector<std::string> bad =
      GenerateLayoutViolations(model, layout, world ? world->size() : 1);
  if (!bad.empty()) return core::Status::Error(fmt::format("{}", fmt::join(bad, "\n")));
  std::unique_ptr<Generator> g(new Generator());
  g->spec_ = model;
  g->spec_.moe.capacity_factor = 0;  // inference is dropless (as Hugging Face's MoE)
  g->layout_ = layout;
  model::StageConfig stage{.model = g->spec_, .first_layer = 0, .last_layer = model.layers};
  if (world != nullptr) {
    PM_ASSIGN_OR_RETURN(mesh::Mesh mesh, mesh::Mesh::Create(layout, *world));
    g->mesh_ = std::make_unique<mesh::Mesh>(std::move(mesh));
    g->world_ = &world->world();
    const mesh::Mesh& m = *g->mesh_;
    stage.shard = {.tp_size = layout.tp,
                   .tp_rank = m.coords().dense.tp,
                   .ep_size = layout.ep,
                   .ep_rank = m.coords().ep,
                   .tp_comm = &m.tp(),
                   .sequence_parallel = false};
    stage.ep = &m.ep();
  } else {
    g->self_ = std::make_unique<comm::SelfCommunicator>("world", 0);
    g->world_ = g->self_.get();
  }
  g->model_ = std::make_unique<model::Model>(stage, g->alloc_);
  return g;
}

core::Result<std::unique_ptr<Generator>> Generator::FromCheckpoint(const ckpt::Checkpoint& ck,
                                                                   const spec::Layout& layout,
                                                                   comm::World* world) {
  PM_ASSIGN_OR_RETURN(RunConfig run, RunConfigOfCheckpoint(ck));
  PM_ASSIGN_OR_RETURN(std::unique_ptr<Generator> g, Create(run.model, layout, world));
  PM_RETURN_IF_ERROR(ckpt::RestoreParams(ck, g->params()));
  for (const auto& [layer, moe] : g->stage().MoeLayers()) {
    const std::string name = MoeBiasName(layer);
    if (!ck.Has(name)) continue;  // saved before biases were checkpointed: all zero
    std::vector<float> bias(moe->bias().size());
    const int64_t e = static_cast<int64_t>(bias.size());
    PM_RETURN_IF_ERROR(ck.ReadRegion(name, {e}, {0}, {e}, bias.data()));
    moe->set_bias(bias);
  }
  return g;
}

core::Result<GenerateResult> Generator::Generate(const GenerateRequest& r) {
  const int64_t P = static_cast<int64_t>(r.prompt.size()), V = spec_.vocab;
  if (P == 0) return core::Status::Error("prompt: empty (give at least one token)");
  kernels::SetBlasThreads(r.threads);
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || r.prompt[i] >= V)
      return core::Status::Error(fmt::format(
          "prompt: token {} at position {} is outside the vocabulary [0, {})", r.prompt[i], i, V));
  }
  if (r.max_new_tokens < 1)
    return core::Status::Error(
        fmt::format("max_new_tokens: {} must be at least 1", r.max_new_tokens));
  if (P + r.max_new_tokens > spec_.max_seq_len)
    return core::Status::Error(fmt::format(
        "max_new_tokens: prompt {} + max_new_tokens {} = {} tokens exceeds model.max_seq_len={}", P,
        r.max_new_tokens, P + r.max_new_tokens, spec_.max_seq_len));
  const SamplingOptions& s = r.sampling;
  if (!(s.temperature >= 0) || !std::isfinite(s.temperature))
    return core::Status::Error(fmt::format("temperature: {} must be >= 0", s.temperature));
  if (s.top_k < 0) return core::Status::Error(fmt::format("top_k: {} must be >= 0", s.top_k));
  if (!(s.top_p > 0 && s.top_p <= 1))
    return core::Status::Error(fmt::format("top_p: {} must be in (0, 1]", s.top_p));

  model::KvCache cache = stage().NewKvCache(P + r.max_new_tokens);
  GenerateResult out;
  out.kv_cache_bytes = cache.bytes();
  out.kv_cache_tokens = cache.capacity();
  std::vector<float> logits(static_cast<size_t>(V));
  std::vector<int32_t> next = r.prompt;
  double decode_ms = 0;
  for (int64_t step = 0; step < r.max_new_tokens; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t n = static_cast<int64_t>(next.size());
    stage().ForwardCached(core::ConstTensor(core::Tensor(next.data(), core::Dtype::kI32, {n})),
                          cache, core::Tensor(logits.data(), {V}));
    int32_t token = SampleToken(logits, s, step);
    world_->broadcast(&token, 1, core::Dtype::kI32, 0);  // every rank continues with rank 0's
    const double ms = MsSince(start);
    (step == 0 ? out.prefill_ms : decode_ms) += ms;
    out.tokens.push_back(token);
    if (r.keep_logits) out.logits.push_back(logits);
    next.assign(1, token);
  }
  const int64_t steps = r.max_new_tokens - 1;
  out.decode_ms_mean = steps > 0 ? decode_ms / static_cast<double>(steps) : 0;
  out.decode_tokens_per_s = out.decode_ms_mean > 0 ? 1000.0 / out.decode_ms_mean : 0;
  out.total_ms = out.prefill_ms + decode_ms;
  out.tokens_per_s = static_cast<double>(r.max_new_tokens) / (out.total_ms / 1000.0);
  return out;
}

cost::ServeEstimate PredictGeneration(RunConfig config, const spec::Layout& layout,
                                      int64_t prompt_tokens, int64_t new_tokens) {
  config.run.layout = layout;  // tp x ep ranks: HostCluster gives each its share of the host
  const spec::ClusterSpec host = HostCluster(config);
  cost::CostParams params = EngineCostParams(config);
  // Decode streams the weights and KV cache through one-row matmuls (sgemv) at the rank's BLAS
  // threads, not at the engine's single-threaded elementwise rate: the rank's measured gemv rate.
  if (const auto& h = config.run.host)
    params.weight_read_efficiency =
        h->WeightReadGbps(RankCores(*h, config), static_cast<double>(host.gpus_per_node)) /
        host.hbm_gbps;
  const cost::Context ctx(config.model, host, config.train, params);
  const cost::ServeWorkload w{.input_tokens = prompt_tokens,
                              .output_tokens = new_tokens,
                              .requests = 1,
                              .precision = spec::Precision::kFp32};
  return cost::EstimateServe(ctx, {.tp = layout.tp, .ep = layout.ep}, w);
}

}  // namespace pentamesh::train

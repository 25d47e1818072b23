// EstimateLayout: assembles the per-stage terms into memory of the most loaded stage, step time
// (slowest stage x micro-batches + bubble + exposed DP + optimizer), MFU/HFU, throughput, days
// and cost. Invariant: with explain = false no allocation happens (the planner's hot loop).
#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "core/collective_bytes.h"
#include "cost/internal.h"
#include "cost/stage_params.h"
#include "schedule/estimate.h"
#include "spec/validate.h"

namespace pentamesh::cost {
namespace {

using internal::Stage;
using internal::StageTime;
using internal::Terms;

// The stages that can be extreme: the first (embedding, most micro-batches in flight), the
// second (full layer count, next most in flight) and the last (LM head and logits).
int CandidateStages(int64_t pp, int64_t out[3]) {
  int n = 0;
  out[n++] = 0;
  if (pp > 2) out[n++] = 1;
  if (pp > 1) out[n++] = pp - 1;
  return n;
}

double OptimizerTime(const Context& ctx, const spec::Layout& l, const Terms& t, const Stage& s) {
  // AdamW reads and writes master weights, m and v, reads the gradient, writes the bf16 weight.
  const double per_param = 2.0 * (t.master_bytes + t.moment_bytes) + t.grad_bytes +
                           (t.master_bytes > 0 ? t.weight_bytes : 0.0);
  const bool shard = l.zero >= 1;
  const double params =
      s.params_dense / (shard ? t.g_dense : 1.0) + s.params_expert / (shard ? t.g_expert : 1.0);
  return params * per_param / (ctx.cluster().hbm_gbps * 1e9 * ctx.params().hbm_efficiency);
}

// Exposed DP/ZeRO seconds of one stage per step. Traffic hides only behind compute that runs while
// it is in flight, and never the first layer's bucket a computation waits for nor the last one
// it produces. ZeRO 0-1: gradients reduce during the LAST micro-batch's backward (the first
// layer's gradients, produced last, stay exposed); ZeRO-2 reduce-scatters every micro-batch's
// gradients during that micro-batch's backward (the engine keeps only the sharded accumulator,
// train/zero_optimizer.h); ZeRO-1/2's updated weights gather during the
// next step's first forward (the first layer's gather stays exposed). ZeRO-3: every micro-batch
// gathers during its forward and gathers + reduce-scatters during its backward; the step's first
// gather and last reduce-scatter (one layer each) stay exposed. The pipeline bubble hides
// nothing: the stage that ends the step (stage 0 of 1F1B) idles before its first backward, when
// no gradient exists yet and its weights are already needed. `compute_mb_s`: the stage's compute
// per micro-batch (forward: a third of it, a quarter with full recomputation).
double ExposedDp(const Context& ctx, const spec::Layout& l, const Terms& t, const Stage& s,
                 double compute_mb_s) {
  double bytes = 0, time_s = 0;
  internal::DpCommunication(l, t, s, bytes, time_s);
  if (time_s <= 0) return 0;
  const double ov = ctx.params().dp_overlap;
  const double fwd_s = compute_mb_s / (l.recompute == spec::Recompute::kFull ? 4.0 : 3.0);
  const double bwd_s = compute_mb_s - fwd_s;
  const double layers = std::max(1.0, s.layers);
  const double w = t.weight_bytes, g = t.grad_reduce_bytes;
  auto hide = [&](double comm_s, double window_s) {
    return std::max(comm_s / layers, comm_s - ov * window_s);
  };
  if (t.dp_comm_zero == 0) return hide(time_s, bwd_s);
  if (t.dp_comm_zero == 1) {
    return hide(time_s * g / (g + w), bwd_s) + hide(time_s * w / (g + w), fwd_s);
  }
  if (t.dp_comm_zero == 2) {  // m reduce-scatters, each behind its own micro-batch's backward
    const double grads_s = time_s * t.m * g / (t.m * g + w);
    return t.m * hide(grads_s / t.m, bwd_s) + hide(time_s - grads_s, fwd_s);
  }
  // Per micro-batch: gather (fwd), gather + reduce-scatter (bwd), each once per layer: the
  // stage's collectives pay the ring latency L times, not once (DpCommunication counts one).
  double latency_s = 0;
  if (s.params_dense > 0) latency_s += (t.dp_link.size - 1) * t.dp_link.alpha_s;
  if (s.params_expert > 0) latency_s += (t.edp_link.size - 1) * t.edp_link.alpha_s;
  const double per_mb = time_s / t.m + 3.0 * (layers - 1.0) * latency_s;
  const double fwd_comm = per_mb * w / (2.0 * w + g), bwd_comm = per_mb - fwd_comm;
  const double exposed_mb =
      std::max(0.0, fwd_comm - ov * fwd_s) + std::max(0.0, bwd_comm - ov * bwd_s);
  const double first_last = (fwd_comm + per_mb * g / (2.0 * w + g)) / layers;
  return std::max(first_last, t.m * exposed_mb);
}

void Explain(const Context& ctx, const spec::Layout& l, Estimate& est) {
  if (est.memory.total <= est.memory.capacity) return;
  const Memory& m = est.memory;
  const auto parts = m.components();
  const auto* largest =
      std::max_element(std::begin(parts), std::end(parts),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  est.violations.push_back(fmt::format(
      "memory: pp stage {} needs {:.1f} GB > capacity {:.1f} GB ({:.0f} GB HBM - {:.1f} GB "
      "margin): over by {:.1f} GB; largest component {} = {:.1f} GB",
      est.memory_stage, m.total / 1e9, m.capacity / 1e9, ctx.cluster().hbm_gb,
      ctx.params().safety_margin_bytes / 1e9, (m.total - m.capacity) / 1e9, largest->first,
      largest->second / 1e9));
  (void)l;
}

}  // namespace

double Mfu(double model_flops_per_token, double tokens_per_s, const spec::ClusterSpec& cluster) {
  const double peak = cluster.peak_tflops * 1e12 * static_cast<double>(cluster.gpus());
  return peak > 0 ? model_flops_per_token * tokens_per_s / peak : 0.0;
}

namespace {

void Rates(const Context& ctx, const spec::Layout& l, Estimate& est) {
  const spec::TrainSpec& train = ctx.train();
  const double gpus = static_cast<double>(ctx.cluster().gpus());
  const double peak = ctx.cluster().peak_tflops * 1e12 * gpus;
  est.tokens_per_s = static_cast<double>(train.global_batch_tokens) / est.time.step;
  est.mfu = Mfu(ctx.flops_none.model, est.tokens_per_s, ctx.cluster());
  est.mfu_causal = Mfu(ctx.flops_none.model_causal, est.tokens_per_s, ctx.cluster());
  est.mfu_6n = Mfu(ctx.flops_none.model_6n, est.tokens_per_s, ctx.cluster());
  const FlopsPerToken f = l.recompute_modules != 0
                              ? Flops(ctx.model(), train.seq_len, l.recompute, l.recompute_modules)
                          : l.recompute == spec::Recompute::kFull      ? ctx.flops_full
                          : l.recompute == spec::Recompute::kSelective ? ctx.flops_selective
                                                                       : ctx.flops_none;
  est.hfu = f.hardware * est.tokens_per_s / peak;
  est.days = train.total_tokens / est.tokens_per_s / 86400.0;
  est.cost_usd = est.days * 24.0 * gpus * train.usd_per_gpu_hour;
}

// Payload of a stage's once-per-step sequence-parallel norm-grad all-reduce (0 without SP).
double SpNormGradBytes(const Terms& t, const Stage& s) {
  return s.layers * t.sp_norm_grad_bytes_layer + s.moe_layers * t.sp_router_grad_bytes +
         (s.last ? t.sp_norm_grad_bytes_head : 0.0);
}

// How often that all-reduce runs per step: once, or with ZeRO-2/3 once per micro-batch (the
// grads exist only per layer, so each layer's norm grads are summed over tp before its
// reduce-scatter, model::Stage::ReduceNormGrads).
double SpNormGradRounds(const spec::Layout& l, const Terms& t) { return l.zero >= 2 ? t.m : 1.0; }

CommBytes StageCommBytes(const spec::Layout& l, const Terms& t, const Stage& s) {
  const double dense_layers = s.layers - s.moe_layers;
  CommBytes b;
  b.tp = t.m * (dense_layers * t.tp_bytes_dense_layer + s.moe_layers * t.tp_bytes_moe_layer +
                (s.first ? t.tp_bytes_embed : 0.0) + (s.last ? t.tp_bytes_head : 0.0)) +
         SpNormGradRounds(l, t) *
             core::AllReduceWireBytes(SpNormGradBytes(t, s), static_cast<int64_t>(t.tp));
  b.cp = t.m * s.layers * t.cp_bytes_layer;
  b.ep = t.m * s.moe_layers * t.ep_bytes_layer;
  b.pp = t.pp > 1 ? t.m * s.sends * t.pp_bytes_send : 0.0;
  double time_unused = 0;
  internal::DpCommunication(l, t, s, b.dp, time_unused);
  (t.balance_over_dp ? b.dp : b.cp) += t.m * s.moe_layers * t.balance_bytes_moe_layer;
  b.tp += t.m * s.moe_layers * t.balance_tp_bytes_moe_layer;
  return b;
}

}  // namespace

double AttentionScoreBlockBytes(int64_t heads, int64_t seq_len, int64_t mbs, int64_t tp, int64_t cp,
                                spec::CpKind cp_kind) {
  const double s = static_cast<double>(seq_len), a = static_cast<double>(heads);
  const double t = static_cast<double>(tp), c = static_cast<double>(cp);
  const double b = static_cast<double>(mbs);
  if (cp_kind == spec::CpKind::kUlysses) return a / (t * c) * s * s * b * 2.0;
  return a / t * (s / c) * (s / c) * b * 2.0;
}

// Bubble time / the pipeline's busy time, from schedule/'s closed form of the bubble fraction f
// (idle / makespan, equal action costs): f / (1 - f).
double BubbleOverIdeal(spec::Schedule schedule, int64_t pp, int64_t microbatches,
                       int64_t virtual_stages) {
  if (pp <= 1 || microbatches <= 0) return 0;
  const auto f = schedule::BubbleFractionClosedForm(schedule, static_cast<double>(pp),
                                                    static_cast<double>(microbatches),
                                                    static_cast<double>(virtual_stages));
  // Every schedule the layout offers has a closed form (ZB-V is not a layout schedule); without
  // one the schedule is simulated (schedule::BubbleFraction, memoized), never approximated.
  double fraction = 0;
  if (f) {
    fraction = *f;
  } else {
    const core::Result<double> simulated =
        schedule::BubbleFraction(schedule, static_cast<int>(pp), static_cast<int>(microbatches),
                                 static_cast<int>(virtual_stages));
    PM_CHECK(simulated.ok()) << simulated.status().message();
    fraction = *simulated;
  }
  return fraction / (1.0 - fraction);
}

double PipelineBubble(spec::Schedule schedule, int64_t pp, int64_t microbatches,
                      int64_t virtual_stages, double first, double middle, double last) {
  if (pp <= 1) return 0;
  const double p = static_cast<double>(pp);
  const double slowest = std::max({first, last, pp > 2 ? middle : 0.0});
  const double all = first + last + (p - 2) * middle;
  return BubbleOverIdeal(schedule, pp, microbatches, virtual_stages) *
         static_cast<double>(microbatches) * (all - slowest) / (p - 1);
}

namespace {

// EstimateLayout past its rule check. REQUIRES: every rule but kTpInNode holds (ComputeTerms
// prices a tp group wider than a node on the inter-node link: MakeLink).
void EstimateValid(const Context& ctx, const spec::Layout& l, bool explain, Estimate& est) {
  Terms t;
  internal::ComputeTerms(ctx, l, t);
  est.microbatches = static_cast<int64_t>(t.m);
  int64_t ranks[3];
  const int n = CandidateStages(l.pp, ranks);
  Stage stages[3];
  StageTime times[3];
  Memory mem;
  double slowest = -1;
  int critical = 0;
  for (int i = 0; i < n; ++i) {
    internal::ComputeStage(ctx, l, t, ranks[i], stages[i]);
    internal::StageMemory(ctx, l, t, stages[i], mem);
    if (i == 0 || mem.total > est.memory.total) {
      est.memory = mem;
      est.memory_stage = ranks[i];
    }
    times[i] = internal::StageMicrobatchTime(t, stages[i]);
    if (times[i].total() > slowest) {
      slowest = times[i].total();
      critical = i;
    }
  }
  est.critical_stage = ranks[critical];
  const StageTime& st = times[critical];
  Time& time = est.time;
  time.compute = t.m * st.compute;
  time.tp = t.m * st.tp;
  if (l.sp && t.tp > 1) {  // the critical stage's once-per-step norm-grad all-reduce
    time.tp += (1.0 - ctx.params().tp_overlap) * SpNormGradRounds(l, t) *
               internal::AllReduceTime(t.tp_link, SpNormGradBytes(t, stages[critical]));
  }
  time.cp = t.m * st.cp;
  time.ep = t.m * st.ep;
  time.pp = t.m * st.pp;
  double* stage_time = est.stage_microbatch_s;
  stage_time[0] = times[0].total();
  stage_time[1] = times[n == 3 ? 1 : 0].total();
  stage_time[2] = times[n - 1].total();
  time.bubble = PipelineBubble(l.schedule, l.pp, est.microbatches, static_cast<int64_t>(t.V),
                               stage_time[0], stage_time[1], stage_time[2]);
  for (int i = 0; i < n; ++i) {
    time.dp = std::max(time.dp, ExposedDp(ctx, l, t, stages[i], times[i].compute));
    time.optimizer = std::max(time.optimizer, OptimizerTime(ctx, l, t, stages[i]));
  }
  time.step = SumOfTerms(time);
  est.bubble_fraction = time.bubble / time.step;
  est.comm_bytes = StageCommBytes(l, t, stages[critical]);
  Rates(ctx, l, est);
  est.fits = est.memory.total <= est.memory.capacity;
  if (explain) Explain(ctx, l, est);
}

}  // namespace

Estimate EstimateLayout(const Context& ctx, const spec::Layout& l, bool explain) {
  Estimate est;
  est.layout = l;
  const Rule rule = CheckLayout(ctx, l);
  if (rule != Rule::kOk) {
    if (explain) est.violations = spec::Validate(ctx.model(), ctx.cluster(), ctx.train(), l);
    return est;
  }
  EstimateValid(ctx, l, explain, est);
  return est;
}

std::optional<Estimate> EstimateTpAcrossNodes(const Context& ctx, const spec::Layout& l) {
  const std::vector<spec::Violation> broken =
      spec::Violations(ctx.model(), ctx.cluster(), ctx.train(), l);
  if (broken.empty()) return std::nullopt;
  for (const spec::Violation& v : broken)
    if (v.rule != Rule::kTpInNode) return std::nullopt;
  Estimate est;
  est.layout = l;
  EstimateValid(ctx, l, /*explain=*/false, est);
  est.fits = false;  // not a layout the planner accepts
  est.violations.push_back(broken.front().message);
  return est;
}

Estimate EstimateLayout(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                        const spec::TrainSpec& train, const spec::Layout& layout,
                        const CostParams& params, bool explain) {
  const Context ctx(model, cluster, train, params);
  return EstimateLayout(ctx, layout, explain);
}

namespace {

// The terms and pipeline rank `pp_rank`'s stage of a valid layout, for the per-stage queries
// below (`who` names the caller in the invariant's message).
void TermsAndStage(const Context& ctx, const spec::Layout& layout, int64_t pp_rank, const char* who,
                   Terms& t, Stage& s) {
  PM_CHECK(CheckLayout(ctx, layout) == Rule::kOk) << who << " on an invalid layout";
  PM_CHECK(pp_rank >= 0 && pp_rank < layout.pp) << who << ": pp_rank=" << pp_rank;
  internal::ComputeTerms(ctx, layout, t);
  internal::ComputeStage(ctx, layout, t, pp_rank, s);
}

}  // namespace

CommBytes CommBytesForStage(const Context& ctx, const spec::Layout& layout, int64_t pp_rank) {
  Terms t;
  Stage s;
  TermsAndStage(ctx, layout, pp_rank, "CommBytesForStage", t, s);
  return StageCommBytes(layout, t, s);
}

Memory MemoryForStage(const Context& ctx, const spec::Layout& layout, int64_t pp_rank) {
  Terms t;
  Stage s;
  TermsAndStage(ctx, layout, pp_rank, "MemoryForStage", t, s);
  Memory mem;
  internal::StageMemory(ctx, layout, t, s, mem);
  return mem;
}

StageParams ParamsForStage(const Context& ctx, const spec::Layout& layout, int64_t pp_rank) {
  Terms t;
  Stage s;
  TermsAndStage(ctx, layout, pp_rank, "ParamsForStage", t, s);
  return {.layers = s.layers,
          .moe_layers = s.moe_layers,
          .params_dense = s.params_dense,
          .params_expert = s.params_expert};
}

}  // namespace pentamesh::cost

// Inference cost model (cost/inference.h; docs/COST_MODEL.md, "Inference"). Reuses the training
// model's facts: parameter counts (CountParams via Context), attention widths and KV widths
// (AttentionShapeOf), attention FLOPs (AttentionForwardFlops), the GEMM efficiency (GemmEfficiency;
// FP8 and FP4 GEMMs at ServeGemmSpeedup, the peaks' ratio), links and collective times
// (internal::MakeLink, AllReduceTime, AllToAllTime, P2pTime).
#include "cost/inference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cost/internal.h"

namespace pentamesh::cost {
namespace {

constexpr double kGB = 1e9;
constexpr double kActivationBytes = 2;  // bf16 activations on the wire and in HBM
constexpr double kP95 = 0.95;

// Everything per (layout, workload) the memory and time terms share.
struct Serve {
  double tp = 1, ep = 1, pp = 1;
  double hidden = 0, layers = 0, moe_layers = 0, experts = 0, top_k = 0;
  double weight_bytes = 2, kv_bytes = 2;
  double resident = 0;  // routed experts per MoE layer an ep group keeps in HBM
  double hit = 1;       // fraction of touched experts found in HBM
  double requests_replica = 1, requests_group = 1;
  double hbm_Bps = 1, pcie_Bps = 1, gemm_flops_s = 1, attention_flops_s = 1;
  double read_Bps = 1;  // streaming the weights and KV cache (CostParams::weight_read_efficiency)
  internal::Link tp_link, ep_link, pp_link;
};

double WeightBytes(spec::Precision p, int weight_only_bits, bool fp4) {
  if (fp4) return kNvfp4Bytes;
  if (weight_only_bits > 0) {
    return weight_only_bits / 8.0 + kActivationBytes / static_cast<double>(kWeightOnlyGroup);
  }
  switch (p) {
    case spec::Precision::kFp8:
      return 1;
    case spec::Precision::kFp32:
      return 4;
    case spec::Precision::kBf16:
      return 2;
  }
  return 2;
}

double CeilDiv(double a, double b) { return std::ceil(a / b); }

Serve MakeServe(const Context& ctx, const ServeLayout& l, const ServeWorkload& w) {
  const spec::ModelSpec& m = ctx.model();
  const spec::ClusterSpec& c = ctx.cluster();
  Serve s;
  s.tp = static_cast<double>(l.tp);
  s.ep = static_cast<double>(l.ep);
  s.pp = static_cast<double>(l.pp);
  s.hidden = static_cast<double>(m.hidden);
  s.layers = static_cast<double>(m.layers);
  s.moe_layers = static_cast<double>(ctx.MoeLayers(0, m.layers));
  s.experts = static_cast<double>(m.moe.experts);
  s.top_k = static_cast<double>(m.moe.top_k);
  s.weight_bytes = WeightBytes(w.precision, w.weight_only_bits, w.fp4);
  // The KV cache is BF16 (FP8 with kv_fp8) beside BF16 or FP8 weights, FP32 beside FP32 ones.
  s.kv_bytes = w.kv_fp8 ? 1.0 : (w.precision == spec::Precision::kFp32 ? 4.0 : 2.0);
  const double owned = m.is_moe() ? s.experts / s.ep : 0.0;
  s.resident =
      w.experts_in_hbm > 0 ? std::min(owned, static_cast<double>(w.experts_in_hbm)) : owned;
  s.hit = w.experts_in_hbm > 0 ? w.expert_hit_rate : 1.0;
  s.requests_replica = CeilDiv(static_cast<double>(w.requests), static_cast<double>(l.replicas));
  s.requests_group = CeilDiv(s.requests_replica, s.ep);
  s.hbm_Bps = c.hbm_gbps * kGB * ctx.params().hbm_efficiency;
  const double read = ctx.params().weight_read_efficiency;
  s.read_Bps = read > 0 ? c.hbm_gbps * kGB * read : s.hbm_Bps;
  s.pcie_Bps = w.pcie_gbps * kGB;
  const bool fp8 = w.precision == spec::Precision::kFp8 && c.peak_fp8_tflops > 0;
  const double gemm = c.peak_tflops * 1e12 * GemmEfficiency(ctx);
  s.gemm_flops_s = gemm * (fp8 ? ServeGemmSpeedup(ctx, w.fp4) : 1.0);
  s.attention_flops_s = gemm * ctx.params().attention_relative;  // attention stays BF16
  // Rank order pp-ep-tp (tp innermost): a node holds gpus_per_node consecutive ranks.
  const double gpn = static_cast<double>(std::max<int64_t>(1, c.gpus_per_node));
  const double tp_node = std::min(s.tp, gpn);
  const double ep_node = std::clamp(gpn / s.tp, 1.0, s.ep);
  const double pp_node = std::clamp(gpn / (s.tp * s.ep), 1.0, s.pp);
  s.tp_link = internal::MakeLink(ctx, s.tp, tp_node);
  s.ep_link = internal::MakeLink(ctx, s.ep, ep_node);
  s.pp_link = internal::MakeLink(ctx, s.pp, pp_node);
  return s;
}

// KV bytes of one request of `len` tokens held by the tp group of every stage together (the whole
// model's layers), per GPU of that group: sliding-window layers keep at most their window.
double KvBytesAllStages(const Context& ctx, const Serve& s, double len) {
  const spec::ModelSpec& m = ctx.model();
  const AttentionShape& a = ctx.attention();
  const double local = static_cast<double>(LocalLayerCount(m));
  const double window = m.sliding_window > 0 ? static_cast<double>(m.sliding_window) : len;
  const double tokens = (s.layers - local) * len + local * std::min(window, len);
  // GQA splits kv heads over tp; tp beyond kv_heads replicates them (each rank keeps one head).
  const double split =
      a.kv_cache_over_tp ? std::min(s.tp, static_cast<double>(ctx.model().kv_heads)) : 1.0;
  return tokens * a.kv_cache / split * s.kv_bytes;
}

// Routed-expert parameters of all MoE layers that one GPU's tp shard holds per resident expert.
double ExpertBytesPerGpu(const Context& ctx, const Serve& s, double experts_per_layer) {
  return s.moe_layers * experts_per_layer * ctx.expert_params_one * s.weight_bytes / s.tp;
}

void MemoryTerms(const Context& ctx, const ServeLayout& l, const ServeWorkload& w, const Serve& s,
                 ServeEstimate& e) {
  const spec::ModelSpec& m = ctx.model();
  const ParamCounts& counts = ctx.counts();
  ServeMemory& mem = e.memory;
  mem.weights = counts.non_expert() * s.weight_bytes / (s.tp * s.pp) +
                ExpertBytesPerGpu(ctx, s, s.resident) / s.pp;
  const double len = static_cast<double>(w.input_tokens + w.output_tokens);
  e.kv_bytes_per_token = s.layers * ctx.attention().kv_cache * s.kv_bytes;
  e.kv_bytes_per_token_gpu = KvBytesAllStages(ctx, s, 1.0) / s.pp;
  e.kv_bytes_per_request_gpu = KvBytesAllStages(ctx, s, len) / s.pp;
  // One layer's prefill working set: residual, norm output, q/k/v and attention output (4 h), the
  // FFN's gate, up and product (3 widths over tp; routed tokens count top_k times).
  const double ffn_dense = s.layers > s.moe_layers ? static_cast<double>(m.ffn_hidden) : 0.0;
  const double ffn_moe = (s.top_k + static_cast<double>(m.moe.shared_experts)) *
                         static_cast<double>(m.moe.expert_ffn_hidden);
  const double per_token =
      kActivationBytes * (4.0 * s.hidden + 3.0 * std::max(ffn_dense, ffn_moe) / s.tp);
  mem.activations = static_cast<double>(w.input_tokens) * per_token;
  // The engine sizes its KV cache after a profile run of a full step (vLLM's dummy batch of
  // max_num_batched_tokens): that step's working set is held back whatever the prompts.
  mem.activation_reserve = static_cast<double>(w.engine.max_batched_tokens) * per_token;
  mem.framework = ctx.params().framework_bytes;
  // The engine's share of the device (vLLM: gpu_memory_utilization x total device memory), or
  // of what is left after the weights, the step and the framework (TensorRT-LLM).
  const bool of_free = w.engine.profile.memory_fraction_of_free;
  const double util = w.engine.gpu_memory_utilization;
  mem.capacity = ctx.cluster().usable_hbm_bytes() * (of_free ? 1.0 : util);
  const double left = mem.capacity - mem.weights -
                      std::max(mem.activations, mem.activation_reserve) - mem.framework;
  const double free = of_free && left > 0 ? util * left : left;
  const double fit = free > 0 ? std::floor(free / e.kv_bytes_per_request_gpu) : 0.0;
  e.requests_fit = static_cast<int64_t>(fit * s.ep);
  e.tokens_fit = free > 0 ? free / e.kv_bytes_per_token_gpu : 0.0;
  e.kv_blocks =
      static_cast<int64_t>(std::floor(e.tokens_fit / static_cast<double>(w.engine.block_tokens)));
  e.requests_per_group = static_cast<int64_t>(s.requests_group);
  mem.kv_cache = s.requests_group * e.kv_bytes_per_request_gpu;
  mem.total = mem.weights + mem.kv_cache + mem.activations + mem.framework;
  e.experts_per_gpu = s.resident;
  if (free <= 0) {
    e.violations.push_back(fmt::format(
        "memory: weights {:.1f} GB + prefill activations {:.1f} GB + framework {:.1f} GB exceed "
        "the {:.1f} GB per GPU at {} (raise --tp, --ep or --pp{})",
        mem.weights / kGB, std::max(mem.activations, mem.activation_reserve) / kGB,
        mem.framework / kGB, mem.capacity / kGB, FormatServeLayout(l),
        w.precision == spec::Precision::kBf16 && w.weight_only_bits == 0 ? ", or --precision fp8"
                                                                         : ""));
  } else if (fit < 1) {
    e.violations.push_back(fmt::format(
        "--input-tokens/--output-tokens: the KV cache of one request ({} tokens) needs {:.1f} GB "
        "per GPU, only {:.1f} GB is left after the weights at {}",
        w.input_tokens + w.output_tokens, e.kv_bytes_per_request_gpu / kGB, free / kGB,
        FormatServeLayout(l)));
  } else if (fit < s.requests_group) {
    e.violations.push_back(fmt::format(
        "--requests: {} requests per ep group need {:.1f} GB of KV cache per GPU, {:.1f} GB is "
        "free (at most {:.0f} fit) at {}",
        e.requests_per_group, mem.kv_cache / kGB, free / kGB, fit, FormatServeLayout(l)));
  }
}

// The forward pass of one micro-batch of one sequence at tp x ep (the training model's forward
// layer time, summed over the layers); the request's routed tokens spread over the ep groups'
// experts. Calls f(pass, terms, layers) with the pass's Context, its Terms and the layer count of
// each kind [moe][local].
template <typename F>
void WithForwardPass(const Context& ctx, const ServeWorkload& w, const Serve& s, F&& f) {
  const spec::ModelSpec& m = ctx.model();
  spec::TrainSpec train = ctx.train();
  train.seq_len = w.input_tokens;
  train.global_batch_tokens = w.input_tokens;
  train.precision = w.precision;
  const Context pass(m, ctx.cluster(), train, ctx.params());
  spec::Layout layout;
  layout.tp = static_cast<int64_t>(s.tp);
  layout.ep = static_cast<int64_t>(s.ep);
  layout.sp = false;
  internal::Terms t;
  internal::ComputeTerms(pass, layout, t);
  t.expert_sources = 1;
  t.touched_experts_only = true;
  t.fp8_weights_stored = true;
  // FP8 weights on a GPU without FP8 tensor cores run weight-only too (W8A16: vLLM's FP8 Marlin
  // path on Ampere): read as FP8, multiplied at the BF16 rate.
  const bool fp8_weight_only =
      w.precision == spec::Precision::kFp8 && ctx.cluster().peak_fp8_tflops <= 0;
  if (w.weight_only_bits > 0 || fp8_weight_only) t.weight_elem_bytes = s.weight_bytes;
  if (t.fp8) {
    t.fp8_speedup = ServeGemmSpeedup(ctx, w.fp4);
    if (w.fp4) t.fp8_operand_bytes = kNvfp4Bytes;
  }
  double layers[2][2] = {{0, 0}, {0, 0}};
  for (int64_t i = 0; i < m.layers; ++i) layers[m.IsMoeLayer(i)][m.IsLocalLayer(i)] += 1;
  f(pass, t, layers);
}

// Forward seconds of one sequence of input_tokens, summed over the layers.
double ForwardTime(const Context& ctx, const ServeWorkload& w, const Serve& s) {
  double total = 0;
  WithForwardPass(ctx, w, s, [&](const Context& pass, const internal::Terms& t, auto& layers) {
    for (int moe = 0; moe < 2; ++moe) {
      for (int local = 0; local < 2; ++local) {
        if (layers[moe][local] == 0) continue;
        total += layers[moe][local] * internal::LayerForwardTime(pass, t, moe, local);
      }
    }
  });
  return total;
}

// The layers' forward of a step of `n` token rows without their core attention (the GEMMs,
// norms, routing), summed over the layers; pass, terms, layers: WithForwardPass's.
double LinearLayersTime(const Context& pass, const internal::Terms& terms,
                        const double (&layers)[2][2], double n) {
  internal::Terms t = terms;
  t.tokens = t.seq = n;
  double linear = 0;
  for (int moe = 0; moe < 2; ++moe) {
    for (int local = 0; local < 2; ++local) {
      if (layers[moe][local] == 0) continue;
      const double core =
          internal::AttentionCoreForwardTime(pass, t, AttentionKeysOf(pass.model(), n, local));
      linear += layers[moe][local] * (internal::LayerForwardTime(pass, t, moe, local) - core);
    }
  }
  return linear;
}

// The core attention's seconds per (query, key) pair of one layer.
double AttentionPairTime(const Context& pass, const internal::Terms& terms) {
  internal::Terms one = terms;  // one query over one key
  one.tokens = 1;
  return internal::AttentionCoreForwardTime(pass, one, {.full = 1, .causal = 1});
}

// Forward seconds of the last `tokens` tokens of one sequence whose first `cached` tokens are in
// the prefix cache: the rows of `tokens` through the linear layers, their attention over the
// cached and their own causal keys (the simulation's step cost of such a prefill, less its
// reads and overheads).
double PrefixForwardTime(const Context& ctx, const ServeWorkload& w, const Serve& s, double cached,
                         double tokens) {
  double total = 0;
  WithForwardPass(ctx, w, s, [&](const Context& pass, const internal::Terms& t, auto& layers) {
    const double pair = AttentionPairTime(pass, t);
    const double window = static_cast<double>(pass.model().sliding_window);
    total = LinearLayersTime(pass, t, layers, tokens);
    for (int moe = 0; moe < 2; ++moe) {
      total += layers[moe][0] * pair * CausalPairs(cached, tokens, 0);
      total += layers[moe][1] * pair * CausalPairs(cached, tokens, window);
    }
  });
  return total;
}

// TP all-reduces (2 a layer), EP all-to-alls (dispatch + combine a MoE layer) and PP sends of
// one forward pass of `tokens` tokens.
double CommTime(const Serve& s, double tokens) {
  const double act = tokens * s.hidden * kActivationBytes;
  return 2.0 * s.layers * internal::AllReduceTime(s.tp_link, act) +
         2.0 * s.moe_layers * internal::AllToAllTime(s.ep_link, act * s.top_k / s.tp) +
         (s.pp - 1.0) * internal::P2pTime(s.pp_link, act);
}

// Prefill of one request of input_tokens on one ep group's tp x pp GPUs (its experts' work spread
// over the ep groups): its forward pass or the weights' read, whichever is longer, expert fetches
// prefetched under it, then the per-layer overhead (CostParams::inference_layer_overhead_s), the
// exposed TP all-reduces (2 a layer), EP all-to-alls (dispatch + combine a MoE layer), PP sends.
void Prefill(const Context& ctx, const ServeWorkload& w, const Serve& s, ServeEstimate& e) {
  // A cached prefix is not computed: the rest of the prompt attends to it.
  const int64_t cached = CachedPrefixTokens(w, w.input_tokens);
  const double tokens = static_cast<double>(w.input_tokens - cached);
  const double compute = cached > 0
                             ? PrefixForwardTime(ctx, w, s, static_cast<double>(cached), tokens)
                             : ForwardTime(ctx, w, s);
  const double read = e.memory.weights * s.pp / s.read_Bps;  // every stage reads its weights once
  e.prefill_compute_s = std::max(compute, read);
  const double touched = ExpertsTouched(s.experts, s.top_k, tokens) / s.ep;
  e.prefill_offload_s = ExpertBytesPerGpu(ctx, s, touched * (1.0 - s.hit)) / s.pcie_Bps;
  const double act = tokens * s.hidden * kActivationBytes;
  e.prefill_tp_s = 2.0 * s.layers * internal::AllReduceTime(s.tp_link, act);
  e.prefill_ep_s = 2.0 * s.moe_layers * internal::AllToAllTime(s.ep_link, act * s.top_k / s.tp);
  e.prefill_pp_s = (s.pp - 1.0) * internal::P2pTime(s.pp_link, act);
  e.prefill_overhead_s = s.layers * ctx.params().inference_layer_overhead_s;
  e.prefill_s = std::max(e.prefill_compute_s, e.prefill_offload_s) + e.prefill_overhead_s +
                e.prefill_tp_s + e.prefill_ep_s + e.prefill_pp_s;
}

// One decode step of the group's batch (one new token per request), summed over the pp stages:
// the slowest of HBM reads (weights the step touches + the batch's KV cache), compute and PCIe
// expert fetches, plus the per-layer overhead and the exposed TP all-reduces, EP all-to-alls and
// PP sends of one token each.
void Decode(const Context& ctx, const ServeWorkload& w, const Serve& s, ServeEstimate& e) {
  const double batch = s.requests_group;
  // Mean context over the decode: the prompt plus half of the output.
  const double context =
      static_cast<double>(w.input_tokens) + 0.5 * static_cast<double>(w.output_tokens);
  const double embedding = ctx.counts().embedding;  // a lookup of batch rows, not a read
  const double dense_bytes = (ctx.counts().non_expert() - embedding) * s.weight_bytes / s.tp;
  // Tokens of the whole replica meet in the experts: each ep group reads its touched experts.
  e.experts_touched = ExpertsTouched(s.experts, s.top_k, s.requests_replica);
  const double touched = e.experts_touched / s.ep;
  e.decode_weights_s = (dense_bytes + ExpertBytesPerGpu(ctx, s, touched)) / s.read_Bps;
  e.decode_kv_s = batch * KvBytesAllStages(ctx, s, context) / s.read_Bps;
  e.decode_offload_s = ExpertBytesPerGpu(ctx, s, touched * (1.0 - s.hit)) / s.pcie_Bps;
  const double gemm_flops = 2.0 * batch * ctx.counts().active_matmul / s.tp;
  const double attention_flops = batch * AttentionForwardFlops(ctx.model(), context, false) / s.tp;
  e.decode_compute_s = gemm_flops / s.gemm_flops_s + attention_flops / s.attention_flops_s;
  const double act = batch * s.hidden * kActivationBytes;
  e.decode_tp_s = 2.0 * s.layers * internal::AllReduceTime(s.tp_link, act);
  e.decode_ep_s = 2.0 * s.moe_layers * internal::AllToAllTime(s.ep_link, act * s.top_k / s.tp);
  e.decode_pp_s = (s.pp - 1.0) * internal::P2pTime(s.pp_link, act);
  const double memory = e.decode_weights_s + e.decode_kv_s;
  e.decode_overhead_s = s.layers * ctx.params().inference_layer_overhead_s;
  e.itl_s = std::max({memory, e.decode_compute_s, e.decode_offload_s}) + e.decode_overhead_s +
            e.decode_tp_s + e.decode_ep_s + e.decode_pp_s;
}

// TTFT (the queue model of inference.h), the batch's time and cost.
void Totals(const ServeLayout& l, const ServeWorkload& w, const Serve& s, ServeEstimate& e) {
  const double n = s.requests_group;
  e.ttft_mean_s = 0.5 * (n + 1.0) * e.prefill_s;
  e.ttft_p95_s = std::ceil(kP95 * n) * e.prefill_s;
  const double steps = static_cast<double>(w.output_tokens - 1);
  e.request_s = n * e.prefill_s + steps * e.itl_s;
  const double gpus = static_cast<double>(l.gpus_per_replica());
  const double outputs = s.requests_replica * static_cast<double>(w.output_tokens);
  e.output_tokens_per_s_gpu = outputs / (e.request_s * gpus);
  const double usd_batch = gpus * w.usd_per_gpu_hour * e.request_s / 3600.0;
  e.usd_per_request = usd_batch / s.requests_replica;
  e.usd_per_million_output_tokens = usd_batch / outputs * 1e6;
}

// --experts-in-hbm and --expert-hit-rate against the model and the layout.
void AddOffloadRules(const spec::ModelSpec& m, const ServeLayout& l, const ServeWorkload& w,
                     std::vector<std::string>& out) {
  auto add = [&out](std::string message) { out.push_back(std::move(message)); };
  if (w.experts_in_hbm > 0 && !m.is_moe()) {
    add(fmt::format("--experts-in-hbm: {} is dense: it has no experts to offload", m.name));
  } else if (m.is_moe() && w.experts_in_hbm > m.moe.experts / l.ep) {
    add(
        fmt::format("--experts-in-hbm: {} exceeds the {} experts a MoE layer has per ep group "
                    "(experts {} / ep {})",
                    w.experts_in_hbm, m.moe.experts / l.ep, m.moe.experts, l.ep));
  }
  if (w.expert_hit_rate < 1.0 && w.experts_in_hbm == 0) {
    add("--expert-hit-rate: applies to offloaded experts; set --experts-in-hbm too");
  }
  if (!(w.prefix_hit_rate >= 0 && w.prefix_hit_rate < 1)) {
    add(fmt::format("--prefix-hit-rate: {} must be in [0, 1)", w.prefix_hit_rate));
  }
}

}  // namespace

std::vector<std::string> ServeRuleViolations(const Context& ctx, const ServeLayout& l,
                                             const ServeWorkload& w) {
  const spec::ModelSpec& m = ctx.model();
  const spec::ClusterSpec& c = ctx.cluster();
  std::vector<std::string> out;
  auto add = [&out](std::string message) { out.push_back(std::move(message)); };
  if (l.tp < 1 || l.ep < 1 || l.pp < 1 || l.replicas < 1) {
    add(fmt::format("--tp/--ep/--pp/--replicas: each must be >= 1 ({})", FormatServeLayout(l)));
    return out;
  }
  if (w.input_tokens < 1 || w.output_tokens < 1 || w.requests < 1) {
    add("--input-tokens/--output-tokens/--requests: each must be >= 1");
    return out;
  }
  const int64_t len = w.input_tokens + w.output_tokens;
  if (len > m.max_seq_len) {
    add(
        fmt::format("--output-tokens: input {} + output {} = {} tokens exceed the context of {} "
                    "(max_seq_len = {})",
                    w.input_tokens, w.output_tokens, len, m.name, m.max_seq_len));
  }
  if (m.heads % l.tp != 0) {
    add(fmt::format("--tp: {} does not divide the {} attention heads of {}", l.tp, m.heads,
                    m.name));
  }
  if (!m.is_mla() && m.kv_heads % l.tp != 0 && l.tp % m.kv_heads != 0) {
    add(fmt::format(
        "--tp: {} and kv_heads = {} of {}: neither divides the other, so the KV heads (and their "
        "cache) cannot be split or replicated evenly over tp",
        l.tp, m.kv_heads, m.name));
  }
  if (l.tp > c.gpus_per_node) {
    add(
        fmt::format("--tp: {} exceeds the {} GPUs of a node ({}): TP all-reduces twice a layer "
                    "and stays on NVLink",
                    l.tp, c.gpus_per_node, c.name));
  }
  if (l.ep > 1 && !m.is_moe()) add(fmt::format("--ep: {} is dense: it has no experts", m.name));
  if (m.is_moe() && m.moe.experts % l.ep != 0) {
    add(fmt::format("--ep: {} does not divide the {} experts of {}", l.ep, m.moe.experts, m.name));
  }
  if (m.layers % l.pp != 0) {
    add(fmt::format("--pp: {} does not divide the {} layers of {}", l.pp, m.layers, m.name));
  }
  if (l.gpus() > c.gpus()) {
    add(fmt::format("--replicas: {} needs {} GPUs, the cluster {} has {} (--gpus)",
                    FormatServeLayout(l), l.gpus(), c.name, c.gpus()));
  }
  AddOffloadRules(m, l, w, out);
  if (w.fp4 && (w.precision != spec::Precision::kFp8 || w.weight_only_bits != 0)) {
    add("--precision: fp4 is NVFP4 weights and GEMMs (precision fp8, no weight-only bits)");
  } else if (w.fp4 && c.peak_fp4_tflops <= 0) {
    add(
        fmt::format("--precision: fp4 needs a GPU with FP4 tensor cores (peak_fp4_tflops); {} has "
                    "none",
                    c.name));
  }
  if (w.weight_only_bits != 0 && ((w.weight_only_bits != 4 && w.weight_only_bits != 8) ||
                                  w.precision != spec::Precision::kBf16)) {
    add(
        fmt::format("--precision: weight-only quantization takes 8 or 4 bits beside BF16 GEMMs "
                    "(got {} bits with {} GEMMs)",
                    w.weight_only_bits, spec::PrecisionName(w.precision)));
  }
  const ServeEngine& engine = w.engine;
  if (!(engine.gpu_memory_utilization > 0 && engine.gpu_memory_utilization <= 1)) {
    add(fmt::format("--gpu-memory-utilization: {} must be in (0, 1]",
                    engine.gpu_memory_utilization));
  }
  if (engine.max_batched_tokens < 1 || engine.max_seqs < 1 || engine.block_tokens < 1) {
    add("--max-batched-tokens/--max-seqs/--block-size: each must be >= 1");
  }
  const ServeEngineProfile& p = engine.profile;
  if (!(p.attention_efficiency > 0) || !(p.step_overhead_s >= 0) || !(p.seq_overhead_s >= 0) ||
      !(p.frontend_s >= 0)) {
    add(fmt::format(
        "--engine: profile {} needs attention_efficiency > 0 and overheads >= 0 (got {}, {} s, "
        "{} s, front end {} s)",
        p.name, p.attention_efficiency, p.step_overhead_s, p.seq_overhead_s, p.frontend_s));
  }
  return out;
}

ServeEstimate EstimateServe(const Context& ctx, const ServeLayout& l, const ServeWorkload& w) {
  ServeEstimate e;
  e.layout = l;
  e.violations = ServeRuleViolations(ctx, l, w);
  if (!e.violations.empty()) return e;
  const Serve s = MakeServe(ctx, l, w);
  MemoryTerms(ctx, l, w, s, e);
  Prefill(ctx, w, s, e);
  Decode(ctx, w, s, e);
  Totals(l, w, s, e);
  e.fits = e.violations.empty();
  return e;
}

int64_t CachedPrefixTokens(const ServeWorkload& w, int64_t input_tokens) {
  if (!(w.prefix_hit_rate > 0) || input_tokens < 2) return 0;
  const auto cached =
      static_cast<int64_t>(std::floor(w.prefix_hit_rate * static_cast<double>(input_tokens)));
  return std::min(cached, input_tokens - 1);
}

double KvTransferSeconds(const Context& ctx, const ServeLayout& l, const ServeWorkload& w) {
  const Serve s = MakeServe(ctx, l, w);
  const internal::Link link = internal::MakeLink(ctx, 2, 1);  // two ranks in two nodes
  const double bytes = KvBytesAllStages(ctx, s, static_cast<double>(w.input_tokens)) / s.pp;
  return bytes / link.nic_Bps + link.alpha_s;
}

ServeStepCost MakeServeStepCost(const Context& ctx, const ServeLayout& l, const ServeWorkload& w) {
  const spec::ModelSpec& m = ctx.model();
  const Serve s = MakeServe(ctx, l, w);
  ServeStepCost c;
  // The linear layers' forward time at the grid's token counts (powers of two up to the step
  // budget, and the prompt, so that a lone prefill is EstimateServe's): every layer's forward
  // without its core attention, for a step of that many tokens (the rows of its GEMMs).
  std::vector<double> grid = {
      static_cast<double>(w.input_tokens),
      static_cast<double>(w.input_tokens - CachedPrefixTokens(w, w.input_tokens))};
  const auto budget = static_cast<double>(std::max(w.engine.max_batched_tokens, w.input_tokens));
  for (double n = 1; n <= 2 * budget; n *= 2) grid.push_back(n);
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  WithForwardPass(ctx, w, s, [&](const Context& pass, const internal::Terms& terms, auto& layers) {
    const double pair = AttentionPairTime(pass, terms);
    for (int moe = 0; moe < 2; ++moe) {
      c.attention_s_per_pair_global += layers[moe][0] * pair;
      c.attention_s_per_pair_local += layers[moe][1] * pair;
    }
    for (double n : grid) {
      c.linear_tokens.push_back(n);
      c.linear_s.push_back(LinearLayersTime(pass, terms, layers, n));
    }
  });
  const double embedding = ctx.counts().embedding;  // a lookup of the step's rows, not a read
  c.dense_read_s = (ctx.counts().non_expert() - embedding) * s.weight_bytes / s.tp / s.read_Bps;
  c.expert_read_s_one = ExpertBytesPerGpu(ctx, s, 1.0) / s.read_Bps;
  c.expert_offload_s_one = ExpertBytesPerGpu(ctx, s, 1.0 - s.hit) / s.pcie_Bps;
  c.experts = s.experts;
  c.top_k = s.top_k;
  c.ep = s.ep;
  // KV of one token in one layer on one GPU (len 1 is inside any window).
  const double kv_layer_token = KvBytesAllStages(ctx, s, 1.0) / s.layers / s.read_Bps;
  const double local = static_cast<double>(LocalLayerCount(m));
  c.kv_s_per_token_global = kv_layer_token * (s.layers - local);
  c.kv_s_per_token_local = kv_layer_token * local;
  c.window = local > 0 ? static_cast<double>(m.sliding_window) : 0.0;
  c.overhead_s = s.layers * ctx.params().inference_layer_overhead_s;
  // The collectives are affine in the bytes (alpha + n / bandwidth): two points give the line.
  const double one = CommTime(s, 1.0), two = CommTime(s, 2.0);
  c.comm_s_per_token = two - one;
  c.comm_fixed_s = one - c.comm_s_per_token;
  return ApplyServeEngineProfile(c, w.engine.profile);
}

Context ServeContext(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                     CostParams params, const spec::TrainSpec& train) {
  if (params.inference_attention_relative > 0) {
    params.attention_relative = params.inference_attention_relative;
  }
  // The training fit's MoE terms (a training step's per-expert grouped-GEMM cost, its EP overlap)
  // stay out of serving: no per-expert cost, the all-to-all exposed.
  params.expert_gemm_overhead_s = 0;
  params.ep_overlap = 0;
  // So does the GPU's attention factor, fitted on training's forward and backward kernels: a
  // serving engine's attention rate is its profile's (ServeEngineProfile::attention_efficiency).
  spec::ClusterSpec serving = cluster;
  serving.attention_factor = 0;
  return Context(model, serving, train, params);
}

bool ParseServeWeights(const std::string& name, ServeWorkload& w) {
  if (name == "bf16" || name == "fp8" || name == "fp4") {
    w.precision = name == "bf16" ? spec::Precision::kBf16 : spec::Precision::kFp8;
    w.weight_only_bits = 0;
    w.fp4 = name == "fp4";
    return true;
  }
  if (name == "int8" || name == "int4") {
    w.precision = spec::Precision::kBf16;
    w.weight_only_bits = name == "int8" ? 8 : 4;
    w.fp4 = false;
    return true;
  }
  return false;
}

std::string ServeWeightsName(spec::Precision precision, int weight_only_bits, bool fp4) {
  if (fp4) return "fp4";
  if (weight_only_bits > 0) return fmt::format("int{}", weight_only_bits);
  return spec::PrecisionName(precision);
}

const std::vector<std::string>& ServeWeightsNames() {
  static const std::vector<std::string> names = {"bf16", "fp8", "fp4", "int8", "int4"};
  return names;
}

ServeStepCost ApplyServeEngineProfile(ServeStepCost c, const ServeEngineProfile& profile) {
  // The attention kernel at a fraction of its roofline; the engine's own time a step.
  const double attention = 1.0 / profile.attention_efficiency;
  c.attention_s_per_pair_global *= attention;
  c.attention_s_per_pair_local *= attention;
  c.kv_s_per_token_global *= attention;
  c.kv_s_per_token_local *= attention;
  c.step_overhead_s = profile.step_overhead_s;
  c.seq_overhead_s = profile.seq_overhead_s;
  return c;
}

double CausalPairs(double prior, double tokens, double window) {
  // Pairs of the first n tokens: n^2 / 2, or n w - w^2 / 2 once n passes the window w
  // (AttentionKeysOf's causal keys times n).
  auto first = [window](double n) {
    return window > 0 && n > window ? n * window - 0.5 * window * window : 0.5 * n * n;
  };
  return first(prior + tokens) - first(prior);
}

namespace {

// The linear layers' time at `tokens`: linear between the grid's points (the time is piecewise
// affine in the rows: each GEMM the longer of two affine terms), affine past its last two.
double LinearTime(const ServeStepCost& c, double tokens) {
  const std::vector<double>& x = c.linear_tokens;
  const std::vector<double>& y = c.linear_s;
  size_t i = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), tokens) - x.begin());
  if (i > 0 && x[i - 1] == tokens) return y[i - 1];
  i = std::clamp<size_t>(i, 1, x.size() - 1);
  return y[i - 1] + (y[i] - y[i - 1]) * (tokens - x[i - 1]) / (x[i] - x[i - 1]);
}

}  // namespace

double ServeStepTime(const ServeStepCost& c, const ServeStepBatch& b) {
  if (b.tokens <= 0) return 0;
  const double touched = ExpertsTouched(c.experts, c.top_k, b.tokens * c.ep) / c.ep;
  const double weights = c.dense_read_s + c.expert_read_s_one * touched;
  const double linear = std::max(weights, LinearTime(c, b.tokens));
  const double kv =
      c.kv_s_per_token_global * b.kv_tokens_global + c.kv_s_per_token_local * b.kv_tokens_local;
  const double scores =
      c.attention_s_per_pair_global * b.pairs_global + c.attention_s_per_pair_local * b.pairs_local;
  const double offload = c.expert_offload_s_one * touched;
  return std::max(linear + std::max(kv, scores), offload) + c.overhead_s + c.comm_fixed_s +
         c.comm_s_per_token * b.tokens + c.step_overhead_s + c.seq_overhead_s * b.sequences;
}

namespace {

// Fitted by bench/serving.sh (plan::FitServeProfile on bench/data/serving_runs.json and
// published_serving.json); docs/COST_MODEL.md, "Engine profiles", lists the fit and its errors.
const std::vector<ServeEngineProfile>& Profiles() {
  static const std::vector<ServeEngineProfile> profiles = {
      {.name = "none"},
      // TensorRT-LLM (NIM): 287 rows of bench/data/serving_runs.json and published_serving.json,
      // Llama 3 8B / 70B on A100 and H100, TP 1-8, BF16/FP16/FP8, concurrency 1-250. Its
      // scheduler (not fitted): whole prompts (no chunked context), the whole length's KV
      // reserved (GUARANTEED_NO_EVICT), a step budget (max_num_tokens) of 16384: what the closed
      // loops at 10 clients show (docs/COST_MODEL.md, "Engine profiles"); its FP8 checkpoints
      // quantize the KV cache too (what the FP8 rows' queues at 100-250 clients show); its KV
      // cache is free_gpu_memory_fraction (default 0.9) of the memory left after the weights
      // (KvCacheConfig). Fitted: the step and request overheads, the attention efficiency and
      // NIM's front end a request.
      {.name = "trtllm",
       .step_overhead_s = 1.916e-3,
       .seq_overhead_s = 23.7e-6,
       .attention_efficiency = 0.618,
       .frontend_s = 3.16e-3,
       .chunked_prefill = false,
       .reserve_full_length = true,
       .max_batched_tokens = 16384,
       .fp8_kv_with_fp8_weights = true,
       .memory_fraction_of_free = true},
  };
  return profiles;
}

}  // namespace

const ServeEngineProfile* FindServeEngineProfile(const std::string& name) {
  for (const ServeEngineProfile& p : Profiles()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> ServeEngineProfileNames() {
  std::vector<std::string> out;
  for (const ServeEngineProfile& p : Profiles()) out.push_back(p.name);
  return out;
}

std::string FormatServeLayout(const ServeLayout& l) {
  return fmt::format("tp={} ep={} pp={} replicas={}", l.tp, l.ep, l.pp, l.replicas);
}

double ExpertsTouched(double experts, double top_k, double tokens) {
  if (experts <= 0 || top_k <= 0 || tokens <= 0) return 0;
  return experts * (1.0 - std::pow(1.0 - std::min(1.0, top_k / experts), tokens));
}

}  // namespace pentamesh::cost

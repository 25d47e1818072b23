// What one pipeline stage holds and spends: its layers (uneven split per spec::ChunkLayers), its
// parameters, its micro-batches in flight per schedule, its memory by category, its time per
// micro-batch by term, and its DP/ZeRO traffic per step.
// Invariant: arithmetic only (EstimateLayout's hot path); ZeRO divides each parameter class by
// the ranks that replicate it (non-expert: g_dense, expert: g_expert).
#include <algorithm>
#include <array>

#include "cost/internal.h"
#include "schedule/generate.h"

namespace pentamesh::cost::internal {

namespace {

// Interleaved 1F1B (Megatron): the peak of rank r's stashed bytes, in micro-batches of all its
// chunks. Forward k of the rank runs chunk (k / p) % V, backward k chunk V-1 - (k / p) % V; after
// the warm-up of w = 2(p-r-1) + (V-1)p forwards each steady step runs one forward, then one
// backward. Each chunk weighs its own stash (its layers per spec::ChunkLayers, dense or MoE, and
// the head on the pipeline's last chunk), so uneven chunks are counted exactly rather than as
// (in-flight chunks / V) x the rank's layers. The step pattern repeats every p*V steps.
double InterleavedInflight(const Context& ctx, const spec::Layout& l, const Terms& t,
                           int64_t pp_rank) {
  const int64_t V = static_cast<int64_t>(t.V), p = l.pp, chunks = p * V;
  const int64_t total = static_cast<int64_t>(t.m) * V, layers = ctx.model().layers;
  // Stash of one micro-batch of chunk v. The walk below asks for each chunk O(p) times, so the
  // first kCached are computed once, on the stack (EstimateLayout never allocates).
  auto compute = [&](int64_t v) {
    const int64_t chunk = v * p + pp_rank;
    const int64_t begin = spec::ChunkFirstLayer(layers, chunks, chunk);
    const int64_t n = spec::ChunkLayers(layers, chunks, chunk);
    const auto moe = static_cast<double>(ctx.MoeLayers(begin, begin + n));
    return (static_cast<double>(n) - moe) * t.act_dense_layer + moe * t.act_moe_layer +
           (chunk == chunks - 1 ? t.act_head : 0.0);
  };
  constexpr int64_t kCached = 64;
  std::array<double, kCached> cached{};
  double per_microbatch = 0;
  for (int64_t v = 0; v < V; ++v) {
    const double bytes = compute(v);
    if (v < kCached) cached[static_cast<size_t>(v)] = bytes;
    per_microbatch += bytes;
  }
  auto chunk_bytes = [&](int64_t v) {
    return v < kCached ? cached[static_cast<size_t>(v)] : compute(v);
  };
  // schedule/'s order and warm-up: forwards and backwards walk the chunks in opposite order, and
  // the peak is reached from the warm-up plus the first steady forward on.
  auto forward = [&](int64_t k) { return chunk_bytes(schedule::InterleavedForwardChunk(p, V, k)); };
  auto backward = [&](int64_t k) {
    return chunk_bytes(V - 1 - schedule::InterleavedForwardChunk(p, V, k));
  };
  const int64_t warmup = std::min(
      total, schedule::WarmupForwards(spec::Schedule::kInterleaved, p, pp_rank, total / V, V) + 1);
  double held = 0;
  for (int64_t k = 0; k < warmup; ++k) held += forward(k);
  double peak = held;
  for (int64_t j = 1; warmup - 1 + j < total && j <= p * V; ++j) {
    held += forward(warmup - 1 + j) - backward(j - 1);
    peak = std::max(peak, held);
  }
  return per_microbatch > 0 ? peak / per_microbatch : 0.0;
}

}  // namespace

void ComputeStage(const Context& ctx, const spec::Layout& l, const Terms& t, int64_t pp_rank,
                  Stage& s) {
  const spec::ModelSpec& md = ctx.model();
  const int64_t V = static_cast<int64_t>(t.V);
  const int64_t chunks = l.pp * V;
  s = Stage{};
  s.first = pp_rank == 0;
  s.last = pp_rank == l.pp - 1;
  for (int64_t v = 0; v < V; ++v) {
    const int64_t chunk = v * l.pp + pp_rank;
    const int64_t n = spec::ChunkLayers(md.layers, chunks, chunk);
    const int64_t begin = spec::ChunkFirstLayer(md.layers, chunks, chunk);
    s.layers += static_cast<double>(n);
    s.moe_layers += static_cast<double>(ctx.MoeLayers(begin, begin + n));
    s.local_layers += static_cast<double>(ctx.LocalLayers(begin, begin + n));
    s.sends += (chunk < chunks - 1 ? 1.0 : 0.0) + (chunk > 0 ? 1.0 : 0.0);
  }
  const double dense_layers = s.layers - s.moe_layers;
  const double experts = static_cast<double>(md.moe.experts);
  const double attn = ctx.attn_params_layer / t.tp + ctx.attn_params_rep + ctx.norm_params_layer;
  const double moe_dense = ctx.router_params_layer + ctx.shared_params_layer / t.tp;
  // Routed experts are split over etp (Megatron; etp = tp unless set) or replicated over tp
  // (moe_replicated_over_tp).
  const double etp_routed = ctx.params().moe_replicated_over_tp ? 1.0 : t.etp;
  const double moe_expert = experts * ctx.expert_params_one / (etp_routed * t.ep);
  s.params_dense =
      s.layers * attn + dense_layers * ctx.mlp_params_layer / t.tp + s.moe_layers * moe_dense;
  s.params_expert = s.moe_layers * moe_expert;
  const double embedding = ctx.counts().embedding / t.tp;
  if (s.first) s.params_dense += embedding;
  if (s.last) {
    s.params_dense += static_cast<double>(md.hidden);  // final norm
    if (!md.tied_embeddings) s.params_dense += embedding;
    if (md.tied_embeddings && l.pp > 1) s.params_dense += embedding;  // head's copy
  }
  s.max_layer_params = attn + (s.moe_layers > 0 ? moe_dense + moe_expert : 0.0);
  if (dense_layers > 0)
    s.max_layer_params = std::max(s.max_layer_params, attn + ctx.mlp_params_layer / t.tp);
  // Micro-batches stashed at the peak: the warm-up's forwards plus the first steady one, from
  // schedule/ (the simulator's answer, tests/cost StageInflight.*); interleaved weighs its chunks.
  const auto m = static_cast<int64_t>(t.m);
  if (l.schedule == spec::Schedule::kInterleaved) {
    s.inflight = InterleavedInflight(ctx, l, t, pp_rank);
  } else {
    s.inflight = static_cast<double>(
        std::min(m, schedule::WarmupForwards(l.schedule, l.pp, pp_rank, m, 1) + 1));
  }
  // ZB-H1: rank r defers r W passes, so up to r micro-batches wait between B and W while B walks
  // the next one.
  if (l.schedule == spec::Schedule::kZeroBubble) {
    s.pending_w = static_cast<double>(std::min(schedule::ZeroBubbleDeferredW(pp_rank), m - 1));
  }
}

// Zero-bubble: the W stashes of the micro-batches waiting for W, plus, for the micro-batch B is
// walking, its copies for W over the forward stash they replace: the head's (last stage), the
// larger phase of one layer, and (W - F) of every further walked layer when a layer's W copies
// outweigh its forward stash (bf16 stashes, fp32 copies). docs/COST_MODEL.md.
double ZeroBubbleWStash(const spec::Layout& l, const Terms& t, const Stage& s) {
  const double dense_layers = s.layers - s.moe_layers;
  const double head_w = s.last ? t.w_head : 0.0;
  const double w_stage = dense_layers * t.w_dense_layer + s.moe_layers * t.w_moe_layer + head_w;
  const double peak =
      std::max(dense_layers > 0 ? t.w_dense_peak : 0.0, s.moe_layers > 0 ? t.w_moe_peak : 0.0);
  const bool full = l.recompute == spec::Recompute::kFull;
  const double f_dense = full ? t.act_input_layer : t.act_dense_layer;
  const double f_moe = full ? t.act_input_layer : t.act_moe_layer;
  const double growth = std::max(dense_layers > 0 ? t.w_dense_layer - f_dense : 0.0,
                                 s.moe_layers > 0 ? t.w_moe_layer - f_moe : 0.0);
  return s.pending_w * w_stage + head_w + peak + std::max(0.0, (s.layers - 1.0) * growth);
}

namespace {

// Stashed activations of the micro-batches in flight (and the zero-bubble W stash).
double StageActivations(const spec::Layout& l, const Terms& t, const Stage& s) {
  const double dense_layers = s.layers - s.moe_layers;
  const double head = s.last ? t.act_head : 0.0;  // per micro-batch in flight
  double activations = 0;
  if (l.recompute == spec::Recompute::kFull) {
    // Layer inputs of every micro-batch in flight, and either the head's stash (end of forward)
    // or, once the head's backward freed it, the rest of the layer being recomputed.
    const double layer = std::max(dense_layers > 0 ? t.act_dense_layer : 0.0,
                                  s.moe_layers > 0 ? t.act_moe_layer : 0.0);
    activations = s.inflight * s.layers * t.act_input_layer +
                  std::max(0.0, s.inflight - 1.0) * head +
                  std::max(head, layer - t.act_input_layer + t.act_bwd_workspace);
  } else {
    activations =
        s.inflight * (dense_layers * t.act_dense_layer + s.moe_layers * t.act_moe_layer + head) +
        t.act_bwd_workspace;
  }
  if (l.schedule == spec::Schedule::kZeroBubble) activations += ZeroBubbleWStash(l, t, s);
  return activations;
}

// fp32 logits for the softmax cross-entropy (+ the bf16 GEMM output they were cast from, unless
// fp32_logits_only) and the fp32 log-sum-exp per token, on the last stage.
double LogitBytes(const Context& ctx, const Terms& t) {
  const CostParams& p = ctx.params();
  const double low = t.elem_bytes < 4.0 && !p.fp32_logits_only ? t.elem_bytes : 0.0;
  // unfused_cross_entropy: log-softmax in eager PyTorch keeps its fp32 output for backward and
  // backward makes two more fp32 tensors of the logits' size (grad output, grad input).
  const double per_logit = p.unfused_cross_entropy ? 3.0 * 4.0 : 4.0 + low;
  return t.tokens * (static_cast<double>(ctx.model().vocab) / t.tp * per_logit + 4.0);
}

// Pipeline p2p buffers: a receive buffer per micro-batch and chunk for the input (the in-flight
// ones are already the first layer's stashed input) and for the output's gradient; outputs kept
// until backward (interleaved: approximated as V chunks of each rank's micro-batch). Otherwise
// four messages.
double PipelineBufferBytes(const CostParams& p, const Terms& t, const Stage& s) {
  if (!p.pp_buffers_per_microbatch) return 4.0 * t.pp_bytes_send;
  const double inputs = s.first && t.V == 1 ? 0.0 : t.V * (t.m - s.inflight);
  const double grads = s.last && t.V == 1 ? 0.0 : t.V * t.m;
  const double outputs = s.last && t.V == 1 ? 0.0 : t.V * s.inflight;
  return (inputs + grads + outputs) * t.pp_bytes_send;
}

// Communication buffers of the pp, tp, cp, ep and ZeRO-3 collectives.
double CommBufferBytes(const Context& ctx, const spec::Layout& l, const Terms& t, const Stage& s,
                       bool kept) {
  const spec::ModelSpec& md = ctx.model();
  const CostParams& p = ctx.params();
  const double h = static_cast<double>(md.hidden);
  const double copies = md.is_moe() ? static_cast<double>(md.moe.top_k) * t.moe_factor : 1.0;
  double bytes = 0;
  if (t.pp > 1) bytes += PipelineBufferBytes(p, t, s);
  if (t.tp > 1) bytes += t.tokens * h * t.elem_bytes * std::max(1.0, copies);
  if (t.cp > 1) {
    // K and V in flight, sent and received, forward and backward.
    const AttentionShape& a = ctx.attention();
    bytes += 4.0 * t.tokens * (a.k + a.v) / t.tp * t.elem_bytes;
    if (p.transient_workspaces) {
      // The ring merges each step's partial attention output into an fp32 accumulator, and its
      // backward accumulates dq in fp32.
      bytes += 4.0 * t.tokens * (a.q + a.o) / t.tp;
    }
  }
  if (t.ep > 1) bytes += 2.0 * t.tokens / t.tp * copies * h * t.elem_bytes;
  if (l.zero >= 3 && !kept) bytes += 2.0 * s.max_layer_params * t.weight_bytes;
  return bytes;
}

}  // namespace

void StageMemory(const Context& ctx, const spec::Layout& l, const Terms& t, const Stage& s,
                 Memory& mem) {
  const spec::ModelSpec& md = ctx.model();
  const CostParams& p = ctx.params();
  const double gd = t.g_dense, ge = t.g_expert;
  auto sharded = [&](bool shard, double bytes_per_param) {
    return bytes_per_param *
           (s.params_dense / (shard ? gd : 1.0) + s.params_expert / (shard ? ge : 1.0));
  };
  mem = Memory{};
  // fsdp_unsharded_with_pp: FSDP keeps a stage's parameters gathered for the whole step under a
  // pipeline, and its gradients accumulate unsharded in fp32 until the last micro-batch.
  const bool kept = t.fsdp_kept_with_pp;
  mem.weights = sharded(l.zero >= 3 && !kept, t.weight_bytes);
  mem.grads = kept ? sharded(false, 4.0) : sharded(l.zero >= 2, t.grad_bytes);
  mem.optimizer = sharded(l.zero >= 1, t.master_bytes + t.moment_bytes);
  mem.activations = StageActivations(l, t, s);
  if (p.materialize_scores) {
    mem.attention_scores =
        AttentionScoreBlockBytes(md.heads, ctx.train().seq_len, l.mbs, l.tp, l.cp, l.cp_kind) *
        t.elem_bytes / 2.0;
  }
  if (s.last) mem.logits = LogitBytes(ctx, t);
  mem.comm_buffers = CommBufferBytes(ctx, l, t, s, kept);
  mem.framework = p.framework_bytes;
  mem.fragmentation =
      p.fragmentation * (mem.activations + mem.attention_scores + mem.logits + mem.comm_buffers);
  mem.total = mem.weights + mem.grads + mem.optimizer + mem.activations + mem.attention_scores +
              mem.logits + mem.comm_buffers + mem.framework + mem.fragmentation;
  mem.capacity = ctx.cluster().hbm_gb * 1e9 - p.safety_margin_bytes;
}

StageTime StageMicrobatchTime(const Terms& t, const Stage& s) {
  const double dense_layers = s.layers - s.moe_layers;
  StageTime st;
  st.compute = dense_layers * t.time_dense_layer_s + s.moe_layers * t.time_moe_layer_s +
               (s.first ? t.time_embed_s : 0.0) + (s.last ? t.time_head_s : 0.0) -
               s.local_layers * t.time_window_saving_s;
  st.tp = dense_layers * t.tp_dense_layer_s + s.moe_layers * t.tp_moe_layer_s +
          (s.first ? t.tp_embed_s : 0.0) + (s.last ? t.tp_head_s : 0.0);
  st.cp = s.layers * t.cp_layer_s;
  st.ep = s.moe_layers * t.ep_layer_s;
  // Overlapped (interleaved, CostParams::pp_p2p_overlap): each send behind half of one chunk's
  // forward + backward, the stage's micro-batch compute over its V chunks.
  st.pp = s.sends *
          (t.pp_overlap ? std::max(0.0, t.pp_send_s - st.compute / (2.0 * t.V)) : t.pp_send_s);
  return st;
}

void DpCommunication(const spec::Layout& /*l*/, const Terms& t, const Stage& s, double& bytes,
                     double& time_s) {
  bytes = 0;
  time_s = 0;
  auto group = [&](double params, const Link& link) {
    if (link.size <= 1 || params <= 0) return;
    const double w = params * t.weight_bytes, gr = params * t.grad_reduce_bytes;
    Comm c;
    if (t.dp_comm_zero == 0) {  // all-reduce of the accumulated gradients
      c = AllReduce(link, gr);
    } else if (t.dp_comm_zero == 1) {  // reduce-scatter gradients, all-gather updated weights
      c = ReduceScatter(link, gr) + AllGather(link, w);
    } else if (t.dp_comm_zero == 2) {  // sharded grads: reduce-scatter every micro-batch's
      c = t.m * ReduceScatter(link, gr) + AllGather(link, w);
    } else {  // ZeRO-3 / FSDP: per micro-batch, gather weights for forward and backward,
              // reduce-scatter the gradients
      c = t.m * (2.0 * AllGather(link, w) + ReduceScatter(link, gr));
    }
    bytes += c.wire_bytes;
    time_s += c.seconds;
  };
  group(s.params_dense, t.dp_link);
  group(s.params_expert, t.edp_link);
}

}  // namespace pentamesh::cost::internal

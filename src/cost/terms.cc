// Per-layout terms: communication links on the rank order, per-layer activation bytes (Korthikanti
// et al. 2022 adapted to GQA/SwiGLU), per-layer compute time (GEMM roofline with a size-dependent
// efficiency, flash attention, memory-bound elementwise kernels) and per-layer communication.
// Invariant: only arithmetic on doubles; no allocation (EstimateLayout's hot path).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/collective_bytes.h"
#include "cost/gemm.h"
#include "cost/inference.h"
#include "cost/internal.h"
#include "spec/moe_routing.h"
#include "spec/validate.h"

namespace pentamesh::cost::internal {
namespace {

using spec::Layout;

// Group members inside one node for each axis, walking the rank order pp-dp-ep-cp-tp from the
// innermost axis: a node holds gpus_per_node consecutive ranks.
struct NodeFootprint {
  double tp = 1, cp = 1, ep = 1, dp = 1, pp = 1;
};

NodeFootprint Footprint(const Layout& l, double gpn) {
  NodeFootprint f;
  double left = gpn;
  auto take = [&left](double size) {
    const double n = std::max(1.0, std::min(size, left));
    left = std::max(1.0, left / n);
    return n;
  };
  f.tp = take(static_cast<double>(l.tp));
  f.cp = take(static_cast<double>(l.cp));
  f.ep = l.ep_placement == spec::EpPlacement::kSeparate ? take(static_cast<double>(l.ep)) : 1.0;
  f.dp = take(static_cast<double>(l.dp));
  f.pp = take(static_cast<double>(l.pp));
  return f;
}

}  // namespace

Link MakeLink(const Context& ctx, double size, double per_node) {
  const spec::ClusterSpec& c = ctx.cluster();
  const CostParams& p = ctx.params();
  Link link;
  const double nvlink_Bps = c.intra_node_gbps * 1e9 * p.bus_efficiency_intra;
  const double gpn = static_cast<double>(std::max<int64_t>(1, c.gpus_per_node));
  const double nic_Bps =
      static_cast<double>(c.nics_per_node) * c.inter_node_gbps * 1e9 / gpn * p.bus_efficiency_inter;
  if (per_node >= size) {
    link = IntraNodeLink(size, nvlink_Bps, c.intra_node_latency_us * 1e-6,
                         c.intra_node_reduce_gbps * 1e9);
    link.nic_Bps = nic_Bps;
  } else {
    link.size = size;
    link.per_node = per_node;
    link.intra = false;
    link.nvlink_Bps = nvlink_Bps;
    link.nic_Bps = nic_Bps;
    // A ring crosses each node boundary once per channel; the members in a node drive their own
    // NICs in parallel, so the crossing carries per_node NIC shares (capped by NVLink).
    link.ring_Bps = std::min(link.nvlink_Bps, link.per_node * link.nic_Bps);
    link.p2p_Bps = link.nic_Bps;
    link.alpha_s = c.inter_node_latency_us * 1e-6;
  }
  return link;
}

namespace {

void MakeLinks(const Context& ctx, const Layout& l, Terms& t) {
  const NodeFootprint f = Footprint(l, static_cast<double>(ctx.cluster().gpus_per_node));
  const bool separate = l.ep_placement == spec::EpPlacement::kSeparate;
  t.tp_link = MakeLink(ctx, t.tp, f.tp);
  t.cp_link = MakeLink(ctx, t.cp, f.cp);
  t.pp_link = MakeLink(ctx, t.pp, f.pp);
  if (separate) {
    t.ep_link = MakeLink(ctx, t.ep, f.ep);
    t.dp_link = MakeLink(ctx, t.dp * t.cp * t.ep, f.dp * f.cp * f.ep);
    t.edp_link = MakeLink(ctx, t.dp * t.cp, f.dp * f.cp);
  } else {
    // Folded: the stage's tp x cp x dp ranks re-split as ep x etp x expert-dp. ep takes the
    // innermost ranks after etp: with etp = tp the dp x cp ranks (stride tp), with etp = 1 the tp
    // ranks first, then cp and dp. Expert-dp gets the rest.
    const double dc_node = f.dp * f.cp;
    const double span_node = dc_node * f.tp / std::min(t.etp, f.tp);
    const double ep_node = std::min(t.ep, span_node);
    t.ep_link = MakeLink(ctx, t.ep, ep_node);
    t.dp_link = MakeLink(ctx, t.dp * t.cp, dc_node);
    t.edp_link = MakeLink(ctx, t.g_expert, std::max(1.0, span_node / ep_node));
  }
}

// Seconds of one GEMM (M x K) @ (K x N) forward; backward is two GEMMs of the same size. In FP8
// training (Transformer Engine, torchao float8 linears) the GEMM runs at the BF16 rate times
// fp8_gemm_speedup and its two inputs are cast first: read BF16, write FP8 (3 bytes an element,
// at HBM speed; the amax reduction reads them again inside the same kernel). The weight's cast is
// not repeated where the weights are already FP8: inference keeps them so
// (Terms::fp8_weights_stored), Transformer Engine caches them over a step's micro-batches
// (CostParams::fp8_weight_cache). Weight-only quantized weights (Terms::weight_elem_bytes) are
// read at their own size and the GEMM runs at the BF16 rate, its rows tiled by kWeightOnlyRowTile.
double GemmTime(const Context& ctx, const Terms& t, double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const CostParams& p = ctx.params();
  const spec::ClusterSpec& c = ctx.cluster();
  const double rate = c.peak_tflops * 1e12 * t.gemm_efficiency * (t.fp8 ? t.fp8_speedup : 1.0);
  const bool weight_only = t.weight_elem_bytes > 0;
  const double compute =
      weight_only ? GemmComputeSeconds(m, n, k, rate, p.gemm_dim_overhead, kWeightOnlyRowTile)
                  : GemmComputeSeconds(m, n, k, rate, p.gemm_dim_overhead);
  const double in = t.fp8 ? t.fp8_operand_bytes : t.elem_bytes;
  const double weight = weight_only ? t.weight_elem_bytes : in;
  const double bytes = in * m * k + weight * k * n + t.elem_bytes * m * n;
  const double hbm_Bps = c.hbm_gbps * 1e9 * p.hbm_efficiency;
  const double memory = bytes / hbm_Bps;
  const bool weight_fp8 = t.fp8_weights_stored || p.fp8_weight_cache;
  const double cast = t.fp8 ? 3.0 * (m * k + (weight_fp8 ? 0.0 : k * n)) / hbm_Bps : 0.0;
  return std::max(compute, memory) + cast;
}

double MemoryTime(const Context& ctx, double bytes) {
  return bytes / (ctx.cluster().hbm_gbps * 1e9 * ctx.params().hbm_efficiency);
}

// Elementwise kernels (norms, residual adds, RoPE, activations, softmax cross-entropy): their
// bytes times elementwise_traffic (1 = fused kernels that read and write each tensor once; eager
// PyTorch runs each op as its own kernel and moves more).
double ElementwiseTime(const Context& ctx, double bytes) {
  return MemoryTime(ctx, bytes * ctx.params().elementwise_traffic);
}

// Zero-bubble's W stash: B records every weight GEMM dw += dy^T x with fp32 copies of dy and x
// (inputs shared by consecutive GEMMs copied once) and frees a layer's forward stash only when the
// layer is done. Per token: MLP (SwiGLU) x = norm2 output (h), dy of w1, w3 (2 f/tp), x and dy of
// w2 (f/tp, h) (GeLU: one f/tp fewer); attention x = norm1 output (h), dy of wq, wk, wv ((a + 2
// kv)/tp), x and dy of wo (a/tp, h). Walking a layer, the MLP's copies exist while its stash (h1,
// h3, g) does; it is freed before the attention's copies are made, so the peak over the forward
// stash is the larger of the two phases. Full-sequence GEMM inputs (no /sp). MLA: the
// AttentionShape's copies (latents whole, up-projections' dy over tp).
void WeightGradStash(const Context& ctx, Terms& t, double mlp_in, double dense_mlp,
                     double moe_mlp) {
  const spec::ModelSpec& md = ctx.model();
  const double h = static_cast<double>(md.hidden), tp = t.tp;
  const AttentionShape& a = ctx.attention();
  const double attn_w = 4.0 * (a.wgrad_copy + a.wgrad_copy_tp / tp);
  const double gemms = md.activation == spec::Activation::kSwiGLU ? 3.0 : 2.0;  // FFN GEMMs
  auto mlp_w = [&](double ffn, double copies) {
    return 4.0 * copies * (2.0 * h + gemms * ffn / tp);
  };
  auto layer = [&](double w_mlp, double stash_mlp) {
    return std::pair{w_mlp + attn_w, std::max(w_mlp, w_mlp - stash_mlp + attn_w)};
  };
  const double f = static_cast<double>(md.ffn_hidden);
  const auto [dense_w, dense_peak] = layer(mlp_w(f, 1.0), dense_mlp - mlp_in);
  t.w_dense_layer = t.tokens * dense_w;
  t.w_dense_peak = t.tokens * dense_peak;
  if (md.is_moe()) {
    // Routed experts per assignment, shared experts per token, the router (x: h, dy: experts).
    const double fe = static_cast<double>(md.moe.expert_ffn_hidden);
    const double w = mlp_w(fe, static_cast<double>(md.moe.top_k) * t.moe_factor) +
                     mlp_w(fe, static_cast<double>(md.moe.shared_experts)) +
                     4.0 * (h + static_cast<double>(md.moe.experts));
    const auto [moe_w, moe_peak] = layer(w, moe_mlp - mlp_in);
    t.w_moe_layer = t.tokens * moe_w;
    t.w_moe_peak = t.tokens * moe_peak;
  }
  t.w_head =
      t.tokens * 4.0 * (h + static_cast<double>(md.vocab) / tp);  // x = final norm out, dlogits
}

// Bytes an element of a linear layer's input stashed for its weight gradient:
// CostParams::fp8_stash_gemm_inputs in FP8 training, else the activation dtype's.
double StashedGemmInputBytes(const CostParams& p, const Terms& t) {
  return t.fp8 && p.fp8_stash_gemm_inputs ? 1.0 : t.elem_bytes;
}

// Attention block stash per token (bytes): norm input, QKV input, Q, K, V, attention output
// (the out-projection input), dropout mask; scores when materialized (softmax output, dropout
// mask and output) and not recomputed; flash keeps the fp32 log-sum-exp per head unless selective
// recomputation reruns core attention (the lse lives inside the checkpoint). gemm_in: the GEMM
// input after the norm.
double AttentionStashPerToken(const Context& ctx, const Layout& l, const Terms& t, double gemm_in) {
  const CostParams& p = ctx.params();
  const double e = t.elem_bytes, h = static_cast<double>(ctx.model().hidden);
  const AttentionShape& sh = ctx.attention();
  const double a = static_cast<double>(ctx.model().heads), tp = t.tp;
  const double rep = l.sp ? tp : 1.0;  // sequence-parallel regions are sharded by tp
  const double drop = p.dropout ? 1.0 : 0.0;
  const bool selective = l.recomputes(spec::kRecomputeCoreAttn);
  double attn = (e * h + drop * h) / rep + gemm_in;
  // MLA also keeps its latents and their normed copies (whole on every tp rank); mla_up_proj
  // recomputation drops the up-projected q, k, v (rebuilt from the latents).
  if (!(selective && p.selective_recomputes_qkv)) {
    const double qkv = l.recomputes(spec::kRecomputeMlaUpProj) ? 0.0 : sh.q + sh.k + sh.v;
    attn += (e * qkv + StashedGemmInputBytes(p, t) * sh.o) / tp;  // o: the out-projection's input
    attn += e * sh.latent_stash / rep;
  }
  if (l.cp > 1 && l.cp_kind == spec::CpKind::kUlysses && !selective) {
    // Ulysses: the core attention stashes its head-sharded q, k, v, o (the same bytes per token
    // as the sequence-sharded ones, which are not kept) and the out-projection keeps its own
    // sequence-sharded input o: one more h_attn per token. ulysses_stash_fp32: the head-sharded
    // four are fp32 whatever the activation dtype.
    attn += StashedGemmInputBytes(p, t) * sh.o / tp;
    if (p.ulysses_stash_fp32) attn += (4.0 - e) * (sh.q + sh.k + sh.v + sh.o) / tp;
  }
  if (p.materialize_scores) {
    if (l.recompute != spec::Recompute::kFull && !selective)
      attn += (e + 3 * drop) * a / tp * t.seq;
  } else if (!selective) {
    attn += 4.0 * a / tp;
  }
  return attn;
}

// MoE block stash per token: the norm input and FFN input (mlp_in), the fp32 router
// probabilities, each routed copy's dispatched input, output and expert intermediates, and the
// shared experts' intermediates.
double MoeStashPerToken(const Context& ctx, const Layout& l, const Terms& t, double mlp_in) {
  const spec::ModelSpec& md = ctx.model();
  const CostParams& p = ctx.params();
  const double e = t.elem_bytes, h = static_cast<double>(md.hidden), tp = t.tp;
  const double rep = l.sp ? tp : 1.0;
  const bool swiglu = md.activation == spec::Activation::kSwiGLU;
  const double fe = static_cast<double>(md.moe.expert_ffn_hidden);
  const double copies = static_cast<double>(md.moe.top_k) * t.moe_factor;
  const double inputs = p.moe_regathers_input && t.ep <= 1 ? 1.0 : 2.0;  // (dispatched +) output
  const double tp_routed = RoutedTokenSplit(p, t);
  // The experts' up/gate outputs and, unless moe_act recomputation reruns it, the activation's.
  // The dispatched input and the activation's output are GEMM inputs (StashedGemmInputBytes).
  const double in8 = StashedGemmInputBytes(p, t);
  const double act = l.recomputes(spec::kRecomputeMoeAct) ? 0.0 : in8;
  const double per_expert_token = (in8 + (inputs - 1.0) * e) * h / tp_routed +
                                  ((swiglu ? 2.0 : 1.0) * e + act) * fe / tp_routed;
  // The router's fp32 probabilities: of all T rows when every tp rank routes all of them
  // (RoutedTokenSplit 1: the engine with etp = tp, under SP too), else of the rank's rows.
  const double rep_router = tp_routed > 1 ? rep : 1.0;
  return mlp_in + 4.0 * static_cast<double>(md.moe.experts) / rep_router +
         copies * per_expert_token +
         static_cast<double>(md.moe.shared_experts) * ((swiglu ? 2.0 : 1.0) * e + in8) * fe / tp;
}

// torchtitan's per-op selective policy: the layer input, the attention output and lse, and every
// other matmul output (q, k, v, o; w1, w3, w2 / expert matmuls) are kept.
void SelectiveOpSacStash(const Context& ctx, const Layout& l, Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  const AttentionShape& sh = ctx.attention();
  const double e = t.elem_bytes, h = static_cast<double>(md.hidden), tp = t.tp;
  const double rep = l.sp ? tp : 1.0, a = static_cast<double>(md.heads);
  const double f = static_cast<double>(md.ffn_hidden);
  const double up = md.activation == spec::Activation::kSwiGLU ? 2.0 : 1.0;
  const double kept = e * h / rep + e * sh.o / tp + 4.0 * a / tp;
  const double mm_attn = e * (sh.gemm_out_tp + h) / tp + e * sh.gemm_out_rep / rep;
  t.act_dense_layer = t.tokens * (kept + 0.5 * (mm_attn + e * (up * f + h) / tp));
  if (md.is_moe()) {
    const double fe = static_cast<double>(md.moe.expert_ffn_hidden);
    const double copies = static_cast<double>(md.moe.top_k) * t.moe_factor +
                          static_cast<double>(md.moe.shared_experts);
    t.act_moe_layer = t.tokens * (kept + 0.5 * (mm_attn + copies * e * (up * fe + h) / tp));
  }
}

// A layer's backward holds the gradients of its FFN's intermediates (up/gate outputs and their
// product) and of its input before TP's reduce-scatter (the full sequence).
double BackwardWorkspace(const Context& ctx, const Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  const double mats = md.activation == spec::Activation::kSwiGLU ? 3.0 : 2.0;
  double ffn = mats * static_cast<double>(md.ffn_hidden) / t.tp;
  if (md.is_moe()) {
    const double tp_routed = RoutedTokenSplit(ctx.params(), t);
    const double copies = static_cast<double>(md.moe.top_k) * t.moe_factor;
    ffn = std::max(ffn, copies * mats * static_cast<double>(md.moe.expert_ffn_hidden) / tp_routed);
  }
  return t.tokens * t.elem_bytes * (ffn + static_cast<double>(md.hidden));
}

void Activations(const Context& ctx, const Layout& l, Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  const CostParams& p = ctx.params();
  const double e = t.elem_bytes, h = static_cast<double>(md.hidden);
  const double tp = t.tp;
  const double rep = l.sp ? tp : 1.0;  // sequence-parallel regions are sharded by tp
  const double drop = p.dropout ? 1.0 : 0.0;
  const bool swiglu = md.activation == spec::Activation::kSwiGLU;
  // The GEMM input after the norm: sequence-sharded under SP, or the all-gathered full sequence
  // when the stack's TP saves that (tp_saves_gathered_input).
  const double gemm_in = e * h / (p.tp_saves_gathered_input ? 1.0 : rep);
  // The QKV projection's and the dense FFN's input as their linear layers keep it (FP8 with
  // fp8_stash_gemm_inputs); the MoE block's also feeds the router, a BF16 GEMM.
  const double in8 = StashedGemmInputBytes(p, t);
  const double linear_in = gemm_in * in8 / e;
  const double attn = AttentionStashPerToken(ctx, l, t, linear_in);
  const double mlp_in = (e * h + drop * h) / rep + gemm_in;  // norm input, dropout mask, FFN input
  const double f = static_cast<double>(md.ffn_hidden);
  // mlp recomputation keeps only the dense FFN's input; layernorm recomputation drops the MoE
  // block's pre-FFN norm output (with Transformer Engine the other norms are fused into the next
  // GEMM, which keeps its input).
  const double dense_in = mlp_in - gemm_in + linear_in;
  const double dense_mlp =
      dense_in +
      (l.recomputes(spec::kRecomputeMlp) ? 0.0 : ((swiglu ? 2.0 : 1.0) * e + in8) * f / tp);
  const double moe_in = l.recomputes(spec::kRecomputeLayerNorm) ? mlp_in - gemm_in : mlp_in;
  const double moe_mlp = md.is_moe() ? MoeStashPerToken(ctx, l, t, moe_in) : 0.0;
  t.act_dense_layer = t.tokens * (attn + dense_mlp);
  t.act_moe_layer = t.tokens * (attn + moe_mlp);
  if (l.recompute == spec::Recompute::kSelective && p.selective_op_sac)
    SelectiveOpSacStash(ctx, l, t);
  t.act_input_layer = t.tokens * e * h / rep;  // full recomputation keeps only the layer input
  t.act_head = t.tokens * 2.0 * e * h / rep;   // final norm input and the LM head's input
  if (p.transient_workspaces) t.act_bwd_workspace = BackwardWorkspace(ctx, t);
  WeightGradStash(ctx, t, mlp_in, dense_mlp, moe_mlp);
}

}  // namespace

namespace {
// The group's size as the byte counts take it (a degree: a whole number).
int64_t Ranks(const Link& link) { return static_cast<int64_t>(std::llround(link.size)); }
}  // namespace

Comm AllGather(const Link& link, double n) {
  if (link.size <= 1 || n <= 0) return {};
  const double wire = core::AllGatherWireBytes(n, Ranks(link));
  return {(link.size - 1) * link.alpha_s + wire / link.ring_Bps, wire};
}

double ReductionTime(const Link& link, double n) {
  if (link.size <= 1 || n <= 0 || link.reduce_Bps <= 0) return 0;
  return core::ReduceScatterWireBytes(n, Ranks(link)) / link.reduce_Bps;
}

Comm ReduceScatter(const Link& link, double n) {
  if (link.size <= 1 || n <= 0) return {};
  const Comm gather = AllGather(link, n);
  return {gather.seconds + ReductionTime(link, n), core::ReduceScatterWireBytes(n, Ranks(link))};
}

Comm AllReduce(const Link& link, double n) {
  if (link.size <= 1 || n <= 0) return {};
  const double wire = core::AllReduceWireBytes(n, Ranks(link));
  return {2 * (link.size - 1) * link.alpha_s + wire / link.ring_Bps + ReductionTime(link, n), wire};
}

Comm AllToAll(const Link& link, double n) {
  if (link.size <= 1 || n <= 0) return {};
  const double g = link.size, k = link.per_node;
  // Pairwise exchange: (k-1)/g of the buffer stays on NVLink, (g-k)/g leaves through the NIC.
  const double on_node = (k - 1) / g * n / link.nvlink_Bps;
  const double off_node = link.intra ? 0.0 : (g - k) / g * n / link.nic_Bps;
  return {(g - 1) * link.alpha_s + std::max(on_node, off_node),
          core::AllToAllEvenWireBytes(n, Ranks(link))};
}

Comm DispatchPerNode(const Link& link, double n, double top_k) {
  const double g = link.size, k = link.per_node, nodes = g / k;
  if (link.intra || nodes <= 1 || top_k <= 1) return AllToAll(link, n);
  if (n <= 0) return {};
  // A token's top_k experts fall on nodes drawn evenly: it reaches (nodes-1)(1-(1-1/nodes)^top_k)
  // remote nodes where the all-to-all sends top_k (nodes-1)/nodes remote copies.
  const double distinct = nodes * (1.0 - std::pow(1.0 - 1.0 / nodes, top_k)) / top_k;
  const double remote = (g - k) / g * n;
  // NVLink carries the copies for the node's other members and, at the receiving end, forwards
  // the remote arrivals to the (k-1)/k of their experts on the node's other GPUs.
  const double nvlink = (k - 1) / g * n + remote * (k - 1) / k;
  const double nic = distinct * remote;
  return {
      (nodes - 1 + k - 1) * link.alpha_s + std::max(nvlink / link.nvlink_Bps, nic / link.nic_Bps),
      nvlink + nic};
}

Comm P2p(const Link& link, double n) {
  if (link.size <= 1 || n <= 0) return {};
  return {link.alpha_s + n / link.p2p_Bps, core::SendWireBytes(n)};
}

Link IntraNodeLink(double size, double bus_Bps, double alpha_s, double reduce_Bps) {
  Link link;
  link.size = size;
  link.per_node = size;
  link.intra = true;
  link.ring_Bps = link.p2p_Bps = link.nvlink_Bps = bus_Bps;
  link.alpha_s = alpha_s;
  link.reduce_Bps = reduce_Bps;
  return link;
}

namespace {

struct LayerCompute {
  double fwd = 0, bwd = 0;
};

// Core attention on one rank over `keys` (cost/attention.h): flash (causal blocks skipped: the
// causal keys executed; backward recomputes the scores, 2.5x the forward's FLOPs) or materialized
// scores (GEMMs over the full keys plus the softmax's reads and writes of the scores).
LayerCompute AttentionCore(const Context& ctx, const Terms& t, const AttentionKeys& keys) {
  const AttentionShape& a = ctx.attention();
  LayerCompute c;
  if (!ctx.params().materialize_scores) {
    const double flops_fwd = 2.0 * t.tokens * (2.0 * keys.causal) * a.score_width / t.tp;
    c.fwd = flops_fwd / (ctx.cluster().peak_tflops * 1e12 * t.gemm_efficiency *
                         ctx.params().attention_relative * AttentionFactor(ctx));
    c.bwd = 2.5 * c.fwd;
    return c;
  }
  const double heads = a.heads / t.tp;
  const double gemms = heads * (GemmTime(ctx, t, t.tokens, keys.full, a.qk_head_dim) +
                                GemmTime(ctx, t, t.tokens, a.v_head_dim, keys.full));
  const double scores = heads * t.tokens * keys.full * t.elem_bytes;
  c.fwd = gemms + MemoryTime(ctx, 4.0 * scores);
  c.bwd = 2.0 * gemms + MemoryTime(ctx, 8.0 * scores);
  return c;
}

// Forward seconds of one attention GEMM on one rank (AttentionShape::gemms).
double AttentionGemmTime(const Context& ctx, const Terms& t, const AttentionGemm& g, double rep) {
  return GemmTime(ctx, t, g.replicated() ? t.tokens / rep : t.tokens,
                  g.n_over_tp ? g.n / t.tp : g.n, g.k_over_tp ? g.k / t.tp : g.k);
}

// Forward seconds of the projections before the out-projection (what selective recomputation
// reruns when selective_recomputes_qkv).
double AttentionInputGemms(const Context& ctx, const Terms& t, double rep) {
  const AttentionShape& a = ctx.attention();
  double s = 0;
  for (int i = 0; i + 1 < a.gemm_count; ++i) {
    s += AttentionGemmTime(ctx, t, a.gemms[static_cast<size_t>(i)], rep);
  }
  return s;
}

// Forward seconds of the attention block's GEMMs and memory-bound kernels (norm, residual, RoPE;
// MLA's latent norms).
double AttentionBlockFwd(const Context& ctx, const Terms& t, double rep) {
  const spec::ModelSpec& md = ctx.model();
  const AttentionShape& a = ctx.attention();
  const double h = static_cast<double>(md.hidden), e = t.elem_bytes;
  const double gemm =
      AttentionInputGemms(ctx, t, rep) +
      AttentionGemmTime(ctx, t, a.gemms[static_cast<size_t>(a.gemm_count - 1)], rep);
  // RMSNorm (read + write h), residual add (read 2h, write h), RoPE on q and k (read + write).
  const double bytes = t.tokens * (e * 5 * h / rep + 2 * e * a.elementwise_tp / t.tp +
                                   2 * e * a.elementwise_rep / rep);
  return gemm + ElementwiseTime(ctx, bytes);
}

double DenseMlpFwd(const Context& ctx, const Terms& t, double rep) {
  const spec::ModelSpec& md = ctx.model();
  const double h = static_cast<double>(md.hidden), e = t.elem_bytes;
  const double f = static_cast<double>(md.ffn_hidden);
  const bool swiglu = md.activation == spec::Activation::kSwiGLU;
  const double gemm = GemmTime(ctx, t, t.tokens, (swiglu ? 2 : 1) * f / t.tp, h) +
                      GemmTime(ctx, t, t.tokens, h, f / t.tp);
  const double bytes = t.tokens * (e * 5 * h / rep + (swiglu ? 3 : 2) * e * f / t.tp);
  return gemm + ElementwiseTime(ctx, bytes);
}

// Routed experts on the worst EP rank: E/ep local experts, each with ep*T*top_k*factor/E tokens
// (grouped GEMM) and a fixed cost per GEMM (CostParams::expert_gemm_overhead_s), plus router,
// shared experts, and the permutation copies of dispatch/combine.
double MoeMlpFwd(const Context& ctx, const Terms& t, double rep) {
  const spec::ModelSpec& md = ctx.model();
  const double h = static_cast<double>(md.hidden), e = t.elem_bytes;
  const double fe = static_cast<double>(md.moe.expert_ffn_hidden);
  const double experts = static_cast<double>(md.moe.experts);
  const double shared = static_cast<double>(md.moe.shared_experts);
  const double copies = static_cast<double>(md.moe.top_k) * t.moe_factor;
  const double up = md.activation == spec::Activation::kSwiGLU ? 2.0 : 1.0;
  // Each rank's experts see the tokens of its ep group: with etp = tp every tp rank all of its
  // T tokens (split fe / tp), with etp = 1 its T / tp sequence shard (whole experts).
  const double tokens_in = t.tokens * t.etp / t.tp;
  // The experts that run: all of them, or in inference (Terms::touched_experts_only) those the
  // step's tokens reach, ExpertsTouched of them (a decode step of 4 tokens of DeepSeek-V3 runs
  // about 32 of its 256), each with its share of the routed rows.
  const double sources = t.expert_sources * tokens_in;
  const double active =
      t.touched_experts_only
          ? std::min(experts, ExpertsTouched(experts, static_cast<double>(md.moe.top_k), sources))
          : experts;
  const double tokens_per_expert = sources * copies / active;
  // Each local expert's two GEMMs also pay a fixed cost (launch, its own tail wave) in the
  // grouped kernel: CostParams::expert_gemm_overhead_s.
  double gemm = active / t.ep *
                (GemmTime(ctx, t, tokens_per_expert, up * fe / t.etp, h) +
                 GemmTime(ctx, t, tokens_per_expert, h, fe / t.etp) +
                 2.0 * ctx.params().expert_gemm_overhead_s);
  gemm += GemmTime(ctx, t, t.tokens / rep, experts, h);
  if (shared > 0) {
    gemm += GemmTime(ctx, t, t.tokens, up * shared * fe / t.tp, h) +
            GemmTime(ctx, t, t.tokens, h, shared * fe / t.tp);
  }
  const double bytes =
      t.tokens * (e * 5 * h / rep + 12.0 * experts / rep + copies * 4 * e * h / t.tp +
                  (copies + shared) * (up + 1) * e * fe / t.tp);
  return gemm + ElementwiseTime(ctx, bytes);
}

// selective_s: what selective recomputation reruns besides core attention (QKV projections when
// selective_recomputes_qkv).
// selective_share: the share of the layer's other forward work selective recomputation also reruns
// (CostParams::selective_forward_share).
// modules_s: what the other recomputed modules rerun (ModuleRecomputeFwd).
double LayerTime(const Layout& l, double attn_block, double mlp_block, const LayerCompute& core,
                 double selective_s, double selective_share, double modules_s) {
  const double fwd = attn_block + mlp_block + core.fwd;
  double total = fwd + 2.0 * (attn_block + mlp_block) + core.bwd;
  if (l.recompute == spec::Recompute::kSelective) {
    if (l.recomputes(spec::kRecomputeCoreAttn)) total += core.fwd + selective_s;
    total += selective_share * (attn_block + mlp_block) + modules_s;
  }
  if (l.recompute == spec::Recompute::kFull) total += fwd;
  return total;
}

// Forward seconds selective recomputation's modules other than core attention rerun in one layer:
// MLA's up-projection GEMMs (mla_up_proj), the dense FFN (mlp, dense layers), the MoE block's
// pre-FFN norm (layernorm: read and write h) and the experts' activation (moe_act: read the
// up/gate outputs, write their product).
double ModuleRecomputeFwd(const Context& ctx, const Layout& l, const Terms& t, double rep,
                          bool moe_layer) {
  const spec::ModelSpec& md = ctx.model();
  const double e = t.elem_bytes, h = static_cast<double>(md.hidden);
  double s = 0;
  if (l.recomputes(spec::kRecomputeMlaUpProj)) {
    const AttentionShape& a = ctx.attention();
    for (int i = 0; i < a.gemm_count; ++i) {
      const AttentionGemm& g = a.gemms[static_cast<size_t>(i)];
      if (g.up_proj) s += AttentionGemmTime(ctx, t, g, rep);
    }
  }
  if (!moe_layer) return s + (l.recomputes(spec::kRecomputeMlp) ? DenseMlpFwd(ctx, t, rep) : 0.0);
  if (l.recomputes(spec::kRecomputeLayerNorm))
    s += ElementwiseTime(ctx, t.tokens * 2 * e * h / rep);
  if (l.recomputes(spec::kRecomputeMoeAct)) {
    const double fe = static_cast<double>(md.moe.expert_ffn_hidden);
    const double copies = static_cast<double>(md.moe.top_k) * t.moe_factor;
    const double up = md.activation == spec::Activation::kSwiGLU ? 2.0 : 1.0;
    s += ElementwiseTime(ctx,
                         t.tokens * copies * (up + 1) * e * fe / RoutedTokenSplit(ctx.params(), t));
  }
  return s;
}

void Compute(const Context& ctx, const Layout& l, Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  const double rep = l.sp ? t.tp : 1.0;
  const LayerCompute core = AttentionCore(ctx, t, AttentionKeysOf(md, t.seq, false));
  t.time_attn_fwd_s = core.fwd;
  t.time_attn_bwd_s = core.bwd;
  const double attn = AttentionBlockFwd(ctx, t, rep);
  const double qkv = ctx.params().selective_recomputes_qkv ? AttentionInputGemms(ctx, t, rep) : 0.0;
  // layer_overhead_s: what a layer costs beyond its kernels' work (launches, framework hooks),
  // forward + backward of one micro-batch.
  const double overhead = ctx.params().layer_overhead_s;
  const double share = ctx.params().selective_forward_share;
  t.time_dense_layer_s = LayerTime(l, attn, DenseMlpFwd(ctx, t, rep), core, qkv, share,
                                   ModuleRecomputeFwd(ctx, l, t, rep, false)) +
                         overhead;
  t.time_moe_layer_s = md.is_moe() ? LayerTime(l, attn, MoeMlpFwd(ctx, t, rep), core, qkv, share,
                                               ModuleRecomputeFwd(ctx, l, t, rep, true)) +
                                         overhead
                                   : 0.0;
  if (md.sliding_window > 0) {
    // LayerTime is linear in the core attention's seconds: a local layer costs the same minus
    // the difference of its cores.
    const LayerCompute local = AttentionCore(ctx, t, AttentionKeysOf(md, t.seq, true));
    t.time_window_saving_s = LayerTime(l, 0, 0, core, 0, 0, 0) - LayerTime(l, 0, 0, local, 0, 0, 0);
  }
  // LM head and loss: GEMM forward + two backward GEMMs; fp32 logits read and written by the
  // softmax cross-entropy forward and backward (about 14 bytes per logit).
  const double h = static_cast<double>(md.hidden), vocab = static_cast<double>(md.vocab);
  t.time_head_s = 3.0 * GemmTime(ctx, t, t.tokens, vocab / t.tp, h) +
                  ElementwiseTime(ctx, 14.0 * t.tokens * vocab / t.tp);
  t.time_embed_s = ElementwiseTime(ctx, 3.0 * t.tokens * t.elem_bytes * h);
}

// TP/SP collectives of one block (attention or FFN) whose activation is n bytes. Without SP: one
// all-reduce forward (reduce_from_tp) and one backward (copy_to_tp). With SP (Megatron's
// sequence-parallel linears): forward an all-gather of the input and a reduce-scatter of the
// output; backward an all-gather of the output grad, an all-gather of the input again (the stash
// keeps only the T/tp-row shard, the weight grad needs all T rows) and a reduce-scatter of the
// input grad: five transfers of (t-1)/t * n, three all-gathers and two reduce-scatters. Full
// recomputation repeats the forward ones.
void TpBlock(const Terms& t, const Layout& l, double n, double& time_s, double& bytes) {
  if (t.tp <= 1) return;
  const double rec = l.recompute == spec::Recompute::kFull ? 1.0 : 0.0;
  const Comm c =
      l.sp ? (3.0 + rec) * AllGather(t.tp_link, n) + (2.0 + rec) * ReduceScatter(t.tp_link, n)
           : (2.0 + rec) * AllReduce(t.tp_link, n);
  time_s += c.seconds;
  bytes += c.wire_bytes;
}

// Under SP an MoE layer whose router and routed experts are replicated over tp (model/moe.h) runs
// them on all T rows: forward an all-gather of the input, backward an all-gather of the output
// grad and of the input again (the stash keeps the T/tp-row shard); the routed outputs and input
// grads are alike on every tp rank, each keeps its rows. Shared experts add the reduce-scatter of
// their partial output forward and of their partial input grad backward. Full recomputation
// repeats the forward ones. Each transfer is (t-1)/t * n.
void MoeReplicatedSp(const Terms& t, const Layout& l, bool shared, double n, double& time_s,
                     double& bytes) {
  if (t.tp <= 1) return;
  const double rec = l.recompute == spec::Recompute::kFull ? 1.0 : 0.0;
  const double scatters = shared ? 2.0 + rec : 0.0;
  const Comm c = (3.0 + rec) * AllGather(t.tp_link, n) + scatters * ReduceScatter(t.tp_link, n);
  time_s += c.seconds;
  bytes += c.wire_bytes;
}

void TpTerms(const Context& ctx, const Layout& l, Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  const double n = t.tokens * static_cast<double>(md.hidden) * t.elem_bytes;
  const double exposed = 1.0 - ctx.params().tp_overlap;
  double time_attn = 0, bytes_attn = 0, time_mlp = 0, bytes_mlp = 0, time_moe = 0, bytes_moe = 0;
  TpBlock(t, l, n, time_attn, bytes_attn);
  TpBlock(t, l, n, time_mlp, bytes_mlp);
  // The engine's routed experts replicated over tp with etp = tp (RoutedTokenSplit 1).
  const bool replicated = md.is_moe() && ctx.params().moe_replicated_over_tp && t.etp > 1;
  if (replicated && !l.sp) {
    // Routed experts replicated over tp need no tp collective; only the shared experts (an MLP
    // sharded over tp like the dense one) all-reduce their output over the layer's T rows.
    if (md.moe.shared_experts > 0) TpBlock(t, l, n, time_moe, bytes_moe);
  } else if (replicated) {
    MoeReplicatedSp(t, l, md.moe.shared_experts > 0, n, time_moe, bytes_moe);
  } else if (md.is_moe() && t.etp > 1) {
    TpBlock(t, l, n * static_cast<double>(md.moe.top_k) * t.moe_factor, time_moe, bytes_moe);
  } else if (md.is_moe() && md.moe.shared_experts > 0) {
    // etp = 1: the routed experts take each tp rank's sequence shard as it is; only the shared
    // experts (split over tp like the dense FFN) gather and scatter.
    TpBlock(t, l, n, time_moe, bytes_moe);
  }
  t.tp_dense_layer_s = exposed * (time_attn + time_mlp);
  t.tp_moe_layer_s = exposed * (time_attn + time_moe);
  t.tp_bytes_dense_layer = bytes_attn + bytes_mlp;
  t.tp_bytes_moe_layer = bytes_attn + bytes_moe;
  if (t.tp <= 1) return;
  // Vocab-parallel embedding (reduce-scatter fwd / all-gather bwd with SP, all-reduce without);
  // head: the LM head is a column-parallel linear (SP: all-gather of its input forward, again
  // backward for the weight grad, reduce-scatter of the input grad; without SP the all-reduce of
  // the input grad backward), and three fp32 all-reduces of the cross-entropy (max, sum of
  // exponentials, target logit) per token.
  const double ce = 4.0 * t.tokens;
  Comm embed, head;
  if (l.sp) {
    embed = ReduceScatter(t.tp_link, n) + AllGather(t.tp_link, n);
    head = 2.0 * AllGather(t.tp_link, n) + ReduceScatter(t.tp_link, n);
    // Once per step: the norm weight grads, 2 norms of h per layer and the final norm (grad
    // dtype), summed over tp because each rank normalised its own rows; likewise every weight
    // replicated over tp that sees only the rank's rows (MLA's down-projections, latent norms).
    const double hb = static_cast<double>(md.hidden) * t.grad_bytes;
    t.sp_norm_grad_bytes_layer =
        2.0 * hb + (ctx.attn_params_rep + ctx.attention().norm_params) * t.grad_bytes;
    t.sp_norm_grad_bytes_head = hb;
    if (md.is_moe() && spec::RoutesRankRows(l, ctx.params().moe_replicated_over_tp))
      t.sp_router_grad_bytes = ctx.router_params_layer * t.grad_bytes;
  } else {
    embed = AllReduce(t.tp_link, n);
    head = AllReduce(t.tp_link, n);
  }
  head += 3.0 * AllReduce(t.tp_link, ce);
  t.tp_embed_s = exposed * embed.seconds;
  t.tp_bytes_embed = embed.wire_bytes;
  t.tp_head_s = exposed * head.seconds;
  t.tp_bytes_head = head.wire_bytes;
}

void CpTerms(const Context& ctx, const Layout& l, Terms& t) {
  if (t.cp <= 1) return;
  const AttentionShape& a = ctx.attention();
  const double rec = l.recompute == spec::Recompute::kNone ? 0.0 : 1.0;
  if (l.cp_kind == spec::CpKind::kRing) {
    // Each of the cp-1 ring steps passes this rank's K and V chunk on; a step's transfer hides
    // only behind the attention block computed meanwhile (1/cp of the layer's core attention,
    // load-balanced causal chunks): it exposes max(0, transfer - cp_overlap x block). Backward
    // sends K, V on and the previous block's dK, dV back (lagging one step): the first step
    // carries K, V only, and the last block's dK, dV go after it with nothing left to hide behind.
    const double kv = t.tokens * (a.k + a.v) / t.tp * t.elem_bytes;
    const double ov = ctx.params().cp_overlap;
    auto step = [&](double bytes, double block_s) {
      return std::max(0.0, P2pTime(t.cp_link, bytes) - ov * block_s / t.cp);
    };
    const double fwd_exposed = (t.cp - 1) * step(kv, t.time_attn_fwd_s);
    const double bwd_exposed = (t.cp - 2) * step(2.0 * kv, t.time_attn_bwd_s) +
                               step(kv, t.time_attn_bwd_s) + P2pTime(t.cp_link, kv);
    t.cp_layer_s = (1.0 + rec) * fwd_exposed + bwd_exposed;
    t.cp_bytes_layer = (t.cp - 1) * (3.0 + rec) * kv;
    return;
  }
  // Ulysses: all-to-all of q, k, v (sequence -> heads) and of the output (heads -> sequence);
  // backward the same four. Not overlapped.
  auto bytes = [&](double width) { return t.tokens * width / t.tp * t.elem_bytes; };
  const double q = bytes(a.q), o = bytes(a.o), k = bytes(a.k), v = bytes(a.v);
  const Comm layer = (2.0 + rec) * ((AllToAll(t.cp_link, q) + AllToAll(t.cp_link, o)) +
                                    (AllToAll(t.cp_link, k) + AllToAll(t.cp_link, v)));
  t.cp_layer_s = layer.seconds;
  t.cp_bytes_layer = layer.wire_bytes;
}

// The load-balancing statistics (model/moe.cc Route): each MoE layer's forward all-gathers 2E+1
// doubles per rank (routed counts, router probability sums, tokens) over the ranks whose tokens
// form the micro-batch: cp, or with aux_loss_scope = global every data rank too (the dense
// grid's dp x ep x cp: g_dense), then tp when each tp rank routes its own rows (a second
// all-gather over tp). Full recomputation runs the forward twice.
void BalanceTerms(const Context& ctx, const Layout& l, Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  if (!md.is_moe()) return;
  t.balance_over_dp = md.moe.aux_loss_scope == spec::AuxLossScope::kGlobal;
  const double group = t.balance_over_dp ? t.g_dense : t.cp;
  const double forwards = l.recompute == spec::Recompute::kFull ? 2.0 : 1.0;
  const double per_rank = (2.0 * static_cast<double>(md.moe.experts) + 1.0) * 8.0;
  t.balance_bytes_moe_layer =
      forwards * core::AllGatherWireBytes(group * per_rank, static_cast<int64_t>(group));
  // Routers that see only the rank's rows (spec::RoutesRankRows) sum the statistics over tp next.
  if (spec::RoutesRankRows(l, ctx.params().moe_replicated_over_tp)) {
    t.balance_tp_bytes_moe_layer =
        forwards * core::AllGatherWireBytes(t.tp * per_rank, static_cast<int64_t>(t.tp));
  }
}

void EpTerms(const Context& ctx, const Layout& l, Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  if (!md.is_moe() || t.ep <= 1) return;
  // Dispatch and combine forward, their conjugates backward; each TP rank moves its 1/tp share
  // (moe_replicated_over_tp with etp = tp: every tp rank moves all the rows).
  const double tp_routed = RoutedTokenSplit(ctx.params(), t);
  const double n = t.tokens / tp_routed * static_cast<double>(md.moe.top_k) * t.moe_factor *
                   static_cast<double>(md.hidden) * t.elem_bytes;
  const double count = l.recompute == spec::Recompute::kFull ? 6.0 : 4.0;
  // Each forward also tells the owners how many rows each of their experts gets from this rank:
  // an all-to-all of E int64 counts (model/moe.cc).
  const double forwards = l.recompute == spec::Recompute::kFull ? 2.0 : 1.0;
  const double counts = static_cast<double>(md.moe.experts) * 8.0;
  const Comm move = ctx.params().ep_dispatch_per_node
                        ? DispatchPerNode(t.ep_link, n, static_cast<double>(md.moe.top_k))
                        : AllToAll(t.ep_link, n);
  const Comm layer = count * move + forwards * AllToAll(t.ep_link, counts);
  // The run's EP overlap (Megatron-Core's all-to-alls beside another micro-batch's compute) hides
  // the stack's share, where the layout lets it run.
  const double hidden = spec::EpOverlapRuns(l) ? ctx.params().ep_overlap : 0.0;
  t.ep_layer_s = (1.0 - hidden) * layer.seconds;
  t.ep_bytes_layer = layer.wire_bytes;
}

}  // namespace

double AttentionCoreForwardTime(const Context& ctx, const Terms& t, const AttentionKeys& keys) {
  return AttentionCore(ctx, t, keys).fwd;
}

double LayerForwardTime(const Context& ctx, const Terms& t, bool moe, bool local) {
  const double rep = 1.0;
  const LayerCompute core = AttentionCore(ctx, t, AttentionKeysOf(ctx.model(), t.seq, local));
  return AttentionBlockFwd(ctx, t, rep) + core.fwd +
         (moe ? MoeMlpFwd(ctx, t, rep) : DenseMlpFwd(ctx, t, rep));
}

double RoutedTokenSplit(const CostParams& p, const Terms& t) {
  return p.moe_replicated_over_tp && t.etp > 1 ? 1.0 : t.tp;
}

void ComputeTerms(const Context& ctx, const Layout& l, Terms& t) {
  const spec::ModelSpec& md = ctx.model();
  const spec::TrainSpec& train = ctx.train();
  const CostParams& p = ctx.params();
  const bool separate = l.ep_placement == spec::EpPlacement::kSeparate;
  t.dp = static_cast<double>(l.dp);
  t.tp = static_cast<double>(l.tp);
  t.pp = static_cast<double>(l.pp);
  t.cp = static_cast<double>(l.cp);
  t.ep = static_cast<double>(l.ep);
  t.V = l.schedule == spec::Schedule::kInterleaved ? static_cast<double>(l.virtual_stages) : 1.0;
  t.mbs = static_cast<double>(l.mbs);
  t.seq = static_cast<double>(train.seq_len);
  t.tokens = t.mbs * t.seq / t.cp;
  t.m = static_cast<double>(spec::MicroBatches(train, l));
  const double cf = md.moe.capacity_factor;
  t.moe_factor = cf > 0 ? std::min(p.moe_imbalance, cf) : p.moe_imbalance;
  t.expert_sources = t.ep;
  t.g_dense = t.dp * t.cp * (separate ? t.ep : 1.0);
  t.etp = static_cast<double>(l.expert_tp());
  t.fsdp_kept_with_pp = p.fsdp_unsharded_with_pp && l.zero >= 3 && l.pp > 1;
  t.dp_comm_zero = t.fsdp_kept_with_pp ? 1 : l.zero;
  t.g_expert = separate ? t.dp * t.cp : t.dp * t.cp * t.tp / (t.ep * t.etp);
  const bool fp32 = train.precision == spec::Precision::kFp32;
  t.gemm_efficiency = GemmEfficiency(ctx);
  t.elem_bytes = fp32 ? 4.0 : 2.0;
  t.fp8 = train.precision == spec::Precision::kFp8 && ctx.cluster().peak_fp8_tflops > 0;
  t.fp8_speedup = Fp8GemmSpeedup(ctx);
  const StateBytes& state = PrecisionPolicyOf(train.precision, p.fp32_main_grads);
  t.weight_bytes = state.weight;
  t.grad_bytes = state.grad;
  t.grad_reduce_bytes = state.grad_reduce;
  t.master_bytes = state.master;
  t.moment_bytes = state.moments;
  MakeLinks(ctx, l, t);
  Activations(ctx, l, t);
  Compute(ctx, l, t);
  TpTerms(ctx, l, t);
  CpTerms(ctx, l, t);
  EpTerms(ctx, l, t);
  BalanceTerms(ctx, l, t);
  // The activation (or its gradient) between stages: sequence-sharded over tp under SP or with
  // Megatron's scatter/gather, else every tp rank sends its full replica (CostParams).
  const bool split = l.sp || ctx.params().pp_scatter_gather;
  t.pp_bytes_send = t.tokens * static_cast<double>(md.hidden) * t.elem_bytes / (split ? t.tp : 1.0);
  t.pp_send_s = t.pp > 1 ? P2pTime(t.pp_link, t.pp_bytes_send) : 0.0;
  t.pp_overlap = ctx.params().pp_p2p_overlap && t.V > 1;
}

}  // namespace pentamesh::cost::internal

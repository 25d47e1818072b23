// Internal to src/cost: the per-layout quantities that memory, time and comm bytes share.
// Invariant: plain values (doubles and flags), filled once per call of EstimateLayout,
// CommBytesForStage or MemoryForStage (ComputeTerms), never allocated.
#pragma once

#include "cost/cost.h"

namespace pentamesh::cost::internal {

// One communication group on the rank order pp-dp-ep-cp-tp (tp innermost).
struct Link {
  double size = 1;        // ranks in the group
  double per_node = 1;    // members of the group inside one node
  double ring_Bps = 1;    // achieved bus bandwidth of a ring collective, bytes/s per rank
  double p2p_Bps = 1;     // bandwidth of a send to the next member of the group
  double nvlink_Bps = 1;  // achieved intra-node bandwidth
  double nic_Bps = 1;     // achieved inter-node bandwidth of one rank (its NIC share)
  double alpha_s = 0;     // latency per message
  // Rate at which a reduction sums the reduced bytes (a host's CPU summing in shared memory);
  // 0 = free (GPU kernels sum at line rate: the ring's transfer is the whole cost).
  double reduce_Bps = 0;
  bool intra = true;  // the whole group is inside one node
};

// One collective on a link, the one function per kind for both of its costs: the seconds it
// takes and the bytes one rank sends on the wire (core/collective_bytes.h, the same count the
// engine's communicators measure). Comm values add and scale, so a term sums its collectives
// once and gets its time and its bytes together. n_bytes is the full tensor (AG output, RS
// input, AR buffer), or the local buffer for all-to-all, or the message for p2p.
struct Comm {
  double seconds = 0;
  double wire_bytes = 0;
  Comm& operator+=(const Comm& o) {
    seconds += o.seconds;
    wire_bytes += o.wire_bytes;
    return *this;
  }
};
inline Comm operator+(Comm a, const Comm& b) { return a += b; }
inline Comm operator*(double k, const Comm& c) { return {k * c.seconds, k * c.wire_bytes}; }

// Ring: (g-1) messages, the wire bytes at ring_Bps.
Comm AllGather(const Link& link, double n_bytes);
// The all-gather's transfer plus ReductionTime (its wire bytes are the all-gather's).
Comm ReduceScatter(const Link& link, double n_bytes);
// A reduce-scatter then an all-gather: twice the transfer, one reduction.
Comm AllReduce(const Link& link, double n_bytes);
// Pairwise exchange: the bytes to the node's members at nvlink_Bps, those to other nodes at
// nic_Bps, the slower of the two.
Comm AllToAll(const Link& link, double n_bytes);
// An MoE dispatch (or combine) of n_bytes of routed copies, top_k copies a token, by a dispatcher
// that sends a token once to each remote node holding one of its experts and fans it out there
// over NVLink (DeepEP's and HybridEP's internode kernels; CostParams::ep_dispatch_per_node).
// AllToAll inside one node or with top_k 1.
Comm DispatchPerNode(const Link& link, double n_bytes, double top_k);
Comm P2p(const Link& link, double n_bytes);
// Seconds to sum the (g-1)/g n bytes a rank reduces at reduce_Bps; 0 when free. No wire bytes.
double ReductionTime(const Link& link, double n_bytes);
// The seconds alone, where a term needs no bytes.
inline double AllGatherTime(const Link& link, double n) { return AllGather(link, n).seconds; }
inline double ReduceScatterTime(const Link& link, double n) {
  return ReduceScatter(link, n).seconds;
}
inline double AllReduceTime(const Link& link, double n) { return AllReduce(link, n).seconds; }
inline double AllToAllTime(const Link& link, double n) { return AllToAll(link, n).seconds; }
inline double P2pTime(const Link& link, double n) { return P2p(link, n).seconds; }
// The link of a group whose `size` members all sit in one node: bus_Bps for ring, p2p and
// all-to-all alike, alpha_s per message, reductions summed at reduce_Bps (0 = free).
Link IntraNodeLink(double size, double bus_Bps, double alpha_s, double reduce_Bps);
// The link of a group of `size` ranks with `per_node` of them in each node: IntraNodeLink when
// the group fits in one node, else the ring crosses nodes on the NICs (terms.cc).
Link MakeLink(const Context& ctx, double size, double per_node);

// Layout-level quantities, per micro-batch of one GPU unless the name says otherwise.
struct Terms {
  // Degrees as doubles; V is 1 unless the schedule is interleaved.
  double dp = 1, tp = 1, pp = 1, cp = 1, ep = 1, V = 1, mbs = 1;
  double etp = 1;  // expert tensor parallel degree in effect (tp unless the layout sets 1)
  // FSDP under a pipeline that keeps parameters gathered (CostParams::fsdp_unsharded_with_pp):
  // ZeRO-3's memory becomes full weights and fp32 grads, its traffic ZeRO-1's (gather once,
  // reduce-scatter once per step). dp_comm_zero: the ZeRO stage whose collectives run.
  bool fsdp_kept_with_pp = false;
  int dp_comm_zero = 0;
  double seq = 0;         // sequence length s
  double tokens = 0;      // T = mbs * s / cp: tokens of one micro-batch on one rank
  double m = 0;           // micro-batches per pipeline per step
  double moe_factor = 1;  // worst EP rank's tokens / mean
  // Ranks whose tokens reach each expert: ep (every ep rank routes its own micro-batch); 1 for
  // one request's prefill alone on one ep group (cost/inference.cc).
  double expert_sources = 1;
  // Inference: only the experts a step's tokens touch run (MoeMlpFwd); training runs all of them.
  bool touched_experts_only = false;
  double g_dense = 1;   // ranks sharing (replicating) non-expert params: dp*cp(*ep separate)
  double g_expert = 1;  // ranks sharing expert params: dp*cp (separate), dp*cp*tp/(ep*etp) (folded)
  double gemm_efficiency = 0.75;    // achieved fraction of peak of a large GEMM
  double elem_bytes = 2;            // activation / weight element (bf16; 4 for fp32)
  bool fp8 = false;                 // FP8 GEMMs (precision fp8 on a GPU with an FP8 peak)
  double fp8_speedup = 1;           // FP8 GEMM rate / BF16 GEMM rate
  bool fp8_weights_stored = false;  // FP8 weights kept as such (inference): no weight casts
  // Bytes of an element of an FP8 GEMM's inputs: 1, or kNvfp4Bytes for NVFP4 inference (its rate
  // then ServeGemmSpeedup's FP4 one, set as fp8_speedup).
  double fp8_operand_bytes = 1;
  // Bytes a GEMM reads per weight element when they differ from its input's: weight-only
  // quantized inference (INT8/INT4 with group scales, dequantized inside a BF16 GEMM). 0 = the
  // input's.
  double weight_elem_bytes = 0;
  // Bytes per parameter of the model state (cost/precision.h: PrecisionPolicyOf).
  double weight_bytes = 2;
  double grad_bytes = 2;         // accumulation buffer
  double grad_reduce_bytes = 2;  // on the DP wire
  double master_bytes = 4;
  double moment_bytes = 8;
  Link tp_link, cp_link, ep_link, pp_link, dp_link, edp_link;
  // Activations stashed per layer and micro-batch (bytes).
  double act_dense_layer = 0, act_moe_layer = 0, act_input_layer = 0;
  double act_head = 0;           // last stage: final norm input and LM head input
  double act_bwd_workspace = 0;  // activation gradients a layer's backward holds at its peak
  // Zero-bubble split backward (docs/COST_MODEL.md): the fp32 copies B keeps for W of one layer
  // (w_*_layer) or of the LM head (w_head), and the peak of those copies over the part of the
  // forward stash already freed while B walks one layer (w_*_peak), per micro-batch (bytes).
  double w_dense_layer = 0, w_moe_layer = 0, w_head = 0;
  double w_dense_peak = 0, w_moe_peak = 0;
  // Compute seconds per layer and micro-batch, forward + backward (+ recomputation).
  double time_dense_layer_s = 0, time_moe_layer_s = 0;
  double time_attn_fwd_s = 0, time_attn_bwd_s = 0;  // core attention alone (overlap window)
  // What a sliding-window layer's core attention saves against a full-attention layer's, forward
  // + backward (+ recomputation); 0 without a window.
  double time_window_saving_s = 0;
  double time_head_s = 0, time_embed_s = 0;  // LM head + loss; embedding
  // Exposed communication seconds per layer and micro-batch.
  double tp_dense_layer_s = 0, tp_moe_layer_s = 0, cp_layer_s = 0, ep_layer_s = 0;
  double tp_embed_s = 0, tp_head_s = 0;
  double pp_send_s = 0;  // one activation (or gradient) send between stages
  // Sends hidden behind half a chunk's compute (CostParams::pp_p2p_overlap, interleaved only).
  bool pp_overlap = false;
  // Bytes sent per layer and micro-batch, per group.
  double tp_bytes_dense_layer = 0, tp_bytes_moe_layer = 0, cp_bytes_layer = 0;
  double ep_bytes_layer = 0, tp_bytes_embed = 0, tp_bytes_head = 0, pp_bytes_send = 0;
  // The MoE load-balancing statistics' all-gather per MoE layer and micro-batch (model/moe.cc),
  // on the cp group, or on the dp x cp group when balance_over_dp (aux_loss_scope = global).
  double balance_bytes_moe_layer = 0;
  double balance_tp_bytes_moe_layer = 0;  // the tp ranks' sum when each routes its own rows
  bool balance_over_dp = false;
  // Sequence parallel, once per STEP: the RMSNorm weight grads (2 per layer, the final norm on the
  // last stage) are partial sums over tp and get one all-reduce; payload bytes of the buffer.
  // A MoE layer adds its router when the router sees only the rank's rows (spec::RoutesRankRows).
  double sp_norm_grad_bytes_layer = 0, sp_norm_grad_bytes_head = 0, sp_router_grad_bytes = 0;
};

// The factor by which the tokens a rank's routed experts take are fewer than the micro-batch's
// T (per-token stash and dispatch bytes divide by it): tp, since each tp rank routes its own
// T/tp rows (etp = 1) or takes a 1/tp slice of every expert (etp = tp); 1 when the engine
// replicates the routed experts over tp with etp = tp (CostParams::moe_replicated_over_tp: every
// tp rank routes and computes all T rows).
double RoutedTokenSplit(const CostParams& p, const Terms& t);

// Fills everything above. REQUIRES: CheckLayout(ctx, l) == Rule::kOk.
void ComputeTerms(const Context& ctx, const spec::Layout& l, Terms& t);

// Forward seconds of one layer on one rank for a micro-batch of t.tokens tokens, without
// recomputation or per-layer overhead: the attention projections, core attention (over the
// sliding window when `local`), the dense MLP or the MoE block (router, experts, shared experts)
// and their elementwise kernels, at rep = 1 (no sequence parallelism). Training's layer time is
// built from the same parts (LayerTime); inference's prefill is this summed over the layers.
double LayerForwardTime(const Context& ctx, const Terms& t, bool moe, bool local);
// Its core attention alone: t.tokens queries, each over keys.causal keys on average (flash) or
// keys.full (materialized scores).
double AttentionCoreForwardTime(const Context& ctx, const Terms& t, const AttentionKeys& keys);

// What one pp rank holds: layers, MoE layers and parameters before ZeRO sharding.
struct Stage {
  double layers = 0, moe_layers = 0;
  double local_layers = 0;                     // sliding-window layers
  double params_dense = 0, params_expert = 0;  // on this rank (TP/EP-sharded, not ZeRO-sharded)
  double max_layer_params = 0;                 // largest layer on this rank (ZeRO-3 gather)
  double inflight = 0;                         // micro-batches of this rank's layers in flight
  double pending_w = 0;                        // zero-bubble: micro-batches between B and W
  double sends = 0;                            // p2p sends per micro-batch (fwd + bwd)
  bool first = false, last = false;
};
void ComputeStage(const Context& ctx, const spec::Layout& l, const Terms& t, int64_t pp_rank,
                  Stage& stage);

void StageMemory(const Context& ctx, const spec::Layout& l, const Terms& t, const Stage& s,
                 Memory& mem);
// Seconds per micro-batch of this stage, by term (compute, tp, cp, ep, pp).
struct StageTime {
  double compute = 0, tp = 0, cp = 0, ep = 0, pp = 0;
  double total() const { return compute + tp + cp + ep + pp; }
};
StageTime StageMicrobatchTime(const Terms& t, const Stage& s);
// DP/ZeRO bytes one rank of the stage sends per step and their time (not yet overlapped).
void DpCommunication(const spec::Layout& l, const Terms& t, const Stage& s, double& bytes,
                     double& time_s);

}  // namespace pentamesh::cost::internal

// Mixture-of-experts FFN: router softmax -> top-k -> capacity -> experts (grouped SwiGLU pass per
// expert on its gathered rows) -> gate-weighted combine, plus optional shared experts.
//   p(t, e)      = softmax(x_t Wr^T)_e over all E experts
//   gate(t, e)   = p(t, e) for the k chosen experts (router softmax_topk), or
//                  p(t, e) / sum_{c chosen for t} p(t, c) (router topk_renorm, Mixtral); a
//                  dropped assignment still counts in that sum. Backward through the
//                  renormalisation, for chosen j (S = the sum, dg = d loss / d gate):
//                  d p(t, j) = (dg(t, j) - sum_c dg(t, c) gate(t, c)) / S, 0 for unchosen j
//   aux loss     = alpha * E * sum_i f_i * P_i, f_i = routed_i / (T k), P_i = mean_t p(t, i)
//                  (the seeds' load-balancing loss; f_i carries no gradient). T, routed_i and
//                  the sums of p(t, i) cover the tokens of the balance group (MoeConfig::balance:
//                  the cp ranks sharing the micro-batch's sequences, or dp x cp), so every rank
//                  of it holds the same f_i, P_i and loss value, and token t's gradient is
//                  alpha * E * f_i / T_global on p(t, i) (scaled by the micro-batch's weight).
//   router z-loss= beta * mean_t logsumexp(x_t Wr^T)^2 (additive over tokens: each rank adds its
//                  tokens' share, sum / T_global, no exchange needed)
//   capacity     = ceil(cf * T * k / E) kept assignments per expert, first choices first in token
//                  order; cf = 0 is dropless. A dropped assignment contributes nothing (the
//                  residual carries the token).
// Experts are stacked (E, Fe, H) / (E, H, Fe) and sharded on dim 0 over ep: this rank computes
// experts [ep_rank * E/ep, (ep_rank+1) * E/ep). With ep > 1 dispatch/combine become all_to_all_v
// on the ep group: with MoeConfig::ep set (size > 1) each rank routes ITS tokens over all E
// experts, sends every kept assignment's row to the rank owning the expert (all_to_all_v,
// grouped by expert), the owner runs one grouped pass per local expert over the rows of all
// sources, and the outputs return the same way to be combined with the gates; backward sends
// gate * dy out and dx back (4 row all_to_all_v per layer, plus one all_to_all_v of the E i64
// per-expert counts forward). Without `ep` every routed expert is local (ep_size 1).
// Tensor parallel (shard.tp_size > 1): the shared experts are tp-sharded like a dense MLP; the
// router and the routed experts are replicated over tp (every tp rank computes them alike).
// Under sequence parallelism (x, y, dx, dy hold this rank's T/tp rows) Forward all-gathers x over
// tp, routes and runs the routed experts on all T rows (identically on every tp rank, so their
// grads need no tp reduction), keeps this rank's rows of the routed output and reduce-scatters
// only the shared experts' partial output; Backward all-gathers dy and x again (the stash holds
// the shard), takes its rows of the routed dx and reduce-scatters the shared experts' partial dx:
// 3 transfers of (tp-1)/tp * T*H per layer and micro-batch, 5 with shared experts
// (cost::TpTerms).
// Balance statistics: one all_gather of 2E+1 doubles per forward over MoeConfig::balance (see
// Route); a group of one exchanges nothing.
// Auxiliary-loss-free balancing (DeepSeek-V3): top-k is chosen on probs + bias (bias per expert,
// not a parameter), the gates stay the unbiased probs; UpdateBias nudges the bias after a step.
// Saved: router probs and lse, the kept assignments grouped by expert, the experts' h1/h3 and
// outputs (for the gate gradient), and with topk_renorm each token's chosen experts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "cost/expert_balance.h"
#include "model/layer_common.h"
#include "model/mlp.h"
#include "model/param_set.h"
#include "spec/model_spec.h"

namespace pentamesh::model {

struct MoeConfig {
  int64_t hidden = 0, experts = 0, top_k = 0, expert_ffn = 0;
  int64_t shared_ffn = 0;       // shared experts' total FFN width; 0 = none
  double capacity_factor = 0;   // 0 = dropless
  double aux_loss_coef = 0.01;  // alpha
  double z_loss_coef = 0;       // beta
  double std_out = 0.02;
  double bias_update_rate = 0;  // aux-loss-free balancing step gamma; 0 = off
  // The chosen experts' gates: their softmax probabilities, or those renormalised to sum 1.
  spec::MoeRouter router = spec::MoeRouter::kSoftmaxTopK;
  ShardConfig shard{};
  comm::Communicator* ep = nullptr;  // the ep group (size shard.ep_size) for dispatch/combine
  // The ranks whose tokens together form the micro-batch's routing statistics for the aux loss
  // (null or size 1: this rank's tokens). REQUIRES: every rank of it runs this layer's forward
  // for the same micro-batch index, in the same order.
  comm::Communicator* balance = nullptr;
  // etp = 1 under sequence parallelism: this rank routes its own T/tp rows (no gather over tp),
  // so the statistics are summed over the tp ranks too (shard.tp_comm, after `balance`).
  bool routes_rank_rows = false;
};

// Routing statistics of one forward (summed over micro-batches and layers by the caller).
struct MoeStats {
  std::vector<int64_t> routed;  // (E) assignments chosen by the router, before capacity
  std::vector<int64_t> kept;    // (E) assignments computed
  int64_t dropped = 0;
  double aux_loss = 0;  // already weighted by LayerContext::aux_scale
  double z_loss = 0;    // idem
  void Add(const MoeStats& o);
  // max / mean of routed tokens per expert (1 = perfectly balanced).
  double LoadImbalance() const;
  // Largest share of routed assignments one expert took (0 when none were routed).
  double MaxExpertShare() const;
  // Expert collapse: one expert took more than cost::ExpertCollapseShare(E, top_k) of the
  // assignments.
  bool CollapseWarning(int64_t top_k) const {
    return MaxExpertShare() > cost::ExpertCollapseShare(static_cast<int64_t>(routed.size()), top_k);
  }
};

class Moe {
 public:
  struct Saved {
    core::Buffer probs;            // (T, E)
    core::Buffer lse;              // (T)
    std::vector<int32_t> token;    // (N) token of each kept assignment, grouped by expert
    std::vector<float> gate;       // (N)
    std::vector<int32_t> choice;   // (T, k) chosen experts (topk_renorm's normalising set)
    std::vector<int64_t> offsets;  // (E_local + 1) assignment ranges per local expert (all E + 1
                                   // with ep: the send order)
    // Expert parallel only: rows per peer sent / received, the received rows regrouped by local
    // expert (grouped row i is received row perm[i]), offsets of the local experts in that order.
    std::vector<int64_t> ep_send_rows, ep_recv_rows, ep_offsets;
    std::vector<int32_t> ep_perm;
    core::Buffer ep_x;            // (N_recv, H) received rows, grouped by local expert
    std::vector<float> fraction;  // (E) f_i over the balance group
    double token_weight = 0;      // w / T_global: the step-loss weight of one token's aux terms
    core::Buffer h1, h3, g;       // (N, Fe)
    core::Buffer out;             // (N, H) expert outputs before gating
    Mlp::Saved shared;
  };

  Moe(ParamSet& params, const std::string& prefix, const MoeConfig& config);
  // y (T, H). stats (optional) receives the routing statistics.
  void Forward(Tensor y, Saved& saved, ConstTensor x, const LayerContext& ctx, MoeStats* stats,
               core::MemTag tag = core::MemTag::kActivations) const;
  // dx (T, H) is written; grads accumulate; the aux and z losses' gradients are included.
  void Backward(Tensor dx, ConstTensor dy, ConstTensor x, Saved& saved,
                const LayerContext& ctx) const;
  // Aux-loss-free balancing: bias_e += rate * sign(mean load - load_e) from one step's routed
  // counts (summed over the ranks sharing the router, by the caller). No-op when rate is 0.
  void UpdateBias(const MoeStats& step);
  const std::vector<float>& bias() const { return bias_; }
  // Restores the bias (a checkpoint); `bias` has E entries.
  void set_bias(const std::vector<float>& bias);
  bool expert_parallel() const { return config_.ep != nullptr && config_.ep->size() > 1; }
  ParamId router_weight() const { return router_; }
  // Sequence parallel with the router replicated over tp (etp = tp): the MoE gathers the tp
  // ranks' rows and routes all of them alike. With etp = 1 (routes_rank_rows) each rank routes
  // its own rows instead.
  bool sequence_parallel() const {
    return config_.shard.sequence_parallel && config_.shard.tp_size > 1 &&
           !config_.routes_rank_rows;
  }

 private:
  void Route(Saved& s, ConstTensor x, const LayerContext& ctx, MoeStats& stats,
             core::MemTag tag) const;
  void RouterBackward(Tensor dx, Tensor dprobs, ConstTensor x, const Saved& s,
                      const LayerContext& ctx) const;
  // Routed experts without ep: forward on this rank's kept rows; backward accumulates dx, dprobs.
  void ExpertsForwardLocal(Saved& s, ConstTensor x, const LayerContext& ctx,
                           core::MemTag tag) const;
  void ExpertsBackwardLocal(Tensor dx, Tensor dprobs, ConstTensor dy, ConstTensor x, Saved& s,
                            const LayerContext& ctx) const;
  // Sequence parallel: y (T/tp rows) <- reduce-scatter of the shared experts' partial output plus
  // this rank's rows of the routed output `routed` (T, H).
  void CombineSp(Tensor y, Saved& s, ConstTensor x, ConstTensor routed, const LayerContext& ctx,
                 core::MemTag tag) const;
  ParamSet& params_;
  MoeConfig config_;
  int64_t experts_local_, expert_begin_;
  ParamId router_, w1_, w3_, w2_;
  // Expert parallel halves of Forward / Backward (expert_parallel()).
  void ExpertsForwardEp(Saved& s, ConstTensor x, const LayerContext& ctx, core::MemTag tag) const;
  void ExpertsBackwardEp(Tensor dx, Tensor dprobs, ConstTensor dy, Saved& s,
                         const LayerContext& ctx) const;
  std::unique_ptr<Mlp> shared_;
  std::vector<float> bias_;  // (E) routing bias of aux-loss-free balancing
};

}  // namespace pentamesh::model

#include "model/moe.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/matmul.h"
#include "model/regions.h"

namespace pentamesh::model {

void MoeStats::Add(const MoeStats& o) {
  if (routed.size() < o.routed.size()) routed.resize(o.routed.size(), 0);
  if (kept.size() < o.kept.size()) kept.resize(o.kept.size(), 0);
  for (size_t i = 0; i < o.routed.size(); ++i) routed[i] += o.routed[i];
  for (size_t i = 0; i < o.kept.size(); ++i) kept[i] += o.kept[i];
  dropped += o.dropped;
  aux_loss += o.aux_loss;
  z_loss += o.z_loss;
}

double MoeStats::LoadImbalance() const {
  if (routed.empty()) return 0;
  const double total =
      static_cast<double>(std::accumulate(routed.begin(), routed.end(), int64_t{0}));
  if (total == 0) return 0;
  const double mx = static_cast<double>(*std::max_element(routed.begin(), routed.end()));
  return mx / (total / static_cast<double>(routed.size()));
}

double MoeStats::MaxExpertShare() const {
  const int64_t total = std::accumulate(routed.begin(), routed.end(), int64_t{0});
  if (total == 0) return 0;
  return static_cast<double>(*std::max_element(routed.begin(), routed.end())) /
         static_cast<double>(total);
}

Moe::Moe(ParamSet& params, const std::string& prefix, const MoeConfig& c)
    : params_(params),
      config_(c),
      experts_local_(c.experts / c.shard.ep_size),
      expert_begin_(c.shard.ep_rank * (c.experts / c.shard.ep_size)),
      bias_(static_cast<size_t>(c.experts), 0.0f) {
  PM_CHECK(c.ep == nullptr || (c.ep->size() == c.shard.ep_size && c.ep->rank() == c.shard.ep_rank))
      << "moe: ep communicator " << c.ep->Describe() << " differs from shard ep " << c.shard.ep_rank
      << "/" << c.shard.ep_size;
  const int64_t E = c.experts, H = c.hidden, Fe = c.expert_ffn;
  const Sharding ep{
      .dim = 0, .axis = MeshAxis::kEp, .size = c.shard.ep_size, .rank = c.shard.ep_rank};
  router_ = params.Add(prefix + ".router", {E, H}, {}, {.std = 0.02}, true);
  w1_ = params.Add(prefix + ".experts.w1", {E, Fe, H}, ep, {.std = 0.02}, true);
  w3_ = params.Add(prefix + ".experts.w3", {E, Fe, H}, ep, {.std = 0.02}, true);
  w2_ = params.Add(prefix + ".experts.w2", {E, H, Fe}, ep, {.std = c.std_out}, true);
  if (c.shared_ffn > 0) {
    shared_ =
        std::make_unique<Mlp>(params, prefix + ".shared", H, c.shared_ffn, c.std_out, c.shard);
  }
}

namespace {

// The k experts of each token by probability plus bias, ties to the lower expert: (T, k).
std::vector<int32_t> TopKExperts(const float* p, const std::vector<float>& bias, int64_t T,
                                 int64_t E, int64_t k) {
  std::vector<int32_t> choice(static_cast<size_t>(T * k));  // (T, k) chosen experts
  std::vector<int32_t> order(static_cast<size_t>(E));
  std::vector<float> score(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(order.begin(), order.end(), 0);
    for (int64_t e = 0; e < E; ++e)
      score[static_cast<size_t>(e)] = p[t * E + e] + bias[static_cast<size_t>(e)];
    const float* pt = score.data();
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return pt[a] > pt[b] || (pt[a] == pt[b] && a < b);
    });
    std::copy(order.begin(), order.begin() + k, choice.begin() + t * k);
  }
  return choice;
}

// The tokens each expert keeps under `capacity` (first choices claim it first), counting routed,
// kept and dropped assignments in `stats`.
std::vector<std::vector<int32_t>> KeepWithinCapacity(const std::vector<int32_t>& choice, int64_t T,
                                                     int64_t E, int64_t k, int64_t capacity,
                                                     MoeStats& stats) {
  stats.routed.assign(static_cast<size_t>(E), 0);
  stats.kept.assign(static_cast<size_t>(E), 0);
  std::vector<std::vector<int32_t>> per_expert(static_cast<size_t>(E));
  for (int64_t slot = 0; slot < k; ++slot) {  // first choices claim capacity first
    for (int64_t t = 0; t < T; ++t) {
      const int32_t e = choice[static_cast<size_t>(t * k + slot)];
      ++stats.routed[static_cast<size_t>(e)];
      if (stats.kept[static_cast<size_t>(e)] >= capacity) {
        ++stats.dropped;
        continue;
      }
      ++stats.kept[static_cast<size_t>(e)];
      per_expert[static_cast<size_t>(e)].push_back(static_cast<int32_t>(t));
    }
  }
  return per_expert;
}

// What the load-balancing loss averages over, summed over the balance group: assignments routed
// to each expert (before capacity), each expert's router probability summed over tokens, tokens.
struct BalanceTotals {
  std::vector<double> routed, prob_sum;  // (E)
  double tokens = 0;
};

BalanceTotals LocalTotals(const float* p, const std::vector<int64_t>& routed, int64_t T,
                          int64_t E) {
  BalanceTotals b{.routed = std::vector<double>(static_cast<size_t>(E)),
                  .prob_sum = std::vector<double>(static_cast<size_t>(E), 0.0),
                  .tokens = static_cast<double>(T)};
  for (int64_t e = 0; e < E; ++e) {
    b.routed[static_cast<size_t>(e)] = static_cast<double>(routed[static_cast<size_t>(e)]);
    double sum = 0;
    for (int64_t t = 0; t < T; ++t) sum += p[t * E + e];
    b.prob_sum[static_cast<size_t>(e)] = sum;
  }
  return b;
}

// The group's totals on every rank: one all_gather of each rank's 2E+1 doubles (sent as their
// bit patterns: a gather copies, never rounds), summed in rank order, so every rank holds
// bit-identical totals (an all-reduce's summation order may differ between ranks).
void SumOverGroup(comm::Communicator* group, BalanceTotals& b) {
  if (group == nullptr || group->size() == 1) return;
  const size_t E = b.routed.size(), width = 2 * E + 1;
  std::vector<int64_t> mine(width), all(width * static_cast<size_t>(group->size()));
  for (size_t e = 0; e < E; ++e) {
    mine[e] = std::bit_cast<int64_t>(b.routed[e]);
    mine[E + e] = std::bit_cast<int64_t>(b.prob_sum[e]);
  }
  mine[2 * E] = std::bit_cast<int64_t>(b.tokens);
  group->all_gather(all.data(), mine.data(), static_cast<int64_t>(width), core::Dtype::kI64);
  std::fill(b.routed.begin(), b.routed.end(), 0.0);
  std::fill(b.prob_sum.begin(), b.prob_sum.end(), 0.0);
  b.tokens = 0;
  for (int r = 0; r < group->size(); ++r) {
    const int64_t* row = all.data() + static_cast<size_t>(r) * width;
    for (size_t e = 0; e < E; ++e) {
      b.routed[e] += std::bit_cast<double>(row[e]);
      b.prob_sum[e] += std::bit_cast<double>(row[E + e]);
    }
    b.tokens += std::bit_cast<double>(row[2 * E]);
  }
}

// sum_e f_e P_e of the load-balancing loss (f: share of assignments routed to e, P: mean router
// probability of e) over the totals; stores each f_e in `fraction`.
double LoadBalanceSum(const BalanceTotals& b, int64_t k, std::vector<float>& fraction) {
  fraction.assign(b.routed.size(), 0.0f);
  double aux = 0;
  for (size_t e = 0; e < b.routed.size(); ++e) {
    const double f = b.routed[e] / (b.tokens * static_cast<double>(k));
    fraction[e] = static_cast<float>(f);
    aux += f * (b.prob_sum[e] / b.tokens);
  }
  return aux;
}

// The gates' denominator per token: 1 (softmax_topk) or the sum of the k chosen probs
// (topk_renorm), (T).
std::vector<float> GateDenominators(const float* p, const std::vector<int32_t>& choice, int64_t T,
                                    int64_t E, int64_t k, spec::MoeRouter router) {
  std::vector<float> denom(static_cast<size_t>(T), 1.0f);
  if (router != spec::MoeRouter::kTopKRenorm) return denom;
  for (int64_t t = 0; t < T; ++t) {
    float sum = 0;
    for (int64_t c = 0; c < k; ++c) sum += p[t * E + choice[static_cast<size_t>(t * k + c)]];
    denom[static_cast<size_t>(t)] = sum;
  }
  return denom;
}

// topk_renorm: dp (T, E) holds d loss / d gate at the kept assignments (0 elsewhere); rewrites
// the chosen entries of each token to d loss / d p through gate_j = p_j / S, S = sum_c p_c:
// dp_j = (dg_j - sum_c dg_c gate_c) / S.
void RenormGateBackward(float* dp, const float* p, const std::vector<int32_t>& choice, int64_t T,
                        int64_t E, int64_t k) {
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* ct = choice.data() + t * k;
    double sum = 0, dot = 0;
    for (int64_t c = 0; c < k; ++c) sum += p[t * E + ct[c]];
    for (int64_t c = 0; c < k; ++c)
      dot += static_cast<double>(dp[t * E + ct[c]]) * p[t * E + ct[c]] / sum;
    for (int64_t c = 0; c < k; ++c)
      dp[t * E + ct[c]] = static_cast<float>((dp[t * E + ct[c]] - dot) / sum);
  }
}

}  // namespace

// Router, top-k, capacity; fills probs, lse, the grouped assignments and the statistics.
void Moe::Route(Saved& s, ConstTensor x, const LayerContext& ctx, MoeStats& stats,
                core::MemTag tag) const {
  const int64_t T = x.dim(0), E = config_.experts, k = config_.top_k;
  s.probs = NewBuffer(ctx, tag, {T, E});
  s.lse = NewBuffer(ctx, tag, {T});
  kernels::linear_forward(s.probs.view(), x, params_.weight(router_));
  const double z_sum = [&] {
    kernels::softmax_rows(s.probs.view(), s.lse.view(), s.probs.view());
    double z = 0;
    for (int64_t t = 0; t < T; ++t) z += static_cast<double>(s.lse.f32()[t]) * s.lse.f32()[t];
    return z;
  }();
  const float* p = s.probs.f32();
  std::vector<int32_t> choice = TopKExperts(p, bias_, T, E, k);
  const std::vector<float> denom = GateDenominators(p, choice, T, E, k, config_.router);
  const int64_t capacity =
      config_.capacity_factor > 0
          ? static_cast<int64_t>(std::ceil(config_.capacity_factor * static_cast<double>(T * k) /
                                           static_cast<double>(E)))
          : T * k;
  std::vector<std::vector<int32_t>> per_expert =
      KeepWithinCapacity(choice, T, E, k, capacity, stats);
  s.offsets.assign(1, 0);
  s.token.clear();
  s.gate.clear();
  const bool ep = expert_parallel();  // with ep: every expert, in send order
  for (int64_t e = ep ? 0 : expert_begin_; e < (ep ? E : expert_begin_ + experts_local_); ++e) {
    std::vector<int32_t>& toks = per_expert[static_cast<size_t>(e)];
    std::sort(toks.begin(), toks.end());  // token order inside an expert
    for (int32_t t : toks) {
      s.token.push_back(t);
      s.gate.push_back(p[t * E + e] / denom[static_cast<size_t>(t)]);
    }
    s.offsets.push_back(static_cast<int64_t>(s.token.size()));
  }
  s.choice.clear();
  if (config_.router == spec::MoeRouter::kTopKRenorm) s.choice = std::move(choice);
  // Load-balancing loss alpha * E * sum f_i P_i over the balance group's tokens (the same value
  // on each of its ranks) and router z-loss beta * mean lse^2. ctx.aux_scale is this rank's share
  // of the micro-batch's weight w: w / (ranks in the balance group), because every one of them
  // reports the loss and the trainer sums the reports; so w / T_global = ranks * aux_scale /
  // T_global scales both gradients, and this rank's z-loss share is its lse^2 sum over T_global.
  BalanceTotals totals = LocalTotals(p, stats.routed, T, E);
  SumOverGroup(config_.balance, totals);
  comm::Communicator* tp_rows = config_.routes_rank_rows ? config_.shard.tp_comm : nullptr;
  SumOverGroup(tp_rows, totals);
  const double ranks = (config_.balance != nullptr ? config_.balance->size() : 1) *
                       (tp_rows != nullptr ? tp_rows->size() : 1);
  const double aux = LoadBalanceSum(totals, k, s.fraction);
  s.token_weight = ctx.aux_scale * ranks / totals.tokens;
  stats.aux_loss = ctx.aux_scale * config_.aux_loss_coef * static_cast<double>(E) * aux;
  stats.z_loss = s.token_weight * config_.z_loss_coef * z_sum;
}

void Moe::ExpertsForwardLocal(Saved& s, ConstTensor x, const LayerContext& ctx,
                              core::MemTag tag) const {
  const int64_t H = config_.hidden, Fe = config_.expert_ffn;
  const int64_t N = static_cast<int64_t>(s.token.size());
  const core::MemTag rounded = ctx.RoundedStashTag(tag);
  s.h1 = NewBuffer(ctx, rounded, {N, Fe});
  s.h3 = NewBuffer(ctx, rounded, {N, Fe});
  s.g = NewBuffer(ctx, rounded, {N, Fe});
  s.out = NewBuffer(ctx, rounded, {N, H});
  for (int64_t e = 0; e < experts_local_; ++e) {
    const int64_t r0 = s.offsets[static_cast<size_t>(e)],
                  r1 = s.offsets[static_cast<size_t>(e + 1)];
    if (r0 == r1) continue;
    core::Buffer xe = NewBuffer(ctx, core::MemTag::kOther, {r1 - r0, H});
    kernels::gather_rows(xe.view(), x, s.token.data() + r0);
    SwiGluFfnForward(s.out.view().Rows(r0, r1), s.h1.view().Rows(r0, r1), s.h3.view().Rows(r0, r1),
                     s.g.view().Rows(r0, r1), xe.view(), ExpertSlice(params_.weight(w1_), e),
                     ExpertSlice(params_.weight(w3_), e), ExpertSlice(params_.weight(w2_), e), ctx);
  }
}

void Moe::CombineSp(Tensor y, Saved& s, ConstTensor x, ConstTensor routed, const LayerContext& ctx,
                    core::MemTag tag) const {
  comm::Communicator& tp = *config_.shard.tp_comm;
  const int64_t rows = y.dim(0), first = config_.shard.tp_rank * rows;
  if (shared_) {
    core::Buffer partial = NewBuffer(ctx, core::MemTag::kComm, {x.dim(0), config_.hidden});
    shared_->ForwardPartial(partial.view(), s.shared, x, ctx, ctx.RoundedStashTag(tag));
    ScatterSeqTp(tp, y, partial.view());
    kernels::add_inplace(y, routed.Rows(first, first + rows));
  } else {
    kernels::copy(y, routed.Rows(first, first + rows));
  }
}

void Moe::Forward(Tensor y, Saved& s, ConstTensor x_rows, const LayerContext& ctx, MoeStats* stats,
                  core::MemTag tag) const {
  // Under SP every tp rank routes all T rows of the micro-batch (gathered), alike.
  core::Buffer gathered;
  ConstTensor x = x_rows;
  if (sequence_parallel()) {
    gathered = NewBuffer(ctx, core::MemTag::kComm,
                         {x_rows.dim(0) * config_.shard.tp_size, config_.hidden});
    GatherSeqTp(*config_.shard.tp_comm, gathered.view(), x_rows);
    x = gathered.view();
  }
  MoeStats local;
  Route(s, x, ctx, local, tag);
  if (expert_parallel()) {
    ExpertsForwardEp(s, x, ctx, tag);
  } else {
    ExpertsForwardLocal(s, x, ctx, tag);
  }
  if (sequence_parallel()) {
    core::Buffer routed = NewBuffer(ctx, core::MemTag::kOther, {x.dim(0), config_.hidden});
    kernels::fill(routed.view(), 0.0f);
    kernels::scatter_add_rows(routed.view(), s.out.view(), s.token.data(), s.gate.data());
    CombineSp(y, s, x, routed.view(), ctx, tag);
  } else {
    kernels::fill(y, 0.0f);
    if (shared_) shared_->Forward(y, s.shared, x, ctx, ctx.RoundedStashTag(tag));
    kernels::scatter_add_rows(y, s.out.view(), s.token.data(), s.gate.data());
  }
  RoundActivation(ctx, y);
  if (stats) stats->Add(local);
}

// Softmax backward of the router plus the aux and z-loss gradients; dx accumulates.
void Moe::RouterBackward(Tensor dx, Tensor dprobs, ConstTensor x, const Saved& s,
                         const LayerContext& ctx) const {
  const int64_t T = x.dim(0), E = config_.experts;
  const float* p = s.probs.f32();
  const float* lse = s.lse.f32();
  float* dp = dprobs.f32();
  // d aux / d p(t, i) = w * alpha * E * f_i / T_global; d z / d lse_t = w * beta * 2 lse_t /
  // T_global (token_weight = w / T_global, see Route).
  const float aux_coef =
      static_cast<float>(s.token_weight * config_.aux_loss_coef * static_cast<double>(E));
  const float z_coef = static_cast<float>(s.token_weight * config_.z_loss_coef * 2.0);
  if (config_.router == spec::MoeRouter::kTopKRenorm)
    RenormGateBackward(dp, p, s.choice, T, E, config_.top_k);
  for (int64_t t = 0; t < T; ++t) {
    float* dpt = dp + t * E;
    const float* pt = p + t * E;
    double dot = 0;
    for (int64_t e = 0; e < E; ++e) {
      dpt[e] += aux_coef * s.fraction[static_cast<size_t>(e)];
      dot += static_cast<double>(dpt[e]) * pt[e];
    }
    for (int64_t e = 0; e < E; ++e) {  // dlogits, in place
      dpt[e] = pt[e] * (dpt[e] - static_cast<float>(dot)) + z_coef * lse[t] * pt[e];
    }
  }
  WeightGradGemm(ctx, params_.grad(router_), dprobs, x);
  kernels::linear_backward_input(dx, dprobs, params_.weight(router_), /*accumulate_dx=*/true);
  (void)ctx;
}

void Moe::ExpertsBackwardLocal(Tensor dx, Tensor dprobs, ConstTensor dy, ConstTensor x, Saved& s,
                               const LayerContext& ctx) const {
  const int64_t E = config_.experts, H = config_.hidden;
  for (int64_t e = 0; e < experts_local_; ++e) {
    const int64_t r0 = s.offsets[static_cast<size_t>(e)],
                  r1 = s.offsets[static_cast<size_t>(e + 1)];
    if (r0 == r1) continue;
    const int64_t n = r1 - r0;
    const int32_t* tok = s.token.data() + r0;
    core::Buffer xe = NewBuffer(ctx, core::MemTag::kOther, {n, H});
    core::Buffer dout = NewBuffer(ctx, core::MemTag::kOther, {n, H});
    kernels::gather_rows(xe.view(), x, tok);
    kernels::gather_rows(dout.view(), dy, tok);
    const float* out = s.out.f32() + r0 * H;
    for (int64_t r = 0; r < n; ++r) {  // d gate = <dy_t, out_a>; d out_a = gate * dy_t
      float* d = dout.f32() + r * H;
      double dot = 0;
      for (int64_t i = 0; i < H; ++i) dot += static_cast<double>(d[i]) * out[r * H + i];
      dprobs.f32()[tok[r] * E + expert_begin_ + e] += static_cast<float>(dot);
      const float g = s.gate[static_cast<size_t>(r0 + r)];
      for (int64_t i = 0; i < H; ++i) d[i] *= g;
    }
    core::Buffer dxe = NewBuffer(ctx, core::MemTag::kOther, {n, H});
    SwiGluFfnBackward(
        dxe.view(), ExpertSlice(params_.grad(w1_), e), ExpertSlice(params_.grad(w3_), e),
        ExpertSlice(params_.grad(w2_), e), dout.view(), xe.view(), s.h1.view().Rows(r0, r1),
        s.h3.view().Rows(r0, r1), s.g.view().Rows(r0, r1), ExpertSlice(params_.weight(w1_), e),
        ExpertSlice(params_.weight(w3_), e), ExpertSlice(params_.weight(w2_), e), ctx);
    kernels::scatter_add_rows(dx, dxe.view(), tok, nullptr);
  }
}

void Moe::Backward(Tensor dx_rows, ConstTensor dy_rows, ConstTensor x_rows, Saved& s,
                   const LayerContext& ctx) const {
  const int64_t E = config_.experts, H = config_.hidden;
  const bool sp = sequence_parallel();
  // Under SP: all rows of dy and x (gathered; the stash holds the shard), the routed and router
  // dx of all rows in `dx` (alike on every tp rank), the shared experts' partial dx
  // reduce-scattered into dx_rows.
  core::Buffer dy_full, x_full, dx_full;
  ConstTensor dy = dy_rows, x = x_rows;
  Tensor dx = dx_rows;
  if (sp) {
    comm::Communicator& tp = *config_.shard.tp_comm;
    const int64_t T = x_rows.dim(0) * tp.size();
    dy_full = NewBuffer(ctx, core::MemTag::kComm, {T, H});
    GatherSeqTp(tp, dy_full.view(), dy_rows);
    x_full = NewBuffer(ctx, core::MemTag::kComm, {T, H});
    GatherSeqTp(tp, x_full.view(), x_rows);
    dy = dy_full.view();
    x = x_full.view();
    dx_full = NewBuffer(ctx, core::MemTag::kOther, {T, H});
    dx = dx_full.view();
  }
  const int64_t T = x.dim(0);
  if (shared_ && !sp) {
    shared_->Backward(dx, dy, x, s.shared, ctx);
  } else {
    kernels::fill(dx, 0.0f);
  }
  core::Buffer dprobs = NewBuffer(ctx, core::MemTag::kOther, {T, E});
  kernels::fill(dprobs.view(), 0.0f);
  if (expert_parallel()) {
    ExpertsBackwardEp(dx, dprobs.view(), dy, s, ctx);
  } else {
    ExpertsBackwardLocal(dx, dprobs.view(), dy, x, s, ctx);
  }
  RouterBackward(dx, dprobs.view(), x, s, ctx);
  if (sp) {
    const int64_t rows = dx_rows.dim(0), first = config_.shard.tp_rank * rows;
    if (shared_) {
      core::Buffer partial = NewBuffer(ctx, core::MemTag::kComm, {T, H});
      shared_->BackwardPartial(partial.view(), dy, x, s.shared, ctx);
      ScatterSeqTp(*config_.shard.tp_comm, dx_rows, partial.view());
      kernels::add_inplace(dx_rows, dx.Rows(first, first + rows));
    } else {
      kernels::copy(dx_rows, dx.Rows(first, first + rows));
    }
  }
  s = Saved();
}

namespace {

// Element counts of an all_to_all_v moving `rows[p]` rows of `width` floats to/from peer p.
std::vector<int64_t> Elements(const std::vector<int64_t>& rows, int64_t width) {
  std::vector<int64_t> out(rows.size());
  for (size_t p = 0; p < rows.size(); ++p) out[p] = rows[p] * width;
  return out;
}

// Rows of `rows` (N, W) moved to the peers by `send_rows`, received per `recv_rows`.
void ExchangeRows(comm::Communicator& ep, Tensor recv, const std::vector<int64_t>& recv_rows,
                  ConstTensor send, const std::vector<int64_t>& send_rows, int64_t width) {
  ep.all_to_all_v(recv.f32(), Elements(recv_rows, width), send.f32(), Elements(send_rows, width),
                  core::Dtype::kF32);
}

}  // namespace

void Moe::ExpertsForwardEp(Saved& s, ConstTensor x, const LayerContext& ctx,
                           core::MemTag tag) const {
  comm::Communicator& ep = *config_.ep;
  const int64_t H = config_.hidden, Fe = config_.expert_ffn, El = experts_local_;
  const int P = ep.size();
  // Kept assignments per (peer, local expert of that peer): sent first so owners can regroup.
  std::vector<int64_t> send_meta(static_cast<size_t>(config_.experts)), recv_meta(send_meta.size());
  for (size_t e = 0; e < send_meta.size(); ++e) send_meta[e] = s.offsets[e + 1] - s.offsets[e];
  const std::vector<int64_t> meta_counts(static_cast<size_t>(P), El);
  ep.all_to_all_v(recv_meta.data(), meta_counts, send_meta.data(), meta_counts, core::Dtype::kI64);
  s.ep_send_rows.assign(static_cast<size_t>(P), 0);
  s.ep_recv_rows.assign(static_cast<size_t>(P), 0);
  std::vector<int64_t> recv_start(static_cast<size_t>(P * El + 1), 0);
  for (int64_t i = 0; i < P * El; ++i) {
    s.ep_send_rows[static_cast<size_t>(i / El)] += send_meta[static_cast<size_t>(i)];
    s.ep_recv_rows[static_cast<size_t>(i / El)] += recv_meta[static_cast<size_t>(i)];
    recv_start[static_cast<size_t>(i + 1)] =
        recv_start[static_cast<size_t>(i)] + recv_meta[static_cast<size_t>(i)];
  }
  // Received rows come peer-major; the grouped pass wants them expert-major.
  s.ep_perm.clear();
  s.ep_offsets.assign(1, 0);
  for (int64_t j = 0; j < El; ++j) {
    for (int64_t p = 0; p < P; ++p) {
      const int64_t start = recv_start[static_cast<size_t>(p * El + j)];
      for (int64_t r = 0; r < recv_meta[static_cast<size_t>(p * El + j)]; ++r)
        s.ep_perm.push_back(static_cast<int32_t>(start + r));
    }
    s.ep_offsets.push_back(static_cast<int64_t>(s.ep_perm.size()));
  }
  const int64_t n_send = static_cast<int64_t>(s.token.size()),
                n_recv = static_cast<int64_t>(s.ep_perm.size());
  core::Buffer xsend = NewBuffer(ctx, core::MemTag::kComm, {n_send, H});
  core::Buffer xrecv = NewBuffer(ctx, core::MemTag::kComm, {n_recv, H});
  kernels::gather_rows(xsend.view(), x, s.token.data());
  ExchangeRows(ep, xrecv.view(), s.ep_recv_rows, xsend.view(), s.ep_send_rows, H);  // dispatch
  s.ep_x = NewBuffer(ctx, tag, {n_recv, H});
  kernels::gather_rows(s.ep_x.view(), xrecv.view(), s.ep_perm.data());
  const core::MemTag rounded = ctx.RoundedStashTag(tag);
  s.h1 = NewBuffer(ctx, rounded, {n_recv, Fe});
  s.h3 = NewBuffer(ctx, rounded, {n_recv, Fe});
  s.g = NewBuffer(ctx, rounded, {n_recv, Fe});
  core::Buffer out = NewBuffer(ctx, core::MemTag::kOther, {n_recv, H});
  for (int64_t j = 0; j < El; ++j) {  // one grouped pass per local expert
    const int64_t r0 = s.ep_offsets[static_cast<size_t>(j)],
                  r1 = s.ep_offsets[static_cast<size_t>(j + 1)];
    if (r0 == r1) continue;
    SwiGluFfnForward(out.view().Rows(r0, r1), s.h1.view().Rows(r0, r1), s.h3.view().Rows(r0, r1),
                     s.g.view().Rows(r0, r1), s.ep_x.view().Rows(r0, r1),
                     ExpertSlice(params_.weight(w1_), j), ExpertSlice(params_.weight(w3_), j),
                     ExpertSlice(params_.weight(w2_), j), ctx);
  }
  kernels::fill(xrecv.view(), 0.0f);  // reused: the outputs back in received order
  kernels::scatter_add_rows(xrecv.view(), out.view(), s.ep_perm.data(), nullptr);
  s.out = NewBuffer(ctx, rounded, {n_send, H});
  ExchangeRows(ep, s.out.view(), s.ep_send_rows, xrecv.view(), s.ep_recv_rows, H);  // combine
}

void Moe::ExpertsBackwardEp(Tensor dx, Tensor dprobs, ConstTensor dy, Saved& s,
                            const LayerContext& ctx) const {
  comm::Communicator& ep = *config_.ep;
  const int64_t H = config_.hidden, E = config_.experts;
  const int64_t n_send = static_cast<int64_t>(s.token.size()),
                n_recv = static_cast<int64_t>(s.ep_perm.size());
  core::Buffer dsend = NewBuffer(ctx, core::MemTag::kComm, {n_send, H});
  kernels::gather_rows(dsend.view(), dy, s.token.data());
  for (int64_t e = 0; e < E; ++e) {  // d gate = <dy_t, out_a>; d out_a = gate * dy_t
    for (int64_t a = s.offsets[static_cast<size_t>(e)]; a < s.offsets[static_cast<size_t>(e + 1)];
         ++a) {
      float* d = dsend.f32() + a * H;
      const float* o = s.out.f32() + a * H;
      double dot = 0;
      for (int64_t i = 0; i < H; ++i) dot += static_cast<double>(d[i]) * o[i];
      dprobs.f32()[s.token[static_cast<size_t>(a)] * E + e] += static_cast<float>(dot);
      const float g = s.gate[static_cast<size_t>(a)];
      for (int64_t i = 0; i < H; ++i) d[i] *= g;
    }
  }
  core::Buffer drecv = NewBuffer(ctx, core::MemTag::kComm, {n_recv, H});
  ExchangeRows(ep, drecv.view(), s.ep_recv_rows, dsend.view(), s.ep_send_rows, H);
  core::Buffer dgrouped = NewBuffer(ctx, core::MemTag::kOther, {n_recv, H});
  core::Buffer dxg = NewBuffer(ctx, core::MemTag::kOther, {n_recv, H});
  kernels::gather_rows(dgrouped.view(), drecv.view(), s.ep_perm.data());
  for (int64_t j = 0; j < experts_local_; ++j) {
    const int64_t r0 = s.ep_offsets[static_cast<size_t>(j)],
                  r1 = s.ep_offsets[static_cast<size_t>(j + 1)];
    if (r0 == r1) continue;
    SwiGluFfnBackward(dxg.view().Rows(r0, r1), ExpertSlice(params_.grad(w1_), j),
                      ExpertSlice(params_.grad(w3_), j), ExpertSlice(params_.grad(w2_), j),
                      dgrouped.view().Rows(r0, r1), s.ep_x.view().Rows(r0, r1),
                      s.h1.view().Rows(r0, r1), s.h3.view().Rows(r0, r1), s.g.view().Rows(r0, r1),
                      ExpertSlice(params_.weight(w1_), j), ExpertSlice(params_.weight(w3_), j),
                      ExpertSlice(params_.weight(w2_), j), ctx);
  }
  kernels::fill(drecv.view(), 0.0f);  // reused: dx rows back in received order
  kernels::scatter_add_rows(drecv.view(), dxg.view(), s.ep_perm.data(), nullptr);
  ExchangeRows(ep, dsend.view(), s.ep_send_rows, drecv.view(), s.ep_recv_rows, H);
  kernels::scatter_add_rows(dx, dsend.view(), s.token.data(), nullptr);
}

void Moe::UpdateBias(const MoeStats& step) {
  if (config_.bias_update_rate == 0 || step.routed.empty()) return;
  PM_CHECK(static_cast<int64_t>(step.routed.size()) == config_.experts)
      << "UpdateBias: " << step.routed.size() << " experts in stats, " << config_.experts;
  const double mean =
      static_cast<double>(std::accumulate(step.routed.begin(), step.routed.end(), int64_t{0})) /
      static_cast<double>(config_.experts);
  const float rate = static_cast<float>(config_.bias_update_rate);
  for (size_t e = 0; e < bias_.size(); ++e) {
    const double load = static_cast<double>(step.routed[e]);
    bias_[e] += load < mean ? rate : (load > mean ? -rate : 0.0f);
  }
}

void Moe::set_bias(const std::vector<float>& bias) {
  PM_CHECK(bias.size() == bias_.size()) << "set_bias: " << bias.size() << " of " << bias_.size();
  bias_ = bias;
}

}  // namespace pentamesh::model

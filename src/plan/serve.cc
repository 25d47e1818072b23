// The serving search (plan/serve.h): enumerate, cost, filter by targets, rank by cost.
#include "plan/serve.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace pentamesh::plan {
namespace {

constexpr int64_t kTpMax = 8;
constexpr int64_t kPpMax = 8;

// One replica's shapes tp x ep x pp (replicas = 1), in this order of loops: tp 1, 2, 4, 8 within
// a node; ep (MoE only) dividing the experts, every divisor or only the powers of two; pp 1, 2,
// 4, 8 dividing the layers.
std::vector<cost::ServeLayout> ReplicaShapes(const spec::ModelSpec& m, const spec::ClusterSpec& c,
                                             bool ep_powers_of_two) {
  std::vector<cost::ServeLayout> out;
  const int64_t experts = m.is_moe() ? m.moe.experts : 1;
  for (int64_t tp = 1; tp <= std::min(kTpMax, c.gpus_per_node); tp *= 2) {
    for (int64_t ep = 1; ep <= experts; ep = ep_powers_of_two ? 2 * ep : ep + 1) {
      if (experts % ep != 0) continue;
      for (int64_t pp = 1; pp <= kPpMax; pp *= 2) {
        if (m.layers % pp == 0) out.push_back({.tp = tp, .ep = ep, .pp = pp, .replicas = 1});
      }
    }
  }
  return out;
}

bool Meets(const cost::ServeEstimate& e, const ServeTargets& t) {
  return (t.ttft_p95_s <= 0 || e.ttft_p95_s <= t.ttft_p95_s) &&
         (t.itl_s <= 0 || e.itl_s <= t.itl_s);
}

auto RankKey(const cost::ServeEstimate& e) {
  const cost::ServeLayout& l = e.layout;
  return std::make_tuple(e.usd_per_request, l.gpus(), e.ttft_p95_s, l.tp, l.ep, l.pp, l.replicas);
}

// How far a fitting layout is from the targets: the worse of its two ratios over target.
double Miss(const cost::ServeEstimate& e, const ServeTargets& t) {
  double miss = 0;
  if (t.ttft_p95_s > 0) miss = std::max(miss, e.ttft_p95_s / t.ttft_p95_s);
  if (t.itl_s > 0) miss = std::max(miss, e.itl_s / t.itl_s);
  return miss;
}

}  // namespace

std::vector<cost::ServeLayout> ServeLayouts(const cost::Context& ctx,
                                            const cost::ServeWorkload& w) {
  const spec::ClusterSpec& c = ctx.cluster();
  std::vector<cost::ServeLayout> out;
  for (cost::ServeLayout l : ReplicaShapes(ctx.model(), c, false)) {
    const int64_t replica = l.gpus();
    for (l.replicas = 1; l.replicas <= w.requests && replica * l.replicas <= c.gpus();
         ++l.replicas) {
      out.push_back(l);
    }
  }
  return out;
}

ServeSearchResult SearchServe(const cost::Context& ctx, const cost::ServeWorkload& w,
                              const ServeTargets& targets, int top_k) {
  ServeSearchResult result;
  std::vector<cost::ServeEstimate> met;
  for (const cost::ServeLayout& l : ServeLayouts(ctx, w)) {
    cost::ServeEstimate e = cost::EstimateServe(ctx, l, w);
    ++result.costed;
    if (!e.fits) continue;
    ++result.fit;
    if (Meets(e, targets)) {
      met.push_back(std::move(e));
    } else if (!result.nearest_miss || Miss(e, targets) < Miss(*result.nearest_miss, targets)) {
      result.nearest_miss = std::move(e);
    }
  }
  result.met = static_cast<int64_t>(met.size());
  std::sort(met.begin(), met.end(), [](const cost::ServeEstimate& a, const cost::ServeEstimate& b) {
    return RankKey(a) < RankKey(b);
  });
  if (met.size() > static_cast<size_t>(top_k)) met.resize(static_cast<size_t>(top_k));
  result.top = std::move(met);
  return result;
}

}  // namespace pentamesh::plan

namespace pentamesh::plan {
namespace {

bool MeetsSlo(const ServeSimResult& r, const ServeCapacityQuery& q) {
  return r.steps > 0 && (q.slo_ttft_p95_s <= 0 || r.ttft_s.p95 <= q.slo_ttft_p95_s) &&
         (q.slo_itl_p95_s <= 0 || r.itl_s.p95 <= q.slo_itl_p95_s);
}

// How far a simulated replica is from the SLOs: the worse ratio over target.
double SloMiss(const ServeSimResult& r, const ServeCapacityQuery& q) {
  if (r.steps == 0) return 1e300;
  double miss = 0;
  if (q.slo_ttft_p95_s > 0) miss = std::max(miss, r.ttft_s.p95 / q.slo_ttft_p95_s);
  if (q.slo_itl_p95_s > 0) miss = std::max(miss, r.itl_s.p95 / q.slo_itl_p95_s);
  return miss;
}

auto DeploymentKey(const ServeDeployment& d) {
  return std::make_tuple(d.usd_per_hour, d.layout.gpus(), d.replica.ttft_s.p95, d.layout.tp,
                         d.layout.ep, d.layout.pp, static_cast<int>(d.precision),
                         d.weight_only_bits, d.fp4, d.experts_in_hbm, d.kv_fp8, d.layout.replicas);
}

// The capacity search's replica shapes (ReplicaShapes, ep a power of two), fewest GPUs first; at
// most kReplicaGpusMax GPUs and the cluster's.
constexpr int64_t kReplicaGpusMax = 64;
std::vector<cost::ServeLayout> CapacityShapes(const spec::ModelSpec& m,
                                              const spec::ClusterSpec& c) {
  std::vector<cost::ServeLayout> out = ReplicaShapes(m, c, true);
  std::erase_if(out, [&c](const cost::ServeLayout& l) {
    return l.gpus() > std::min(kReplicaGpusMax, c.gpus());
  });
  std::stable_sort(
      out.begin(), out.end(),
      [](const cost::ServeLayout& a, const cost::ServeLayout& b) { return a.gpus() < b.gpus(); });
  return out;
}

// One replica's share of the query's traffic: Poisson at rate / replicas, the query's lengths
// (and their spread), requests, seed and targets; `prefilled` for a decode pool.
ServeTraffic ReplicaTraffic(const ServeCapacityQuery& q, int64_t replicas, bool prefilled) {
  return {.rate_per_s = q.rate_per_s / static_cast<double>(replicas),
          .requests = q.sim_requests,
          .seed = q.seed,
          .length_range_ratio = q.length_range_ratio,
          .slo_ttft_s = q.slo_ttft_p95_s,
          .slo_itl_s = q.slo_itl_p95_s,
          .prefilled = prefilled};
}

// The fewest replicas in [1, max_replicas] whose one replica's simulation `meets`: the most
// replicas first (a shape that misses there misses at every count: a replica's latencies grow
// with its rate), then doubling from 1 to the first count that meets, and bisection below it.
// met = false: none does, and `sim` is at max_replicas.
struct ReplicaCount {
  int64_t replicas = 0;
  ServeSimResult sim;
  bool met = false;
};
template <typename Simulate, typename Meets>
ReplicaCount FewestReplicas(int64_t max_replicas, const Simulate& simulate, const Meets& meets) {
  int64_t lo = 0, hi = max_replicas;
  ServeSimResult at_hi = simulate(hi);
  if (meets(at_hi) && max_replicas > 1) {
    hi = 1;
    at_hi = simulate(hi);
  }
  while (!meets(at_hi) && hi < max_replicas) {
    lo = hi;
    hi = std::min(max_replicas, 2 * hi);
    at_hi = simulate(hi);
  }
  if (!meets(at_hi)) return {.replicas = hi, .sim = std::move(at_hi), .met = false};
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    ServeSimResult r = simulate(mid);
    if (meets(r)) {
      hi = mid;
      at_hi = std::move(r);
    } else {
      lo = mid;
    }
  }
  return {.replicas = hi, .sim = std::move(at_hi), .met = true};
}

// A deployment of `replicas` replicas of `one` serving q.rate_per_s with w's weights.
ServeDeployment MakeDeployment(const cost::ServeLayout& one, int64_t replicas,
                               const cost::ServeWorkload& w, const ServeCapacityQuery& q,
                               ServeSimResult r) {
  ServeDeployment d{.layout = {.tp = one.tp, .ep = one.ep, .pp = one.pp, .replicas = replicas},
                    .precision = w.precision,
                    .weight_only_bits = w.weight_only_bits,
                    .fp4 = w.fp4,
                    .experts_in_hbm = w.experts_in_hbm,
                    .kv_fp8 = w.kv_fp8,
                    .replica = std::move(r)};
  d.meets = MeetsSlo(d.replica, q);
  d.usd_per_hour = static_cast<double>(d.layout.gpus()) * w.usd_per_gpu_hour;
  const double tokens_per_hour = q.rate_per_s * 3600.0;
  d.usd_per_million_output_tokens =
      d.usd_per_hour / (tokens_per_hour * static_cast<double>(w.output_tokens)) * 1e6;
  d.usd_per_million_tokens =
      d.usd_per_hour / (tokens_per_hour * static_cast<double>(w.input_tokens + w.output_tokens)) *
      1e6;
  return d;
}

// The cheapest prefill pool and decode pool for `w` (its weights and KV dtype) over the shapes,
// each the fewest GPUs meeting its own target (ServeDisaggregated); nullopt when a pool has none.
std::optional<ServeDisaggregated> SearchDisaggregated(const cost::Context& ctx,
                                                      const ServeCapacityQuery& q,
                                                      const cost::ServeWorkload& w,
                                                      ServeCapacityResult& result) {
  const spec::ClusterSpec& c = ctx.cluster();
  cost::ServeWorkload prompt = w;  // the prefill pool: each request's prompt and first token
  prompt.output_tokens = 1;
  cost::ServeWorkload decode = w;  // the decode pool: requests enter through the prefill side
  decode.engine.profile.frontend_s = 0;
  std::optional<ServeDeployment> best_prefill, best_decode;
  double transfer_s = 0;
  for (const cost::ServeLayout& one : CapacityShapes(ctx.model(), c)) {
    const int64_t max_replicas = std::max<int64_t>(1, c.gpus() / one.gpus());
    auto run = [&](const cost::ServeWorkload& pw, bool prefilled, const auto& meets) {
      const cost::ServeEstimate e = cost::EstimateServe(ctx, one, pw);
      if (!e.fits) return std::optional<ServeDeployment>();
      const cost::ServeStepCost step = cost::MakeServeStepCost(ctx, one, pw);
      auto simulate = [&](int64_t replicas) {
        ++result.simulations;
        return SimulateServe(step, pw, e.kv_blocks, ReplicaTraffic(q, replicas, prefilled));
      };
      ReplicaCount n = FewestReplicas(max_replicas, simulate, meets);
      if (!n.met) return std::optional<ServeDeployment>();
      return std::optional(MakeDeployment(one, n.replicas, w, q, std::move(n.sim)));
    };
    if (!best_prefill || one.gpus() < best_prefill->layout.gpus()) {
      const double t = cost::KvTransferSeconds(ctx, one, w);
      auto meets = [&](const ServeSimResult& r) {
        return r.steps > 0 && (q.slo_ttft_p95_s <= 0 || r.ttft_s.p95 + t <= q.slo_ttft_p95_s);
      };
      if (auto d = run(prompt, false, meets);
          d && (!best_prefill || d->layout.gpus() < best_prefill->layout.gpus())) {
        best_prefill = std::move(d);
        transfer_s = t;
      }
    }
    if (!best_decode || one.gpus() < best_decode->layout.gpus()) {
      auto meets = [&q](const ServeSimResult& r) {
        return r.steps > 0 && (q.slo_itl_p95_s <= 0 || r.itl_s.p95 <= q.slo_itl_p95_s);
      };
      if (auto d = run(decode, true, meets);
          d && (!best_decode || d->layout.gpus() < best_decode->layout.gpus())) {
        best_decode = std::move(d);
      }
    }
  }
  if (!best_prefill || !best_decode) return std::nullopt;
  ServeDisaggregated out{.prefill = std::move(*best_prefill),
                         .decode = std::move(*best_decode),
                         .kv_transfer_s = transfer_s};
  out.ttft_p95_s = out.prefill.replica.ttft_s.p95 + transfer_s;
  out.itl_p95_s = out.decode.replica.itl_s.p95;
  out.prefill.meets = out.decode.meets = true;  // each its own target
  out.usd_per_hour = out.prefill.usd_per_hour + out.decode.usd_per_hour;
  out.usd_per_million_output_tokens =
      out.prefill.usd_per_million_output_tokens + out.decode.usd_per_million_output_tokens;
  out.usd_per_million_tokens =
      out.prefill.usd_per_million_tokens + out.decode.usd_per_million_tokens;
  return out;
}

// The query's workload in each weight format searched (q.weights, else BF16 and FP8 where the GPU
// may deploy it) x KV in BF16 and FP8 x (with experts_in_hbm) all experts resident or offloaded,
// one request each.
std::vector<cost::ServeWorkload> SearchedWorkloads(const spec::ClusterSpec& c,
                                                   const ServeCapacityQuery& q) {
  std::vector<std::string> formats = q.weights;
  if (formats.empty()) formats = {"bf16", "fp8"};
  std::vector<cost::ServeWorkload> out;
  for (const std::string& format : formats) {
    for (bool kv_fp8 : {false, true}) {
      cost::ServeWorkload w = q.workload;
      if (!ServeWeightsSearchable(c, format) || !cost::ParseServeWeights(format, w)) continue;
      w.kv_fp8 = kv_fp8;
      w.requests = 1;
      if (w.experts_in_hbm > 0) {
        cost::ServeWorkload resident = w;
        resident.experts_in_hbm = 0;
        resident.expert_hit_rate = 1.0;
        out.push_back(resident);
      }
      out.push_back(w);
    }
  }
  return out;
}

}  // namespace

bool ServeWeightsSearchable(const spec::ClusterSpec& c, const std::string& format) {
  if (format == "fp8") return c.peak_fp8_tflops > 0;
  if (format == "fp4") return c.peak_fp4_tflops > 0;
  return true;
}

cost::ServeWorkload DeployedWorkload(const ServeDeployment& d, cost::ServeWorkload w) {
  w.precision = d.precision;
  w.weight_only_bits = d.weight_only_bits;
  w.fp4 = d.fp4;
  w.kv_fp8 = d.kv_fp8;
  w.experts_in_hbm = d.experts_in_hbm;
  if (d.experts_in_hbm == 0) w.expert_hit_rate = 1.0;
  return w;
}

ServeCapacityResult SearchServeCapacity(const cost::Context& ctx, const ServeCapacityQuery& q,
                                        int top_k) {
  const spec::ClusterSpec& c = ctx.cluster();
  ServeCapacityResult result;
  const std::vector<cost::ServeWorkload> workloads = SearchedWorkloads(c, q);
  std::vector<ServeDeployment> met;
  // The GPUs of the top_k-th cheapest deployment met so far (all pay the same GPU price): a shape
  // whose one replica has more cannot enter the list, so it is not simulated.
  auto bound = [&met, top_k] {
    if (met.size() < static_cast<size_t>(top_k)) return std::numeric_limits<int64_t>::max();
    std::vector<int64_t> gpus;
    for (const ServeDeployment& d : met) gpus.push_back(d.layout.gpus());
    std::nth_element(gpus.begin(), gpus.begin() + (top_k - 1), gpus.end());
    return gpus[static_cast<size_t>(top_k - 1)];
  };
  for (const cost::ServeLayout& one : CapacityShapes(ctx.model(), c)) {
    if (one.gpus() > bound()) break;  // shapes come fewest GPUs first
    for (const cost::ServeWorkload& w : workloads) {
      const cost::ServeEstimate e = cost::EstimateServe(ctx, one, w);
      if (!e.fits || one.gpus() > bound()) continue;
      ++result.candidates;
      const cost::ServeStepCost step = cost::MakeServeStepCost(ctx, one, w);
      const int64_t max_replicas = std::max<int64_t>(1, c.gpus() / one.gpus());
      auto simulate = [&](int64_t replicas) {
        ++result.simulations;
        return SimulateServe(step, w, e.kv_blocks, ReplicaTraffic(q, replicas, false));
      };
      ReplicaCount n = FewestReplicas(max_replicas, simulate,
                                      [&q](const ServeSimResult& r) { return MeetsSlo(r, q); });
      ServeDeployment d = MakeDeployment(one, n.replicas, w, q, std::move(n.sim));
      if (n.met) {
        met.push_back(std::move(d));
      } else if (!result.nearest_miss ||
                 SloMiss(d.replica, q) < SloMiss(result.nearest_miss->replica, q)) {
        result.nearest_miss = std::move(d);
      }
    }
  }
  if (q.workload.output_tokens >= 2) {
    for (const cost::ServeWorkload& w : workloads) {
      std::optional<ServeDisaggregated> d = SearchDisaggregated(ctx, q, w, result);
      if (d && (!result.disaggregated || std::make_tuple(d->usd_per_hour, d->ttft_p95_s) <
                                             std::make_tuple(result.disaggregated->usd_per_hour,
                                                             result.disaggregated->ttft_p95_s))) {
        result.disaggregated = std::move(d);
      }
    }
  }
  std::sort(met.begin(), met.end(), [](const ServeDeployment& a, const ServeDeployment& b) {
    return DeploymentKey(a) < DeploymentKey(b);
  });
  if (met.size() > static_cast<size_t>(top_k)) met.resize(static_cast<size_t>(top_k));
  result.top = std::move(met);
  if (!result.top.empty()) result.nearest_miss.reset();
  return result;
}

}  // namespace pentamesh::plan

// The serving search (plan/serve.h): enumerate, cost, filter by targets, rank by cost.
#include "plan/serve.h"

#include <algorithm>
#include <tuple>

namespace pentamesh::plan {
namespace {

constexpr int64_t kTpMax = 8;
constexpr int64_t kPpMax = 8;

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
  const spec::ModelSpec& m = ctx.model();
  const spec::ClusterSpec& c = ctx.cluster();
  std::vector<cost::ServeLayout> out;
  const int64_t experts = m.is_moe() ? m.moe.experts : 1;
  for (int64_t tp = 1; tp <= std::min(kTpMax, c.gpus_per_node); tp *= 2) {
    for (int64_t ep = 1; ep <= experts; ++ep) {
      if (experts % ep != 0) continue;
      for (int64_t pp = 1; pp <= kPpMax; pp *= 2) {
        if (m.layers % pp != 0) continue;
        const int64_t replica = tp * ep * pp;
        for (int64_t r = 1; r <= w.requests && replica * r <= c.gpus(); ++r) {
          out.push_back({.tp = tp, .ep = ep, .pp = pp, .replicas = r});
        }
      }
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

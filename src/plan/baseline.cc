#include "plan/baseline.h"

#include <fmt/format.h>

#include <numeric>

#include "spec/validate.h"

namespace pentamesh::plan {
namespace {

constexpr int64_t kSeqLenCap = int64_t{1} << 22;  // 4M tokens: the longest sequence tried

// FSDP at its best for `train`: the fastest fitting (mbs, recompute) with dp = GPUs and ZeRO-3.
core::Result<std::optional<cost::Estimate>> BestFsdp(const spec::ModelSpec& model,
                                                     const spec::ClusterSpec& cluster,
                                                     const spec::TrainSpec& train,
                                                     const SearchOptions& options) {
  SearchOptions fsdp = options;
  fsdp.top_k = 1;
  fsdp.pareto = false;
  PM_ASSIGN_OR_RETURN(fsdp.space.allow, Constraints::Parse(fmt::format(
                                            "dp={} tp=1 pp=1 cp=1 ep=1 zero=3", cluster.gpus())));
  PM_ASSIGN_OR_RETURN(SearchResult result, Search(model, cluster, train, fsdp));
  if (result.top.empty()) return std::optional<cost::Estimate>();
  return std::optional<cost::Estimate>(result.top.front());
}

}  // namespace

spec::Layout FsdpLayout(int64_t gpus) {
  return spec::Layout{.dp = gpus, .zero = 3, .mbs = 1, .recompute = spec::Recompute::kFull};
}

int64_t LongestSequence(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                        const spec::TrainSpec& train, const spec::Layout& layout,
                        const cost::CostParams& params, int64_t cap) {
  const int64_t divisor = (layout.cp > 1 ? 2 * layout.cp : 1) * (layout.sp ? layout.tp : 1);
  const int64_t granule = std::lcm(divisor, int64_t{256});
  const int64_t microbatches = std::max<int64_t>(1, spec::MicroBatches(train, layout));
  spec::ModelSpec long_model = model;
  long_model.max_seq_len = cap;
  spec::Layout probe = layout;
  probe.mbs = 1;
  probe.recompute = spec::Recompute::kFull;
  auto fits = [&](int64_t seq_len) {
    spec::TrainSpec t = train;
    t.seq_len = seq_len;
    t.global_batch_tokens = seq_len * layout.dp * microbatches;
    const cost::Estimate e =
        cost::EstimateLayout(long_model, cluster, t, probe, params, /*explain=*/false);
    return e.memory.total <= e.memory.capacity;
  };
  // Doubling finds the bracket; bisection over multiples of the granule refines it.
  int64_t lo = 0;                  // largest multiple (in granules) known to fit
  int64_t hi = cap / granule + 1;  // smallest known not to fit
  for (int64_t k = 1; k < hi; k *= 2) {
    if (!fits(k * granule)) {
      hi = k;
      break;
    }
    lo = k;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid * granule) ? lo : hi) = mid;
  }
  return lo * granule;
}

namespace {

// FSDP holding one sequence of the requested length per rank: its memory at that length, whatever
// the batch. Violations: the requested batch's rules first, then memory.
cost::Estimate FsdpAtSequence(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                              const spec::TrainSpec& train, const cost::CostParams& params) {
  const spec::Layout fsdp = FsdpLayout(cluster.gpus());
  std::vector<std::string> violations =
      cost::EstimateLayout(model, cluster, train, fsdp, params, /*explain=*/true).violations;
  spec::TrainSpec one_per_rank = train;
  one_per_rank.global_batch_tokens = train.seq_len * cluster.gpus();
  cost::Estimate e = cost::EstimateLayout(model, cluster, one_per_rank, fsdp, params, true);
  for (auto& v : e.violations) violations.push_back(std::move(v));
  e.violations = std::move(violations);
  e.fits = false;
  return e;
}

}  // namespace

core::Result<BaselineComparison> CompareWithFsdp(const spec::ModelSpec& model,
                                                 const spec::ClusterSpec& cluster,
                                                 const spec::TrainSpec& train,
                                                 const cost::Estimate& best,
                                                 const SearchOptions& options) {
  BaselineComparison out;
  out.best = best;
  out.seq_len_cap = kSeqLenCap;
  PM_ASSIGN_OR_RETURN(auto fsdp, BestFsdp(model, cluster, train, options));
  out.fsdp = fsdp ? *fsdp : FsdpAtSequence(model, cluster, train, options.cost);
  out.fsdp_max_seq_len =
      LongestSequence(model, cluster, train, FsdpLayout(cluster.gpus()), options.cost, kSeqLenCap);
  out.best_max_seq_len =
      LongestSequence(model, cluster, train, best.layout, options.cost, kSeqLenCap);
  if (fsdp) {
    out.fsdp_days = fsdp->days;
    out.fsdp_usd = fsdp->cost_usd;
  } else {
    // The longest power-of-two sequence at which FSDP both fits and meets the batch.
    int64_t seq_len = 1;
    while (seq_len * 2 <= std::min(out.fsdp_max_seq_len, train.seq_len)) seq_len *= 2;
    for (; seq_len >= 512 && !out.fsdp_runnable; seq_len /= 2) {
      spec::TrainSpec shorter = train;
      shorter.seq_len = seq_len;
      PM_ASSIGN_OR_RETURN(auto runnable, BestFsdp(model, cluster, shorter, options));
      if (runnable) {
        out.fsdp_runnable = *runnable;
        out.fsdp_runnable_seq_len = seq_len;
      }
    }
    if (!out.fsdp_runnable) return out;
    out.fsdp_priced_at_equal_work = true;
    out.fsdp_days = best.days * best.mfu / out.fsdp_runnable->mfu;
    out.fsdp_usd = best.cost_usd * best.mfu / out.fsdp_runnable->mfu;
  }
  out.days_saved = out.fsdp_days - best.days;
  out.usd_saved = out.fsdp_usd - best.cost_usd;
  return out;
}

}  // namespace pentamesh::plan

#include "plan/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>

namespace pentamesh::plan {
namespace {

using cost::Estimate;

auto LayoutKey(const spec::Layout& l) {
  return std::make_tuple(l.dp, l.tp, l.pp, l.cp, l.ep, l.etp, static_cast<int>(l.ep_placement),
                         l.zero, l.mbs, static_cast<int>(l.recompute), l.recompute_modules,
                         static_cast<int>(l.schedule), l.virtual_stages,
                         static_cast<int>(l.cp_kind), l.sp);
}

double ModelStateBytes(const cost::Memory& m) { return m.weights + m.grads + m.optimizer; }

Reason OverReason(const cost::Memory& m) {
  const std::pair<double, Reason> parts[] = {{m.weights, Reason::kOverWeights},
                                             {m.grads, Reason::kOverGrads},
                                             {m.optimizer, Reason::kOverOptimizer},
                                             {m.activations, Reason::kOverActivations},
                                             {m.attention_scores, Reason::kOverScores},
                                             {m.logits, Reason::kOverLogits},
                                             {m.comm_buffers, Reason::kOverCommBuffers},
                                             {m.framework, Reason::kOverFramework},
                                             {m.fragmentation, Reason::kOverFragmentation}};
  const auto* largest = std::max_element(std::begin(parts), std::end(parts),
                                         [](auto& a, auto& b) { return a.first < b.first; });
  return largest->second;
}

// Layouts no other beats on (step time, memory): sorted by ascending step, strictly descending
// memory.
void OfferPareto(std::vector<Estimate>& front, const Estimate& e) {
  auto pos =
      std::lower_bound(front.begin(), front.end(), e, [](const Estimate& a, const Estimate& b) {
        return std::make_tuple(a.time.step, a.memory.total, LayoutKey(a.layout)) <
               std::make_tuple(b.time.step, b.memory.total, LayoutKey(b.layout));
      });
  if (pos != front.begin() && Dominates(*(pos - 1), e)) return;
  auto end = pos;
  while (end != front.end() && Dominates(e, *end)) ++end;
  pos = front.erase(pos, end);
  front.insert(pos, e);
}

// The search's order (RankedBefore) as a comparator.
struct Ranker {
  const SearchOptions& options;
  const spec::ClusterSpec& cluster;
  bool operator()(const Estimate& a, const Estimate& b) const {
    return RankedBefore(options, cluster, a, b);
  }
};

// Keeps the best `k` in a heap whose front is the worst kept.
void OfferTop(std::vector<Estimate>& heap, size_t k, const Estimate& e, const Ranker& better) {
  if (heap.size() < k) {
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end(), better);
  } else if (better(e, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), better);
    heap.back() = e;
    std::push_heap(heap.begin(), heap.end(), better);
  }
}

struct Worker {
  std::vector<Estimate> top;
  std::vector<Estimate> mesh_top;  // one_per_mesh: the best of the mesh being searched
  std::vector<Estimate> front;
  Counts counts;
  std::optional<Estimate> nearest;  // smallest memory overshoot among costed layouts
};

struct Context {
  const cost::Context& cost;  // built once per search: the allocation-free EstimateLayout path
  const SearchOptions& options;
  const Space& space;
  Ranker ranker;
};

void Record(const Context& ctx, Worker& w, const Estimate& e) {
  ++w.counts.evaluated;
  if (e.fits) {
    ++w.counts.fit;
    if (ctx.options.one_per_mesh) {
      OfferTop(w.mesh_top, 1, e, ctx.ranker);
    } else {
      OfferTop(w.top, static_cast<size_t>(ctx.options.top_k), e, ctx.ranker);
    }
    if (ctx.options.pareto) OfferPareto(w.front, e);
    return;
  }
  ++w.counts.did_not_fit;
  const double over = e.memory.total - e.memory.capacity;
  ++w.counts
        .reasons[static_cast<size_t>(over > 0 ? OverReason(e.memory) : Reason::kOtherViolation)];
  if (over > 0 && (!w.nearest || over < w.nearest->memory.total - w.nearest->memory.capacity ||
                   (over == w.nearest->memory.total - w.nearest->memory.capacity &&
                    LayoutKey(e.layout) < LayoutKey(w.nearest->layout)))) {
    w.nearest = e;
  }
}

void Prune(Worker& w, Reason reason, int64_t n) {
  w.counts.pruned += n;
  w.counts.reasons[static_cast<size_t>(reason)] += n;
}

// One branch, micro-batch sizes ascending. Returns true when the branch's first costed layout
// shows that model states alone exceed capacity.
bool SearchBranch(const Context& ctx, Worker& w, const Mesh& mesh, const Branch& branch) {
  const Space& space = ctx.space;
  const auto& recomputes = space.recomputes();
  const size_t n_recompute = recomputes.size();
  // over[r]: proven over capacity at this mbs and every larger one. AtLeastAsLarge (space.h):
  // memory.total(a) >= memory.total(b) for the same layout otherwise, checked on every layout of
  // several spaces in tests/plan/search_test.cc. (Full recomputation is comparable with no other:
  // its one-layer recompute working set can exceed selective's stash when a stage holds few
  // layers.)
  std::vector<bool> over(n_recompute, false);
  bool first = true;
  for (size_t i = 0; i < mesh.mbs.size(); ++i) {
    if (!space.MbsValid(mesh, branch, mesh.mbs[i])) continue;
    if (std::all_of(over.begin(), over.end(), [](bool o) { return o; })) {
      Prune(w, Reason::kPrunedMonotone, space.CountFrom(mesh, branch, i));
      return false;
    }
    int64_t costed = 0;
    for (size_t r = 0; r < n_recompute; ++r) {
      if (over[r]) continue;
      const spec::Layout layout = space.MakeLayout(mesh, branch, mesh.mbs[i], recomputes[r]);
      const Estimate e = cost::EstimateLayout(ctx.cost, layout, /*explain=*/false);
      ++costed;
      Record(ctx, w, e);
      if (!ctx.options.prune || e.memory.total <= e.memory.capacity) {
        first = false;
        continue;
      }
      if (first && ModelStateBytes(e.memory) > e.memory.capacity) {
        Prune(w, Reason::kPrunedModelStates, space.CountFrom(mesh, branch, i) - costed);
        return true;
      }
      first = false;
      for (size_t bigger = 0; bigger < n_recompute; ++bigger) {
        if (AtLeastAsLarge(recomputes[bigger], recomputes[r])) over[bigger] = true;
      }
    }
    Prune(w, Reason::kPrunedMonotone, static_cast<int64_t>(n_recompute) - costed);
  }
  return false;
}

void SearchMeshBranches(const Context& ctx, Worker& w, const Mesh& mesh) {
  for (size_t b = 0; b < mesh.branches.size(); ++b) {
    if (!SearchBranch(ctx, w, mesh, mesh.branches[b])) continue;
    // Model states alone are over at this ZeRO stage; the remaining branches have ZeRO <= it.
    for (size_t rest = b + 1; rest < mesh.branches.size(); ++rest) {
      Prune(w, Reason::kPrunedModelStates, ctx.space.CountFrom(mesh, mesh.branches[rest], 0));
    }
    return;
  }
}

void SearchMesh(const Context& ctx, Worker& w, const Mesh& mesh) {
  SearchMeshBranches(ctx, w, mesh);
  for (const Estimate& e : w.mesh_top) {
    OfferTop(w.top, static_cast<size_t>(ctx.options.top_k), e, ctx.ranker);
  }
  w.mesh_top.clear();
}

void Merge(Worker& into, Worker& from, const SearchOptions& options, const Ranker& ranker) {
  for (const Estimate& e : from.top) {
    OfferTop(into.top, static_cast<size_t>(options.top_k), e, ranker);
  }
  for (const Estimate& e : from.front) OfferPareto(into.front, e);
  into.counts += from.counts;
  if (from.nearest) {
    const double over = from.nearest->memory.total - from.nearest->memory.capacity;
    if (!into.nearest || over < into.nearest->memory.total - into.nearest->memory.capacity ||
        (over == into.nearest->memory.total - into.nearest->memory.capacity &&
         LayoutKey(from.nearest->layout) < LayoutKey(into.nearest->layout))) {
      into.nearest = from.nearest;
    }
  }
}

}  // namespace

const char* Describe(Reason reason) {
  switch (reason) {
    case Reason::kPrunedModelStates:
      return "model states (weights+grads+optimizer) over capacity";
    case Reason::kPrunedMonotone:
      return "a variant with no more memory (smaller mbs, or selective) was already over";
    case Reason::kOverWeights:
      return "over capacity, weights largest";
    case Reason::kOverGrads:
      return "over capacity, gradients largest";
    case Reason::kOverOptimizer:
      return "over capacity, optimizer states largest";
    case Reason::kOverActivations:
      return "over capacity, activations largest";
    case Reason::kOverScores:
      return "over capacity, attention scores largest";
    case Reason::kOverLogits:
      return "over capacity, logits largest";
    case Reason::kOverCommBuffers:
      return "over capacity, communication buffers largest";
    case Reason::kOverFramework:
      return "over capacity, framework overhead largest";
    case Reason::kOverFragmentation:
      return "over capacity, fragmentation largest";
    case Reason::kOtherViolation:
      return "violates a cost-model rule";
    case Reason::kCount:
      break;
  }
  return "?";
}

Counts& Counts::operator+=(const Counts& o) {
  space += o.space;
  evaluated += o.evaluated;
  pruned += o.pruned;
  did_not_fit += o.did_not_fit;
  fit += o.fit;
  for (size_t i = 0; i < kReasonCount; ++i) reasons[i] += o.reasons[i];
  return *this;
}

bool Better(const Estimate& a, const Estimate& b) {
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  if (a.memory.total != b.memory.total) return a.memory.total < b.memory.total;
  return LayoutKey(a.layout) < LayoutKey(b.layout);
}

bool RankedBefore(const SearchOptions& options, const spec::ClusterSpec& cluster, const Estimate& a,
                  const Estimate& b) {
  if (options.rank == Rank::kGoodput) {
    const double ga = cost::GoodputTokensPerS(cluster, a, options.goodput);
    const double gb = cost::GoodputTokensPerS(cluster, b, options.goodput);
    if (ga != gb) return ga > gb;
  }
  return Better(a, b);
}

bool Dominates(const Estimate& a, const Estimate& b) {
  if (a.time.step > b.time.step || a.memory.total > b.memory.total) return false;
  if (a.time.step < b.time.step || a.memory.total < b.memory.total) return true;
  return LayoutKey(a.layout) < LayoutKey(b.layout);
}

core::Result<SearchResult> Search(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                                  const spec::TrainSpec& train, const SearchOptions& options) {
  if (options.top_k < 1) return core::Status::Error("plan: --top must be at least 1");
  const auto start = std::chrono::steady_clock::now();
  const Space space(model, cluster, train, options.space);
  const cost::Context cost_model(model, cluster, train, options.cost);
  const Context ctx{cost_model, options, space, Ranker{options, cluster}};
  const auto& meshes = space.meshes();
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, std::max(1, static_cast<int>(meshes.size())));
  std::vector<Worker> workers(static_cast<size_t>(threads));
  std::atomic<size_t> next{0};
  auto run = [&](Worker& w) {
    for (size_t m = next++; m < meshes.size(); m = next++) SearchMesh(ctx, w, meshes[m]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers.size(); ++t) pool.emplace_back(run, std::ref(workers[t]));
  run(workers[0]);
  for (auto& thread : pool) thread.join();
  for (size_t t = 1; t < workers.size(); ++t) Merge(workers[0], workers[t], options, ctx.ranker);

  Worker& all = workers[0];
  SearchResult result;
  result.counts = all.counts;
  result.counts.space = all.counts.evaluated + all.counts.pruned;
  std::sort(all.top.begin(), all.top.end(), ctx.ranker);
  result.top = std::move(all.top);
  result.pareto = std::move(all.front);
  if (result.top.empty() && all.nearest) {
    result.nearest_miss = cost::EstimateLayout(cost_model, all.nearest->layout, /*explain=*/true);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pentamesh::plan

// plan::Search: costs every layout of the space (space.h) that could fit, ranks those that fit by
// throughput, and explains the rest.
//
// Pruning (lossless): a layout is skipped without costing only when a layout already costed proves
// it cannot fit, by properties of the cost model that tests/plan/search_test.cc checks on every
// layout of several spaces (and that held on all 1.7M layouts of the seeds' spaces and three more):
//   1. Activation memory grows with the micro-batch: memory.total does not decrease as mbs grows,
//      everything else equal. So once (mbs, r) is over capacity, so is (mbs' >= mbs, r).
//   2. No recomputation needs at least the memory of selective recomputation, everything else
//      equal, so selective over capacity means none is too. (Full recomputation is not ordered
//      against the others: its one-layer recompute working set can exceed selective's stash.)
//   3. The model states (weights + grads + optimizer) of a pipeline stage do not depend on the
//      schedule, sp, cp_kind, mbs or recompute, and do not decrease as the ZeRO stage falls; the
//      reported memory is that of the most loaded stage, so it is at least any stage's model
//      states. So when a costed layout's model states alone exceed capacity at ZeRO z, every
//      layout of that mesh with ZeRO <= z is over.
// Only layouts over capacity are ever pruned, so the set of fitting layouts, the top K and the
// Pareto front are those of brute force (the test compares them on small spaces).
//
// Ranking: tokens/s descending (or, with Rank::kGoodput, tokens/s x goodput under failures and
// checkpoints, cost/goodput.h), then memory ascending, then the layout's fields, so the order is
// total and the result does not depend on the thread count.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "cost/cost.h"
#include "cost/goodput.h"
#include "plan/space.h"

namespace pentamesh::plan {

// Why a layout did not make the list. Counted in an array; formatted only for the report.
enum class Reason : uint8_t {
  kPrunedModelStates,  // pruned: model states of its mesh at its ZeRO stage exceed capacity
  kPrunedMonotone,     // pruned: a variant with less activation memory was already over
  kOverWeights,        // costed, over capacity; the largest memory component is named
  kOverGrads,
  kOverOptimizer,
  kOverActivations,
  kOverScores,
  kOverLogits,
  kOverCommBuffers,
  kOverFramework,
  kOverFragmentation,
  kOtherViolation,  // costed, within capacity, but the cost model reports a violation
  kCount
};
constexpr size_t kReasonCount = static_cast<size_t>(Reason::kCount);
const char* Describe(Reason reason);

struct Counts {
  int64_t space = 0;      // layouts in the space = evaluated + pruned
  int64_t evaluated = 0;  // costed = fit + did_not_fit
  int64_t pruned = 0;     // proven not to fit without costing
  int64_t did_not_fit = 0;
  int64_t fit = 0;
  std::array<int64_t, kReasonCount> reasons{};  // did_not_fit + pruned in all
  Counts& operator+=(const Counts& other);
};

// What the search ranks by: the step's throughput, or the throughput left after failures and
// checkpoints (cost::GoodputTokensPerS with SearchOptions::goodput).
enum class Rank { kThroughput, kGoodput };

struct SearchOptions {
  SpaceOptions space;
  int top_k = 10;
  bool pareto = false;  // also collect the layouts no other beats on step time and memory
  // Rank only the best layout of each mesh (dp, tp, pp, cp, ep, placement), so runners-up are
  // different meshes rather than the best one with another ZeRO stage or schedule.
  bool one_per_mesh = false;
  bool prune = true;  // false = cost every layout (brute force, for tests)
  int threads = 0;    // 0 = hardware concurrency
  cost::CostParams cost;
  Rank rank = Rank::kThroughput;
  cost::GoodputParams goodput;  // for Rank::kGoodput
};

struct SearchResult {
  std::vector<cost::Estimate> top;     // best first
  std::vector<cost::Estimate> pareto;  // ascending step time (descending memory)
  Counts counts;
  // The costed layout with the smallest memory overshoot, re-costed with explain = true; set when
  // nothing fits and something was costed.
  std::optional<cost::Estimate> nearest_miss;
  double seconds = 0;
};

// Runs the search. Errors only for invalid options (top_k < 1); an empty `top` is a valid answer
// that ExplainNoFit turns into a message.
core::Result<SearchResult> Search(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                                  const spec::TrainSpec& train, const SearchOptions& options);

// True when a comes before b in the throughput ranking.
bool Better(const cost::Estimate& a, const cost::Estimate& b);
// True when a comes before b in the ranking `options.rank` asks for (Better for kThroughput).
// REQUIRES for kGoodput: both fit (cost::EstimateGoodput's requirements).
bool RankedBefore(const SearchOptions& options, const spec::ClusterSpec& cluster,
                  const cost::Estimate& a, const cost::Estimate& b);
// True when a beats b on both step time and memory (ties broken by the ranking's total order).
bool Dominates(const cost::Estimate& a, const cost::Estimate& b);

// Lines explaining why nothing fits: the failing constraint and by how much (the nearest miss),
// the commonest reasons, or which structural rule no layout meets. REQUIRES: result.top.empty().
std::vector<std::string> ExplainNoFit(const spec::ModelSpec& model,
                                      const spec::ClusterSpec& cluster,
                                      const spec::TrainSpec& train, const SearchOptions& options,
                                      const SearchResult& result);

}  // namespace pentamesh::plan

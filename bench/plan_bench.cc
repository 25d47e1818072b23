// Layouts per second of the planner, on the seeds' two big spaces:
//   MeridianFin-72B, 128K context, 1,024 H100 (meridian-128k) and Llama 3 405B, 8K, 16,384 H100.
// "items/s" is layouts of the space covered per second (costed + pruned); the BruteForce variants
// cost every layout on one thread, which is the cost model's own evaluation rate.
// Run: build/bench/plan_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include "plan/search.h"
#include "spec/load_toml.h"

namespace pentamesh::plan {
namespace {

struct Specs {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  spec::TrainSpec train;
};

Specs Load(const char* model, int64_t gpus, const char* train) {
  return {*spec::LoadModel(model), *spec::LoadCluster("h100-sxm", gpus), *spec::LoadTrain(train)};
}

void RunSearch(benchmark::State& state, const Specs& s, bool prune) {
  SearchOptions options;
  options.prune = prune;
  options.threads = static_cast<int>(state.range(0));
  options.top_k = 10;
  Counts counts;
  for (auto _ : state) {
    auto result = Search(s.model, s.cluster, s.train, options);
    benchmark::DoNotOptimize(result);
    counts = result->counts;
  }
  state.SetItemsProcessed(state.iterations() * counts.space);
  state.counters["space"] = static_cast<double>(counts.space);
  state.counters["costed"] = static_cast<double>(counts.evaluated);
  state.counters["pruned"] = static_cast<double>(counts.pruned);
}

void BM_PlanMeridian1024(benchmark::State& state) {
  static const Specs s = Load("meridianfin-72b", 1024, "meridian-128k");
  RunSearch(state, s, true);
}
void BM_PlanLlama405B16384(benchmark::State& state) {
  static const Specs s = Load("llama3-405b", 16384, "llama3-405b-8k");
  RunSearch(state, s, true);
}
void BM_BruteForceMeridian1024(benchmark::State& state) {
  static const Specs s = Load("meridianfin-72b", 1024, "meridian-128k");
  RunSearch(state, s, false);
}
void BM_BruteForceLlama405B16384(benchmark::State& state) {
  static const Specs s = Load("llama3-405b", 16384, "llama3-405b-8k");
  RunSearch(state, s, false);
}

BENCHMARK(BM_PlanMeridian1024)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PlanLlama405B16384)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BruteForceMeridian1024)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BruteForceLlama405B16384)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pentamesh::plan

BENCHMARK_MAIN();

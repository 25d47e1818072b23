#include "train/host_cost.h"

#include <fmt/format.h>

#include <algorithm>

namespace pentamesh::train {

namespace {

// Ranks of the run sharing this host's cores and memory.
int64_t RanksPerHost(const RunConfig& c) {
  const int64_t ranks = c.run.layout.gpus();
  return c.run.ranks_per_host > 0 ? std::min<int64_t>(c.run.ranks_per_host, ranks) : ranks;
}

}  // namespace

double RankCores(const HostProfile& h, const RunConfig& c) {
  const double cores = static_cast<double>(std::max(1, h.cores));
  const double threads = c.run.threads > 0 ? static_cast<double>(c.run.threads) : cores;
  return std::min(threads, cores / static_cast<double>(RanksPerHost(c)));
}

spec::ClusterSpec HostCluster(const RunConfig& c) {
  // Each rank is a "device" with its share of the host's peak and bandwidth.
  const int64_t ranks = c.run.layout.gpus();
  const int64_t per_host = RanksPerHost(c);
  const double share = 1.0 / static_cast<double>(per_host);
  spec::ClusterSpec s{.name = "cpu-host",
                      .gpu = "cpu",
                      .peak_tflops = c.run.peak_gflops / 1e3 * share,
                      .hbm_gb = 1e3,
                      .hbm_gbps = c.run.mem_gbps * share,
                      .gpus_per_node = per_host,
                      .nodes = ranks % per_host == 0 ? ranks / per_host : 1,
                      .intra_node_gbps = c.run.mem_gbps,
                      .nics_per_node = 1,
                      .inter_node_gbps = 1};
  if (const auto& h = c.run.host) {
    // The peak stays the host's share (MFU is against the whole host); the rate a rank's GEMMs
    // reach at its run.threads, at most that share (the ranks together never beat the
    // all-threads measurement), is the efficiency.
    s.gemm_efficiency =
        std::min(1.0, h->FormAt(RankCores(*h, c)).gflops / (h->peak_gflops * share));
    if (const CommProfile* link = h->CommFor(static_cast<int>(per_host))) {
      s.intra_node_gbps = link->fit.bus_gbps;
      s.intra_node_latency_us = link->fit.latency_us;
      s.intra_node_reduce_gbps = link->fit.reduce_gbps;
    }
  }
  return s;
}

cost::CostParams EngineCostParams() {
  cost::CostParams p;
  p.fp32_main_grads = true;
  p.framework_bytes = 0;
  p.fragmentation = 0;
  p.safety_margin_bytes = 0;
  p.fp32_logits_only = true;  // the engine's stash policy (cost::CostParams documents each)
  // The engine's memory-bound work moves each byte kEngineElementwiseTraffic times over what the
  // cost model counts: unfused kernels, a double-precision exp per logit in the loss, zeroing.
  p.elementwise_traffic = kEngineElementwiseTraffic;
  p.selective_recomputes_qkv = true;
  p.moe_regathers_input = true;
  p.ulysses_stash_fp32 = true;
  p.moe_replicated_over_tp = true;
  p.pp_scatter_gather = false;  // each tp rank sends its full activation replica
  p.dp_overlap = 0;             // ZeroOptimizer::Step reduces the gradients after the last backward
  // The CP ring posts its sends before computing, but Open MPI's shared-memory transport moves
  // the bytes only inside MPI calls of both ranks, so with one thread per rank nothing overlaps.
  p.cp_overlap = 0;
  p.inference_layer_overhead_s = 0;  // no kernel launches: a layer is its kernels' work
  return p;
}

cost::CostParams EngineCostParams(const RunConfig& c) {
  cost::CostParams p = EngineCostParams();
  if (const auto& h = c.run.host) {
    // The GEMM form at the rank's cores. The engine's attention and elementwise kernels run on
    // one thread: a rank gets its single-thread rate, or its share of the cores when ranks
    // outnumber them.
    const spec::ClusterSpec host = HostCluster(c);
    const double ranks = static_cast<double>(host.gpus_per_node);
    const double core_share = std::min(1.0, static_cast<double>(std::max(1, h->cores)) / ranks);
    const double rank_gflops = host.peak_tflops * 1e3 * host.gemm_efficiency;
    p.gemm_dim_overhead = h->FormAt(RankCores(*h, c)).dim_overhead;
    p.attention_relative = h->attention_gflops * core_share / rank_gflops;
    p.hbm_efficiency = std::min(1.0, h->stream_1t_gbps * core_share / host.hbm_gbps);
    // A measured link is the achieved bus bandwidth already.
    if (h->CommFor(static_cast<int>(host.gpus_per_node))) p.bus_efficiency_intra = 1.0;
  }
  return p;
}

cost::Estimate PredictRun(const RunConfig& c) {
  return cost::EstimateLayout(c.model, HostCluster(c), c.train, c.run.layout, EngineCostParams(c),
                              /*explain=*/true);
}

cost::Memory PredictRankMemory(const RunConfig& c, int64_t pp_rank) {
  if (c.run.layout.pp == 1) return PredictRun(c).memory;
  const cost::Context ctx(c.model, HostCluster(c), c.train, EngineCostParams(c));
  return cost::MemoryForStage(ctx, c.run.layout, pp_rank);
}

core::Status CheckMemoryLimit(const RunConfig& c, const cost::Memory& predicted) {
  const int64_t limit = c.run.memory_limit_bytes;
  if (limit == 0 || predicted.total <= static_cast<double>(limit)) return core::Status::Ok();
  std::string sum;
  double cumulative = 0;
  for (const cost::MemoryCategory& category : cost::kMemoryCategories) {
    const double bytes = predicted.*category.field;
    if (bytes == 0) continue;
    cumulative += bytes;
    sum += fmt::format("{}{} {:.0f}", sum.empty() ? "" : " + ", category.name, bytes);
    if (cumulative <= static_cast<double>(limit)) continue;
    return core::Status::Error(fmt::format(
        "run.memory_limit_bytes: {} bytes per rank cannot hold layout '{}': {} does not fit "
        "(cost model, in category order: {} = {:.0f} > {} bytes; the rank needs {:.0f} bytes)",
        limit, spec::ShortLayout(c.run.layout), category.name, sum, cumulative, limit,
        predicted.total));
  }
  // The categories sum to the total; rounding aside, this is not reached.
  return core::Status::Error(fmt::format(
      "run.memory_limit_bytes: {} bytes per rank is below the predicted {:.0f} bytes of layout "
      "'{}'",
      limit, predicted.total, spec::ShortLayout(c.run.layout)));
}

}  // namespace pentamesh::train

// The host as the cost model sees it: train::HostCluster (each rank a "device" with its share of
// the host's peak and bandwidth, or of its measured profile), EngineCostParams (this engine's
// policies and its one fitted time parameter), and the predictions of a run's step and memory
// built on them (PredictRun, PredictRankMemory, CheckMemoryLimit). The Trainer, tune/ and
// generate use them; none of them needs the Trainer.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "cost/cost.h"
#include "train/host_profile.h"
#include "train/run_config.h"

namespace pentamesh::train {

// The host as a "cluster" of one device per rank for the cost model: each rank gets its share of
// run.peak_gflops and run.mem_gbps (run.ranks_per_host ranks share them), so the cluster's total
// peak is the host's and MFU is the same number predicted and measured. With a measured host
// (run.host_profile): the rate of the GEMM form at the rank's run.threads (at most its share of
// the cores; HostProfile::FormAt), capped at its share of the all-threads rate, is its
// gemm_efficiency against that share, and the host's
// [[comm]] entry for the run's ranks per host gives the intra-node link (intra_node_gbps,
// intra_node_latency_us, intra_node_reduce_gbps). Without a matching entry the link stays
// run.mem_gbps with no latency.
spec::ClusterSpec HostCluster(const RunConfig& config);
// Cores a rank's BLAS runs on: its run.threads (0 = OpenBLAS's default, every core), at most its
// share of the host's cores (h.cores over the ranks on the host).
double RankCores(const HostProfile& h, const RunConfig& config);

// The cost model's parameters describing this engine: fp32 gradients, no framework overhead,
// no DP overlap, and the engine's stash, MoE and pipeline policies (cost::CostParams documents
// each flag).
// The engine stack's one fitted time parameter (cost::CostParams::elementwise_traffic): fitted
// on single-process runs of tiny-dense (mbs 4, 8, 16) on the CI-class 2-core host, measured step
// time = the host profile's prediction; held out: every tune run at 2 and 4 ranks and tiny-moe
// (docs/COST_MODEL.md "This host", docs/tune.md).
inline constexpr double kEngineElementwiseTraffic = 3.9;
cost::CostParams EngineCostParams();
// EngineCostParams with the run's measured host (run.host_profile), if any: the GEMM form's d at
// the rank's cores, single-threaded attention and triad rates, and bus efficiency 1 when the
// link was measured (its bandwidth is the achieved one).
cost::CostParams EngineCostParams(const RunConfig& config);
// The cost model's estimate for the run with EngineCostParams (memory: the most loaded stage; a
// pp > 1 Trainer's predicted() holds its own stage's memory instead).
cost::Estimate PredictRun(const RunConfig& config);

// The cost model's memory per category of one rank of pp stage `pp_rank` of the run's layout
// (PredictRun's memory when pp = 1). REQUIRES: the layout passes CheckEngineLayout.
cost::Memory PredictRankMemory(const RunConfig& config, int64_t pp_rank);
// run.memory_limit_bytes against `predicted` (PredictRankMemory): OK when the cap is 0 or the
// total fits; else an error naming the field and the first category (cost::kMemoryCategories
// order) at which the running sum crosses the cap, with the bytes summed so far. Trainer::Create
// calls it before allocating anything.
core::Status CheckMemoryLimit(const RunConfig& config, const cost::Memory& predicted);

}  // namespace pentamesh::train

// plan::SearchServe: the serving layouts of a model (tp 1, 2, 4, 8 within a node; ep over the
// divisors of the expert count; pp 1, 2, 4, 8 dividing the layers; replicas 1 to the requests),
// each costed by cost::EstimateServe, kept when it fits and meets the latency targets, ranked by
// cost per request (then fewer GPUs, then lower p95 TTFT, then the layout's fields: a total order).
// When none meets the targets, the nearest miss (the fitting layout with the smallest p95 TTFT
// over target, then ITL) explains why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cost/inference.h"
#include "plan/serve_sim.h"

namespace pentamesh::plan {

struct ServeTargets {
  double ttft_p95_s = 0;  // 0 = no target
  double itl_s = 0;       // 0 = no target
};

struct ServeSearchResult {
  std::vector<cost::ServeEstimate> top;             // best first, at most `top_k`
  std::optional<cost::ServeEstimate> nearest_miss;  // fits, misses a target (when top is empty)
  int64_t costed = 0, fit = 0, met = 0;             // layouts costed, fitting, meeting targets
};

// The candidate layouts, in a fixed order (tp, ep, pp, replicas ascending).
std::vector<cost::ServeLayout> ServeLayouts(const cost::Context& ctx, const cost::ServeWorkload& w);

ServeSearchResult SearchServe(const cost::Context& ctx, const cost::ServeWorkload& w,
                              const ServeTargets& targets, int top_k);

}  // namespace pentamesh::plan

namespace pentamesh::plan {

// plan::SearchServeCapacity: the cheapest deployment that serves `rate_per_s` Poisson arrivals of
// the workload's input/output lengths under p95 SLOs, on the simulator (plan::SimulateServe with
// the workload's engine profile). Candidates: replicas of tp 1, 2, 4, 8 (within a node) x pp 1, 2,
// 4, 8 (dividing the layers) x ep a power of two dividing the experts (MoE), at most 64 GPUs,
// obeying the serving rules, fewest GPUs first (a replica with more GPUs than the top_k-th
// deployment found is not simulated); weights in each of the query's formats the GPU may deploy
// (ServeWeightsSearchable) and the KV cache in BF16 or FP8; for a MoE model with
// workload.experts_in_hbm > 0, each with all experts resident and with that many per layer in HBM
// (the rest offloaded, workload.expert_hit_rate of the touched ones found resident); for each, the
// fewest replicas whose one replica, at rate / replicas, meets TTFT p95 <= slo_ttft_p95_s and ITL
// p95 (every gap between a request's tokens) <= slo_itl_p95_s (found by doubling then bisection: a
// replica's latencies grow with its rate). Ranked by USD per hour (GPUs x usd_per_gpu_hour), then
// GPUs, then TTFT p95, then the candidate's fields (a total order). Cost per million output tokens
// = USD per hour / (rate x output tokens x 3600) x 1e6; per million tokens in and out alike, over
// input + output.
struct ServeCapacityQuery {
  cost::ServeWorkload workload;  // lengths, engine (policy and profile), price; requests unused
  double rate_per_s = 1;
  double slo_ttft_p95_s = 0, slo_itl_p95_s = 0;  // 0 = no target
  int64_t sim_requests = 400;                    // requests simulated per candidate replica
  uint64_t seed = 1;
  double length_range_ratio = 1;  // ServeTraffic::length_range_ratio
  // Weight formats to consider (cost::ServeWeightsNames); empty = bf16, and fp8 where the GPU has
  // an FP8 peak. Weight-only int8 / int4 change the model's outputs: only when asked.
  std::vector<std::string> weights;
};

struct ServeDeployment {
  cost::ServeLayout layout;  // tp x ep x pp per replica, replicas
  spec::Precision precision = spec::Precision::kBf16;
  int weight_only_bits = 0;    // cost::ServeWorkload::weight_only_bits
  bool fp4 = false;            // cost::ServeWorkload::fp4
  int64_t experts_in_hbm = 0;  // cost::ServeWorkload::experts_in_hbm (0 = all resident)
  bool kv_fp8 = false;
  ServeSimResult replica;  // one replica at rate / replicas
  bool meets = false;
  double usd_per_hour = 0, usd_per_million_output_tokens = 0, usd_per_million_tokens = 0;
};

// `w` as deployment `d` serves it: d's weight format, KV dtype and resident experts (a hit rate of
// 1 when all are resident), the rest (lengths, engine, price) w's.
cost::ServeWorkload DeployedWorkload(const ServeDeployment& d, cost::ServeWorkload w);

// Prefill/decode disaggregation (DistServe, Zhong et al. 2024; NVIDIA Dynamo, SGLang's PD mode):
// a prefill pool and a decode pool, each of its own replica shape and count, the same weights and
// KV dtype. A request's prompt runs in the prefill pool (its first token comes from there; a
// simulation of prompts with one output token), its KV crosses to the decode pool
// (cost::KvTransferSeconds), which decodes the rest (a simulation of prefilled requests,
// ServeTraffic::prefilled). TTFT p95 = the prefill pool's + the transfer; ITL p95 = the decode
// pool's. Each pool is the fewest GPUs meeting its own target, as SearchServeCapacity finds them.
struct ServeDisaggregated {
  ServeDeployment prefill, decode;  // each pool's shape, replicas, simulation and prices
  double kv_transfer_s = 0;
  double ttft_p95_s = 0, itl_p95_s = 0;
  double usd_per_hour = 0, usd_per_million_output_tokens = 0, usd_per_million_tokens = 0;
  int64_t gpus() const { return prefill.layout.gpus() + decode.layout.gpus(); }
};

struct ServeCapacityResult {
  std::vector<ServeDeployment> top;             // meeting the SLOs, cheapest first
  std::optional<ServeDeployment> nearest_miss;  // when none meets: the most replicas tried, best
  int64_t candidates = 0, simulations = 0;      // replica shapes, simulations run
  // The cheapest disaggregated deployment meeting both targets, when one does (it may cost more
  // than top[0]); searched when the requests have two output tokens or more.
  std::optional<ServeDisaggregated> disaggregated;
};

ServeCapacityResult SearchServeCapacity(const cost::Context& ctx, const ServeCapacityQuery& q,
                                        int top_k);

// Whether the capacity search may deploy weights in `format` (a cost::ServeWeightsNames name) on
// GPUs of `c`: FP8 weights only where the GPU has FP8 tensor cores (TensorRT-LLM has no FP8 path
// without them), FP4 where it has FP4 ones; the other formats everywhere.
bool ServeWeightsSearchable(const spec::ClusterSpec& c, const std::string& format);

}  // namespace pentamesh::plan

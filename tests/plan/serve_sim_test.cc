// plan/serve_sim.h and cost::ServeStepTime against closed forms: at concurrency 1 the simulation
// is the single-request formula (cost::EstimateServe's prefill and ITL); a decode batch's step is
// EstimateServe's ITL of that batch; Little's law (requests in the system = throughput x latency,
// a closed loop of N clients keeps N in it); Poisson throughput = the arrival rate; preemption
// exactly when the KV blocks run out in a hand-counted case; determinism; the speed (printed).
// Also prints the published serving rows (bench/data/published_serving.json) before (the
// single-request formulas) and after (the simulation), and holds each within 25% like
// Inference.PublishedServing (here also NIM's TTFT at concurrency 5).
#include "plan/serve_sim.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calib/profile.h"
#include "cost/attention.h"
#include "cost/inference.h"
#include "spec/load_toml.h"

namespace pentamesh::plan {
namespace {

struct Specs {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  cost::CostParams params;
};

// The specs as `pentamesh serve` loads them (--stack megatron, the default).
Specs Load(const std::string& model, const std::string& cluster) {
  Specs s;
  s.model = spec::LoadModel(model).value();
  s.cluster = spec::LoadCluster(cluster, std::nullopt).value();
  const calib::Profile stack = calib::LoadProfile("megatron").value();
  calib::ApplyProfile(stack, s.cluster, s.params);
  return s;
}

cost::Context MakeContext(const Specs& s) {
  return cost::ServeContext(s.model, s.cluster, s.params);
}

cost::ServeWorkload Workload(int64_t input, int64_t output, int64_t requests = 1,
                             spec::Precision precision = spec::Precision::kBf16) {
  cost::ServeWorkload w;
  w.input_tokens = input;
  w.output_tokens = output;
  w.requests = requests;
  w.precision = precision;
  return w;
}

cost::ServeLayout Tp(int64_t tp) { return {.tp = tp, .ep = 1, .pp = 1, .replicas = 1}; }

ServeTraffic Closed(int64_t clients, int64_t requests) {
  return {.concurrency = clients, .requests = requests};
}

ServeSimResult Simulate(const cost::Context& ctx, const cost::ServeLayout& l,
                        const cost::ServeWorkload& w, const ServeTraffic& traffic) {
  const cost::ServeEstimate e = cost::EstimateServe(ctx, l, w);
  EXPECT_TRUE(e.fits);
  return SimulateServe(cost::MakeServeStepCost(ctx, l, w), w, e.kv_blocks, traffic);
}

// One request at a time: TTFT is EstimateServe's prefill, every inter-token gap averages to its
// ITL (the mean decode context is input + output / 2 in both), end-to-end their sum.
TEST(ServeSim, ConcurrencyOneIsTheSingleRequestFormula) {
  const cost::Context ctx = MakeContext(Load("llama3-70b", "h100-sxm"));
  for (const auto& [input, output, tp] :
       std::vector<std::array<int64_t, 3>>{{2000, 200, 2}, {5000, 500, 2}, {1000, 64, 4}}) {
    const cost::ServeWorkload w = Workload(input, output, 1, spec::Precision::kFp8);
    const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(tp), w);
    const ServeSimResult r = Simulate(ctx, Tp(tp), w, Closed(1, 3));
    EXPECT_EQ(r.preemptions, 0);
    EXPECT_EQ(r.steps, 3 * output);  // one prefill and output - 1 decodes each
    EXPECT_NEAR(r.ttft_s.mean / e.prefill_s, 1.0, 1e-9) << input;
    EXPECT_NEAR(r.ttft_s.max / e.prefill_s, 1.0, 1e-9) << input;
    EXPECT_NEAR(r.tpot_s.mean / e.itl_s, 1.0, 1e-9) << input;
    const double e2e = e.prefill_s + static_cast<double>(output - 1) * e.itl_s;
    EXPECT_NEAR(r.e2e_s.mean / e2e, 1.0, 1e-9) << input;
    EXPECT_NEAR(r.requests_per_s * e2e, 1.0, 1e-9);
  }
}

// Prefix caching: a request's cached prefix is not prefilled. One at a time the simulation's TTFT
// is the estimate's prefill of the rest attending to the prefix (with and without a sliding
// window), below the whole prompt's and above the rest's alone (which attends to fewer keys); the
// TP all-reduces are those of the rest; decoding is unchanged.
TEST(ServeSim, PrefixCacheSkipsTheCachedTokens) {
  for (const char* model : {"llama3-70b", "mistral-7b"}) {
    const cost::Context ctx = MakeContext(Load(model, "h100-sxm"));
    const int64_t tp = std::string(model) == "mistral-7b" ? 1 : 4;
    cost::ServeWorkload w = Workload(9000, 50, 1, spec::Precision::kFp8);
    const cost::ServeEstimate whole = cost::EstimateServe(ctx, Tp(tp), w);
    const cost::ServeEstimate rest =
        cost::EstimateServe(ctx, Tp(tp), Workload(2700, 50, 1, spec::Precision::kFp8));
    w.prefix_hit_rate = 0.7;
    EXPECT_EQ(cost::CachedPrefixTokens(w, 9000), 6300);
    const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(tp), w);
    ASSERT_TRUE(e.fits) << model;
    EXPECT_LT(e.prefill_compute_s, whole.prefill_compute_s) << model;
    EXPECT_GT(e.prefill_compute_s, rest.prefill_compute_s) << model;
    EXPECT_DOUBLE_EQ(e.prefill_tp_s, rest.prefill_tp_s) << model;
    EXPECT_DOUBLE_EQ(e.itl_s, whole.itl_s) << model;
    EXPECT_DOUBLE_EQ(e.kv_bytes_per_request_gpu, whole.kv_bytes_per_request_gpu) << model;
    const ServeSimResult r = Simulate(ctx, Tp(tp), w, Closed(1, 2));
    EXPECT_NEAR(r.ttft_s.max / e.prefill_s, 1.0, 1e-9) << model;
  }
  // At most all but the last prompt token is cached; none of a one-token prompt.
  cost::ServeWorkload w;
  w.prefix_hit_rate = 0.9999;
  EXPECT_EQ(cost::CachedPrefixTokens(w, 100), 99);
  EXPECT_EQ(cost::CachedPrefixTokens(w, 1), 0);
}

// A MoE decode step runs only the experts its tokens touch: the simulation's step is the closed
// form's ITL (weights of the touched experts, their KV, overheads, all-reduces) within a few
// percent. Before, every expert ran its fraction of a row and read its whole weights: 30.3 ms
// against 10.9 ms for DeepSeek-V3 on 8 H200 at 4 requests.
TEST(ServeSim, MoeDecodeStepRunsTheTouchedExperts) {
  struct Case {
    const char* model;
    const char* cluster;
    int64_t tp, batch;
  };
  for (const Case& k :
       {Case{"deepseek-v3-like", "h200", 8, 4}, Case{"mixtral-8x7b", "h100-sxm", 2, 1},
        Case{"meridianfin-72b", "h100-sxm", 8, 8}}) {
    const cost::Context ctx = MakeContext(Load(k.model, k.cluster));
    const cost::ServeWorkload w = Workload(1024, 1024, k.batch, spec::Precision::kFp8);
    const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(k.tp), w);
    ASSERT_TRUE(e.fits) << k.model;
    const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(k.tp), w);
    const double context = 1024 + 0.5 * 1024;  // the closed form's mean decode context
    cost::ServeStepBatch b;
    b.tokens = static_cast<double>(k.batch);
    b.sequences = b.tokens;
    b.kv_tokens_global = b.tokens * context;
    b.pairs_global = b.tokens * cost::CausalPairs(context - 1, 1, 0);
    EXPECT_NEAR(cost::ServeStepTime(c, b) / e.itl_s, 1.0, 0.05) << k.model;
  }
}

// The decode pool of a disaggregated deployment: a request arrives with its prompt's KV and first
// token, so one at a time it takes output - 1 decode steps, each the single-request ITL (the same
// contexts as above), its TTFT is 0 and its end-to-end those decodes.
TEST(ServeSim, PrefilledRequestsOnlyDecode) {
  const cost::Context ctx = MakeContext(Load("llama3-70b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(2000, 200, 1, spec::Precision::kFp8);
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(2), w);
  ServeTraffic t = Closed(1, 3);
  t.prefilled = true;
  const ServeSimResult r = Simulate(ctx, Tp(2), w, t);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.steps, 3 * (200 - 1));
  EXPECT_EQ(r.ttft_s.max, 0.0);
  EXPECT_NEAR(r.tpot_s.mean / e.itl_s, 1.0, 1e-9);
  EXPECT_NEAR(r.e2e_s.mean / (199 * e.itl_s), 1.0, 1e-9);
  // Its blocks are the whole prompt's from admission: a cache of fewer blocks than one request's
  // prompt and output serves none.
  const int64_t blocks = (2000 + 200 + w.engine.block_tokens - 1) / w.engine.block_tokens;
  EXPECT_EQ(SimulateServe(cost::MakeServeStepCost(ctx, Tp(2), w), w, blocks - 1, t).steps, 0);
  EXPECT_GT(SimulateServe(cost::MakeServeStepCost(ctx, Tp(2), w), w, blocks, t).steps, 0);
}

// A step of B decodes at context L: EstimateServe's ITL for B concurrent requests of mean
// context L (its weights + KV read; memory-bound at these sizes), so one forward per step.
TEST(ServeSim, DecodeStepIsTheBatchItl) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  for (int64_t batch : {1, 8, 64}) {
    const cost::ServeWorkload w = Workload(1000, 400, batch);
    const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
    const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
    const double context = 1000 + 0.5 * 400;  // EstimateServe's mean decode context
    cost::ServeStepBatch b;
    b.tokens = static_cast<double>(batch);
    b.kv_tokens_global = b.tokens * context;
    b.pairs_global = b.tokens * cost::CausalPairs(context - 1, 1, 0);
    EXPECT_NEAR(cost::ServeStepTime(c, b) / e.itl_s, 1.0, 1e-9) << batch;
  }
}

// CausalPairs is AttentionKeysOf's causal keys times the tokens, with and without a window, and
// adds up over chunks.
TEST(ServeSim, CausalPairsMatchAttentionKeys) {
  spec::ModelSpec m = spec::LoadModel("mistral-7b").value();
  m.sliding_window = 4096;
  for (double s : {100.0, 4096.0, 10000.0}) {
    EXPECT_DOUBLE_EQ(cost::CausalPairs(0, s, 0), s * cost::AttentionKeysOf(m, s, false).causal);
    EXPECT_NEAR(cost::CausalPairs(0, s, 4096) / (s * cost::AttentionKeysOf(m, s, true).causal), 1.0,
                1e-12);
    EXPECT_NEAR(cost::CausalPairs(0, 0.5 * s, 4096) + cost::CausalPairs(0.5 * s, 0.5 * s, 4096),
                cost::CausalPairs(0, s, 4096), 1e-6);
  }
}

// Little's law L = X W: the time-average number of requests in the system (counted from the
// queues) equals throughput x mean latency (from the requests' timestamps). A closed loop keeps
// N clients in the system until the last requests drain; Poisson arrivals below capacity leave
// at the arrival rate.
TEST(ServeSim, LittlesLaw) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(500, 100);
  for (int64_t n : {4, 32}) {
    const ServeSimResult r = Simulate(ctx, Tp(1), w, Closed(n, 3000));
    const double little = r.requests_per_s * r.e2e_s.mean;
    EXPECT_NEAR(little / r.mean_in_system, 1.0, 1e-9) << n;
    const auto clients = static_cast<double>(n);
    EXPECT_LE(r.mean_in_system, clients * (1 + 1e-12));
    // The drain (the last n requests finishing one after another) takes at most the longest
    // request; before it, n are always in the system.
    EXPECT_GE(r.mean_in_system, clients * (1.0 - r.e2e_s.max / r.duration_s)) << n;
  }
  const ServeTraffic poisson{.rate_per_s = 20, .requests = 4000, .seed = 7};
  const ServeSimResult r = Simulate(ctx, Tp(1), w, poisson);
  EXPECT_NEAR(r.requests_per_s / 20, 1.0, 0.05);  // 4000 arrivals: 1.6% standard deviation
  EXPECT_NEAR(r.requests_per_s * r.e2e_s.mean / r.mean_in_system, 1.0, 1e-9);
}

// 2 clients, 32 + 40 tokens, blocks of 16: a request holds ceil(cached / 16) blocks, 5 at its
// longest (72 tokens). Step 1 prefills both (2 blocks each); step k >= 2 decodes both, caching
// token 32 + k - 1. At step 34 both cache token 65 and need a fifth block: with 9 blocks one is
// free, the first request takes it and the second (the last admitted) preempts itself. It
// waits for 5 blocks (65 tokens to recompute: prompt + 33 generated) until the first finishes
// at step 40, prefills them at step 41 (its 34th token) and decodes 6 more: 47 steps. With 10
// blocks nobody is preempted and both finish at step 40.
TEST(ServeSim, PreemptsExactlyWhenBlocksRunOut) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  cost::ServeWorkload w = Workload(32, 40);
  w.engine.block_tokens = 16;
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  const ServeSimResult tight = SimulateServe(c, w, 9, Closed(2, 2));
  EXPECT_EQ(tight.preemptions, 1);
  EXPECT_EQ(tight.steps, 47);
  EXPECT_EQ(tight.max_running, 2);
  const ServeSimResult enough = SimulateServe(c, w, 10, Closed(2, 2));
  EXPECT_EQ(enough.preemptions, 0);
  EXPECT_EQ(enough.steps, 40);
  // One request that cannot fit at all is not simulated.
  EXPECT_EQ(SimulateServe(c, w, 4, Closed(1, 1)).steps, 0);
}

// TensorRT-LLM's defaults (cost::ServeEngineProfile): without chunked prefill a prompt joins a
// step whole or waits. 3 clients, 3000-token prompts, one output token (a request completes at its
// first), budget 4096: each step takes one prompt (a second does not fit in the 1096 left), so
// the k-th request's first token comes after k lone prefill steps, each EstimateServe's prefill:
// TTFT mean 2 T, max 3 T. With chunking the second prompt's first 1096 tokens share step 1.
TEST(ServeSim, WithoutChunkingPromptsGoWhole) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  cost::ServeWorkload w = Workload(3000, 1);
  w.engine.max_batched_tokens = 4096;
  w.engine.profile.chunked_prefill = false;
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  const ServeSimResult whole = SimulateServe(c, w, e.kv_blocks, Closed(3, 3));
  EXPECT_EQ(whole.steps, 3);
  EXPECT_NEAR(whole.ttft_s.mean / (2 * e.prefill_s), 1.0, 1e-9);
  EXPECT_NEAR(whole.ttft_s.max / (3 * e.prefill_s), 1.0, 1e-9);
  w.engine.profile.chunked_prefill = true;
  const ServeSimResult chunked = SimulateServe(c, w, e.kv_blocks, Closed(3, 3));
  EXPECT_EQ(chunked.steps, 3);  // 4096, 4096, 808 tokens
  EXPECT_GT(std::abs(chunked.ttft_s.mean / whole.ttft_s.mean - 1), 0.01);
  // A prompt longer than the budget is not refused: the engine's budget is at least a prompt
  // and a decode of every other request (TensorRT-LLM needs max_num_tokens >= the prompt).
  w.engine.profile.chunked_prefill = false;
  w.engine.max_batched_tokens = 1024;
  const ServeSimResult longer = SimulateServe(c, w, e.kv_blocks, Closed(1, 2));
  EXPECT_EQ(longer.steps, 2);
  EXPECT_NEAR(longer.ttft_s.max / e.prefill_s, 1.0, 1e-9);
}

// Reserving the whole length (TensorRT-LLM's GUARANTEED_NO_EVICT): the case of
// PreemptsExactlyWhenBlocksRunOut (2 clients, 32 + 40 tokens, 5 blocks of 16 each at the end).
// With 9 blocks the second request is not admitted until the first frees its 5 (step 40): it
// runs steps 41-80, nothing is preempted. With 10 blocks both run at once: 40 steps.
TEST(ServeSim, ReservingTheWholeLengthNeverPreempts) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  cost::ServeWorkload w = Workload(32, 40);
  w.engine.block_tokens = 16;
  w.engine.profile.reserve_full_length = true;
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  const ServeSimResult tight = SimulateServe(c, w, 9, Closed(2, 2));
  EXPECT_EQ(tight.preemptions, 0);
  EXPECT_EQ(tight.steps, 80);
  EXPECT_EQ(tight.max_running, 1);
  const ServeSimResult enough = SimulateServe(c, w, 10, Closed(2, 2));
  EXPECT_EQ(enough.preemptions, 0);
  EXPECT_EQ(enough.steps, 40);
  EXPECT_EQ(enough.max_running, 2);
}

// A closed loop's turnaround (kClientTurnaroundS): 2 clients of 1 output token each, 4 requests.
// Without it the next requests join the step right after; with it they miss that step's batch,
// which the engine forms the moment the step before ends, so the engine idles the turnaround and
// the loop takes 2 steps + 1 turnaround.
TEST(ServeSim, ClosedLoopTurnaround) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(500, 1);
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  ServeTraffic t = Closed(2, 4);
  const ServeSimResult now = SimulateServe(c, w, e.kv_blocks, t);
  t.think_s = kClientTurnaroundS;
  const ServeSimResult later = SimulateServe(c, w, e.kv_blocks, t);
  EXPECT_EQ(now.steps, 2);
  EXPECT_EQ(later.steps, 2);
  EXPECT_NEAR(later.duration_s - now.duration_s, kClientTurnaroundS, 1e-12);
  EXPECT_NEAR(later.ttft_s.max, now.ttft_s.max, 1e-12);  // measured from each arrival
}

// Drawn lengths (ServeTraffic::length_range_ratio, bench_serving's --random-range-ratio): each
// request's input and output uniform on [floor(r L), L]. One client at a time: the mean output
// length (output tokens / requests) is the range's mean, (floor(r L) + L) / 2, within sampling
// error; r = 1 is the fixed workload exactly; the same seed gives the same run.
TEST(ServeSim, DrawnLengthsAreUniformBelowTheWorkloads) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(1000, 200);
  ServeTraffic t = Closed(1, 400);
  t.length_range_ratio = 0.5;
  const ServeSimResult r = Simulate(ctx, Tp(1), w, t);
  const double mean_output = r.output_tokens_per_s / r.requests_per_s;
  EXPECT_NEAR(mean_output, 150.0, 150.0 * 0.03);  // sd of the mean: 29 / sqrt(400) = 1.5
  // Each request alone: its TTFT is its prompt's prefill, between the shortest's and the full's.
  const cost::ServeEstimate full = cost::EstimateServe(ctx, Tp(1), w);
  const cost::ServeEstimate shortest = cost::EstimateServe(ctx, Tp(1), Workload(500, 200));
  EXPECT_GE(r.ttft_s.max, 0.0);
  EXPECT_LE(r.ttft_s.max, full.prefill_s * (1 + 1e-9));
  EXPECT_GE(r.ttft_s.max, shortest.prefill_s);
  EXPECT_LT(r.ttft_s.mean, full.prefill_s);
  EXPECT_GT(r.ttft_s.mean, shortest.prefill_s);
  const ServeSimResult again = Simulate(ctx, Tp(1), w, t);
  EXPECT_EQ(again.steps, r.steps);
  EXPECT_EQ(again.ttft_s.p50, r.ttft_s.p50);
  t.length_range_ratio = 1;
  const ServeSimResult fixed = Simulate(ctx, Tp(1), w, t);
  EXPECT_NEAR(fixed.output_tokens_per_s / fixed.requests_per_s, 200.0, 1e-9);
  EXPECT_NEAR(fixed.ttft_s.max / full.prefill_s, 1.0, 1e-9);
}

// Clients of fixed lengths that start together stay in step: every round their prompts share
// steps, and each waits for the others'. Drawn output lengths spread their finishes, so a prompt
// mostly arrives alone and is prefilled in the next step: the median TTFT of 16 clients falls
// toward the lone request's (InferenceX's closed loops: flat TTFT in concurrency).
TEST(ServeSim, DrawnLengthsDesynchronizeTheClients) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(4000, 400);
  const cost::ServeEstimate alone = cost::EstimateServe(ctx, Tp(1), w);
  ServeTraffic t = Closed(16, 160);
  t.think_s = kClientTurnaroundS;
  const ServeSimResult lockstep = Simulate(ctx, Tp(1), w, t);
  t.length_range_ratio = 0.8;
  const ServeSimResult spread = Simulate(ctx, Tp(1), w, t);
  EXPECT_GT(lockstep.ttft_s.p50, 3 * alone.prefill_s);
  EXPECT_LT(spread.ttft_s.p50, 1.5 * alone.prefill_s);
}

// The engine's front end (ServeEngineProfile::frontend_s): requests pass it one after another.
// One client, one output token: every request is the front end's f, then its prefill step.
TEST(ServeSim, FrontEndAddsItsTimeToALoneRequest) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  cost::ServeWorkload w = Workload(500, 1);
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  const double f = 2e-3;
  w.engine.profile.frontend_s = f;
  const ServeSimResult r = SimulateServe(c, w, e.kv_blocks, Closed(1, 3));
  EXPECT_EQ(r.steps, 3);
  EXPECT_NEAR(r.ttft_s.mean / (f + e.prefill_s), 1.0, 1e-9);
  EXPECT_NEAR(r.ttft_s.max / (f + e.prefill_s), 1.0, 1e-9);
  EXPECT_NEAR(r.duration_s / (3 * (f + e.prefill_s)), 1.0, 1e-9);
}

// Three clients send at once. Without a front end their prompts run as one step of three (TTFT
// P3 each). With one of f (3f shorter than a lone prefill P1) the first reaches the idle engine
// at f and runs alone; the other two reach it at 2f and 3f, during that step, and run together
// next: TTFTs f + P1, f + P1 + P2, f + P1 + P2 (from sending at 0), in 2 steps.
TEST(ServeSim, FrontEndSplitsASimultaneousGroup) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  constexpr int64_t kInput = 500;
  cost::ServeWorkload w = Workload(kInput, 1);
  w.engine.profile.chunked_prefill = false;
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  auto prompts = [&](int n) {  // a step of n whole prompts
    cost::ServeStepBatch b;
    b.tokens = static_cast<double>(n * kInput);
    b.sequences = n;
    b.pairs_global = n * cost::CausalPairs(0, kInput, 0);
    b.kv_tokens_global = b.tokens;
    return cost::ServeStepTime(c, b);
  };
  const double p1 = prompts(1), p2 = prompts(2), p3 = prompts(3);
  const ServeSimResult together = SimulateServe(c, w, e.kv_blocks, Closed(3, 3));
  EXPECT_EQ(together.steps, 1);
  EXPECT_NEAR(together.ttft_s.mean / p3, 1.0, 1e-9);
  const double f = 1e-3;
  ASSERT_LT(3 * f, f + p1);
  w.engine.profile.frontend_s = f;
  const ServeSimResult split = SimulateServe(c, w, e.kv_blocks, Closed(3, 3));
  EXPECT_EQ(split.steps, 2);
  EXPECT_NEAR(split.ttft_s.mean / (f + p1 + 2 * p2 / 3), 1.0, 1e-9);
  EXPECT_NEAR(split.ttft_s.max / (f + p1 + p2), 1.0, 1e-9);
  EXPECT_EQ(split.max_running, 2);
}

// Chunked prefill: a prompt longer than the token budget takes ceil(input / budget) steps.
TEST(ServeSim, ChunkedPrefillSteps) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  cost::ServeWorkload w = Workload(10000, 10);
  w.engine.max_batched_tokens = 4096;
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
  const ServeSimResult r =
      SimulateServe(cost::MakeServeStepCost(ctx, Tp(1), w), w, e.kv_blocks, Closed(1, 1));
  EXPECT_EQ(r.steps, 3 + 9);
  EXPECT_GT(r.ttft_s.mean, e.prefill_s);  // three weight reads and overheads instead of one
}

TEST(ServeSim, Deterministic) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(800, 200);
  ServeTraffic t{.rate_per_s = 30, .requests = 500, .seed = 3};
  const ServeSimResult a = Simulate(ctx, Tp(1), w, t);
  const ServeSimResult b = Simulate(ctx, Tp(1), w, t);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.ttft_s.p99, b.ttft_s.p99);
  EXPECT_EQ(a.itl_s.p95, b.itl_s.p95);
  t.seed = 4;
  EXPECT_NE(Simulate(ctx, Tp(1), w, t).ttft_s.p99, a.ttft_s.p99);
}

// Speed: simulations per second of a loaded case (printed; the capacity search needs
// thousands of layouts x rates in seconds).
TEST(ServeSim, Benchmark) {
  const cost::Context ctx = MakeContext(Load("llama3-70b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(1000, 200, 1, spec::Precision::kFp8);
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(4), w);
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(4), w);
  const auto start = std::chrono::steady_clock::now();
  int64_t sims = 0, steps = 0;
  for (double rate : {2.0, 5.0, 10.0, 20.0}) {
    for (int64_t i = 0; i < 5; ++i) {
      const ServeTraffic t{.rate_per_s = rate, .requests = 500, .seed = static_cast<uint64_t>(i)};
      steps += SimulateServe(c, w, e.kv_blocks, t).steps;
      ++sims;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "serve_sim benchmark: %lld simulations of 500 requests (%lld steps) in %.3f s: "
      "%.0f simulations/s, %.2f M steps/s\n",
      static_cast<long long>(sims), static_cast<long long>(steps), s, static_cast<double>(sims) / s,
      static_cast<double>(steps) / s / 1e6);
  EXPECT_GT(steps, 0);
  // What a search pays per layout before simulating: the estimate (KV blocks) and the step cost.
  const auto setup = std::chrono::steady_clock::now();
  const int layouts = 200;
  double blocks = 0;
  for (int i = 0; i < layouts; ++i) {
    blocks += static_cast<double>(cost::EstimateServe(ctx, Tp(4), w).kv_blocks);
    blocks += cost::MakeServeStepCost(ctx, Tp(4), w).linear_s.size();
  }
  const double per =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - setup).count() / layouts;
  std::printf("serve_sim benchmark: estimate + step cost of a layout %.0f us\n", per * 1e6);
  EXPECT_GT(blocks, 0);
}

// --- Traces (ServeTraffic::trace): requests with their own arrival and lengths ---

ServeTraffic Trace(std::vector<TraceRequest> requests) {
  ServeTraffic t;
  t.trace = std::move(requests);
  return t;
}

// n requests at t = 0 of the workload's lengths.
std::vector<TraceRequest> Burst(int64_t n, const cost::ServeWorkload& w) {
  return std::vector<TraceRequest>(
      static_cast<size_t>(n),
      {.arrival_s = 0, .input_tokens = w.input_tokens, .output_tokens = w.output_tokens});
}

void ExpectSame(const ServeSimResult& a, const ServeSimResult& b) {
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.max_running, b.max_running);
  EXPECT_EQ(a.duration_s, b.duration_s);
  EXPECT_EQ(a.ttft_s.mean, b.ttft_s.mean);
  EXPECT_EQ(a.ttft_s.max, b.ttft_s.max);
  EXPECT_EQ(a.itl_s.p95, b.itl_s.p95);
  EXPECT_EQ(a.tpot_s.mean, b.tpot_s.mean);
  EXPECT_EQ(a.e2e_s.p99, b.e2e_s.p99);
  EXPECT_EQ(a.output_tokens_per_s, b.output_tokens_per_s);
  EXPECT_EQ(a.mean_in_system, b.mean_in_system);
}

// A closed loop of N clients serving N requests issues all of them at t = 0 and none after: the
// same schedule as a trace of N equal requests at t = 0. Here on the hand-counted cases above
// (the preemption at 9 blocks, the reserving policy, prompts without chunking) and a loaded one.
TEST(ServeSimTrace, BurstAtZeroIsTheClosedLoopOfAsManyClients) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  cost::ServeWorkload w = Workload(32, 40);
  w.engine.block_tokens = 16;
  cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  const ServeSimResult preempted = SimulateServe(c, w, 9, Trace(Burst(2, w)));
  EXPECT_EQ(preempted.preemptions, 1);
  EXPECT_EQ(preempted.steps, 47);
  ExpectSame(preempted, SimulateServe(c, w, 9, Closed(2, 2)));
  w.engine.profile.reserve_full_length = true;
  ExpectSame(SimulateServe(c, w, 9, Trace(Burst(2, w))), SimulateServe(c, w, 9, Closed(2, 2)));

  cost::ServeWorkload whole = Workload(3000, 1);
  whole.engine.max_batched_tokens = 4096;
  whole.engine.profile.chunked_prefill = false;
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), whole);
  c = cost::MakeServeStepCost(ctx, Tp(1), whole);
  ExpectSame(SimulateServe(c, whole, e.kv_blocks, Trace(Burst(3, whole))),
             SimulateServe(c, whole, e.kv_blocks, Closed(3, 3)));

  const cost::ServeWorkload loaded = Workload(1000, 200);
  const cost::ServeEstimate el = cost::EstimateServe(ctx, Tp(1), loaded);
  c = cost::MakeServeStepCost(ctx, Tp(1), loaded);
  ExpectSame(SimulateServe(c, loaded, el.kv_blocks, Trace(Burst(64, loaded))),
             SimulateServe(c, loaded, el.kv_blocks, Closed(64, 64)));
}

// One request arriving at t = 5 s: the single-request formula (EstimateServe's prefill as TTFT,
// its ITL as TPOT), measured from its arrival; the engine idles until then.
TEST(ServeSimTrace, OneRequestIsTheSingleRequestFormula) {
  const cost::Context ctx = MakeContext(Load("llama3-70b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(2000, 200, 1, spec::Precision::kFp8);
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(2), w);
  const ServeSimResult r = Simulate(
      ctx, Tp(2), w, Trace({{.arrival_s = 5, .input_tokens = 2000, .output_tokens = 200}}));
  EXPECT_EQ(r.steps, 200);
  EXPECT_NEAR(r.ttft_s.max / e.prefill_s, 1.0, 1e-9);
  EXPECT_NEAR(r.tpot_s.mean / e.itl_s, 1.0, 1e-9);
  const double e2e = e.prefill_s + 199 * e.itl_s;
  EXPECT_NEAR(r.e2e_s.max / e2e, 1.0, 1e-9);
  EXPECT_NEAR(r.duration_s / e2e, 1.0, 1e-9);  // from the first arrival
  EXPECT_NEAR(r.output_tokens_per_s * e2e, 200, 1e-6);
}

// Three requests of different lengths, by hand with cost::ServeStepTime: A (100 in, 3 out) and
// B (50 in, 2 out) at t = 0, C (20 in, 1 out) at t = 1 s, long after both finished.
// Step 1 prefills A and B together; step 2 decodes both (B's second token: B done); step 3
// decodes A (done). Step 4, at t = 1 s, prefills C (its only token).
TEST(ServeSimTrace, MixedLengthsByHand) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(100, 3);  // the longest request (the step cost's grid)
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  ASSERT_EQ(c.window, 0);
  auto step = [&c](std::vector<std::array<double, 2>> chunks) {  // {prior, tokens}
    cost::ServeStepBatch b;
    for (const auto& [prior, n] : chunks) {
      b.tokens += n;
      b.sequences += 1;
      b.pairs_global += cost::CausalPairs(prior, n, 0);
      b.kv_tokens_global += prior + n;
    }
    return cost::ServeStepTime(c, b);
  };
  const double t1 = step({{0, 100}, {0, 50}});
  const double t2 = t1 + step({{100, 1}, {50, 1}});
  const double t3 = t2 + step({{101, 1}});
  const double t4 = step({{0, 20}});
  const ServeSimResult r =
      SimulateServe(c, w, e.kv_blocks,
                    Trace({{.arrival_s = 0, .input_tokens = 100, .output_tokens = 3},
                           {.arrival_s = 0, .input_tokens = 50, .output_tokens = 2},
                           {.arrival_s = 1, .input_tokens = 20, .output_tokens = 1}}));
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.max_running, 2);
  EXPECT_DOUBLE_EQ(r.ttft_s.mean, (t1 + t1 + t4) / 3);
  EXPECT_DOUBLE_EQ(r.ttft_s.max, t1);
  EXPECT_DOUBLE_EQ(r.e2e_s.max, t3);
  EXPECT_DOUBLE_EQ(r.e2e_s.mean, (t3 + t2 + t4) / 3);
  EXPECT_DOUBLE_EQ(r.itl_s.mean, ((t2 - t1) + (t3 - t2) + (t2 - t1)) / 3);
  EXPECT_DOUBLE_EQ(r.itl_s.max, std::max(t2 - t1, t3 - t2));
  EXPECT_DOUBLE_EQ(r.tpot_s.mean, ((t3 - t1) / 2 + (t2 - t1) + 0) / 3);
  EXPECT_DOUBLE_EQ(r.duration_s, 1 + t4);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 6 / (1 + t4));
}

// KV blocks and chunked prefill follow each request's own length. Blocks of 16: A (32 in, 40
// out) caches 71 tokens at its end, 5 blocks; B (32 in, 8 out) 39, 3 blocks, done at step 8 when
// A holds 3: 7 blocks never run out (2 requests of 32 + 40 preempt at 9, above). Budget 4096:
// a 10000-token prompt beside a 100-token one takes 4096, 4096, then 1808 with the short one's
// prefill in the same step, whose first tokens both come at step 3, the seconds at step 4.
TEST(ServeSimTrace, KvAndChunksFollowEachRequest) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  cost::ServeWorkload w = Workload(32, 40);
  w.engine.block_tokens = 16;
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  const ServeSimResult r =
      SimulateServe(c, w, 7,
                    Trace({{.arrival_s = 0, .input_tokens = 32, .output_tokens = 40},
                           {.arrival_s = 0, .input_tokens = 32, .output_tokens = 8}}));
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.steps, 40);
  EXPECT_EQ(SimulateServe(c, w, 7, Closed(2, 2)).preemptions, 1);
  // The longest request must fit: 4 blocks hold 64 tokens, not A's 71.
  EXPECT_EQ(SimulateServe(c, w, 4,
                          Trace({{.arrival_s = 0, .input_tokens = 32, .output_tokens = 8},
                                 {.arrival_s = 0, .input_tokens = 32, .output_tokens = 40}}))
                .steps,
            0);

  cost::ServeWorkload big = Workload(10000, 2);
  big.engine.max_batched_tokens = 4096;
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), big);
  const ServeSimResult chunks =
      SimulateServe(cost::MakeServeStepCost(ctx, Tp(1), big), big, e.kv_blocks,
                    Trace({{.arrival_s = 0, .input_tokens = 10000, .output_tokens = 2},
                           {.arrival_s = 0, .input_tokens = 100, .output_tokens = 2}}));
  EXPECT_EQ(chunks.steps, 4);
  EXPECT_EQ(chunks.ttft_s.max, chunks.ttft_s.p50);  // both first tokens at step 3
  EXPECT_EQ(chunks.max_running, 2);
}

// The published rows: concurrency c as a closed loop of c clients (NIM's AIPerf), vLLM's fixed
// batch as c requests arriving together (the batch's latency = the simulation's duration).
// A trace dealt over two engines (plan::SimulateServeTrace): requests 0, 2, 4, ... to one and
// 1, 3, 5, ... to the other, each simulated alone (the reference: SimulateServe of each half);
// the result is over every request: TTFT / TPOT / e2e means weighted by the halves' counts and
// maxima the larger, percentiles between the halves', steps summed, throughput over the first
// arrival to the last token. Dealt over more engines than requests, each request is alone.
TEST(ServeSimTrace, DealtOverEnginesRoundRobin) {
  const cost::Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const cost::ServeWorkload w = Workload(3000, 300);
  const cost::ServeEstimate e = cost::EstimateServe(ctx, Tp(1), w);
  ASSERT_TRUE(e.fits);
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, Tp(1), w);
  std::vector<TraceRequest> all, half[2];
  for (int i = 0; i < 41; ++i) {
    const TraceRequest r{.arrival_s = 0.05 * i,
                         .input_tokens = 200 + 61 * (i % 7) * 7,
                         .output_tokens = 20 + 13 * (i % 5) * 4};
    all.push_back(r);
    half[i % 2].push_back(r);
  }
  const ServeSimResult dealt = SimulateServeTrace(c, w, e.kv_blocks, Trace(all), 2);
  const ServeSimResult a = SimulateServe(c, w, e.kv_blocks, Trace(half[0]));
  const ServeSimResult b = SimulateServe(c, w, e.kv_blocks, Trace(half[1]));
  const double na = 21, nb = 20;
  auto mean = [&](double x, double y) { return (na * x + nb * y) / (na + nb); };
  EXPECT_NEAR(dealt.ttft_s.mean, mean(a.ttft_s.mean, b.ttft_s.mean), 1e-12);
  EXPECT_NEAR(dealt.tpot_s.mean, mean(a.tpot_s.mean, b.tpot_s.mean), 1e-12);
  EXPECT_NEAR(dealt.e2e_s.mean, mean(a.e2e_s.mean, b.e2e_s.mean), 1e-12);
  EXPECT_DOUBLE_EQ(dealt.ttft_s.max, std::max(a.ttft_s.max, b.ttft_s.max));
  EXPECT_DOUBLE_EQ(dealt.e2e_s.max, std::max(a.e2e_s.max, b.e2e_s.max));
  EXPECT_GE(dealt.ttft_s.p95, std::min(a.ttft_s.p95, b.ttft_s.p95));
  EXPECT_LE(dealt.ttft_s.p95, std::max(a.ttft_s.p95, b.ttft_s.p95));
  EXPECT_EQ(dealt.steps, a.steps + b.steps);
  EXPECT_EQ(dealt.max_running, std::max(a.max_running, b.max_running));
  // Both halves start at t = 0 and 0.05 s; the last token is the later half's.
  const double end = std::max(a.duration_s, 0.05 + b.duration_s);
  EXPECT_NEAR(dealt.duration_s, end, 1e-12);
  EXPECT_NEAR(dealt.requests_per_s, 41 / end, 1e-9);
  // The same load on one engine waits longer.
  const ServeSimResult one = SimulateServe(c, w, e.kv_blocks, Trace(all));
  EXPECT_GT(one.ttft_s.mean, dealt.ttft_s.mean);
  // As many engines as requests, or more: each request alone, as it is simulated alone.
  const ServeSimResult alone = SimulateServeTrace(c, w, e.kv_blocks, Trace({all[0], all[1]}), 5);
  const ServeSimResult first = SimulateServe(c, w, e.kv_blocks, Trace({all[0]}));
  const ServeSimResult second = SimulateServe(c, w, e.kv_blocks, Trace({all[1]}));
  EXPECT_EQ(alone.steps, all[0].output_tokens + all[1].output_tokens);
  EXPECT_DOUBLE_EQ(alone.ttft_s.max, std::max(first.ttft_s.max, second.ttft_s.max));
  EXPECT_DOUBLE_EQ(alone.ttft_s.mean, 0.5 * (first.ttft_s.mean + second.ttft_s.mean));
}

TEST(ServeSim, PublishedServingUnderLoad) {
  std::ifstream in(std::string(PM_SOURCE_DIR) + "/bench/data/published_serving.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json data = nlohmann::json::parse(in);
  for (const auto& row : data["rows"]) {
    const cost::Context ctx = MakeContext(Load(row["model"], row["cluster"]));
    const auto c = row["requests"].get<int64_t>();
    const cost::ServeWorkload w =
        Workload(row["input_tokens"], row["output_tokens"], c,
                 row["precision"] == "fp8" ? spec::Precision::kFp8 : spec::Precision::kBf16);
    const cost::ServeLayout l = Tp(row["tp"].get<int64_t>());
    const cost::ServeEstimate e = cost::EstimateServe(ctx, l, w);
    const bool batch = row.contains("batch_ms");
    const ServeSimResult r = Simulate(ctx, l, w, Closed(c, batch ? c : 20 * c));
    for (const char* key : {"ttft_ms", "itl_ms", "batch_ms"}) {
      if (!row.contains(key)) continue;
      const double measured = row[key];
      const std::string k = key;
      const double before = k == "ttft_ms"  ? e.ttft_mean_s * 1e3
                            : k == "itl_ms" ? e.itl_s * 1e3
                                            : e.request_s * 1e3;
      const double after = k == "ttft_ms"  ? r.ttft_s.mean * 1e3
                           : k == "itl_ms" ? r.tpot_s.mean * 1e3
                                           : r.duration_s * 1e3;
      std::printf("%-48s %-8s measured %9.2f  before %9.2f (%+6.1f%%)  after %9.2f (%+6.1f%%)\n",
                  row["name"].get<std::string>().c_str(), key, measured, before,
                  100 * (before / measured - 1), after, 100 * (after / measured - 1));
      // Every published quantity, also NIM's TTFT at concurrency 5 that the burst queue of
      // EstimateServe cannot compare (its clients stagger their arrivals).
      EXPECT_NEAR(after / measured, 1.0, 0.25) << row["name"] << " " << key;
    }
  }
}

}  // namespace
}  // namespace pentamesh::plan

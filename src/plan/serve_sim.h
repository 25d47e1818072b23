// plan::SimulateServe: a discrete-event simulation of one continuous-batching engine (one ep
// group of one replica: vLLM V1's scheduler, SGLang's and TensorRT-LLM's in-flight batching)
// serving requests of a fixed input and output length, each step costed by cost::ServeStepTime.
//
// Arrivals: Poisson at rate_per_s (open loop), or a closed loop of `concurrency` clients, each
// sending its next request think_s after its last one finishes (all start at t = 0), every
// request of the workload's input and output length or of lengths drawn below them
// (length_range_ratio); or a trace (ServeTraffic::trace,
// plan/serve_trace.h), each request with its own arrival time and lengths. Scheduler,
// each step: the running requests in admission order get their next token (a decode) or their
// next prefill chunk, under a budget of max_batched_tokens tokens (chunked prefill); then waiting
// requests are admitted first come first served while the budget, max_seqs and the free KV blocks
// allow. Paged KV: a request holds ceil(cached tokens / block_tokens) blocks; when a running
// request needs a block and none is free, the most recently admitted running request is
// preempted (vLLM's recompute preemption): its blocks are freed and it goes back to the front of
// the queue, to prefill its prompt and the tokens generated so far again.
// The engine profile's front end (frontend_s) takes each request, one after another, before it
// reaches the scheduler; its TTFT and end-to-end count from sending.
// The engine profile's policy (cost::ServeEngineProfile) changes two rules: without
// chunked_prefill a request's remaining prompt joins a step whole or not at all, and the first
// that does not fit in what is left of the budget ends the step's list (TensorRT-LLM; a prompt
// longer than the whole budget runs alone); with reserve_full_length a request is admitted only
// when the blocks of input + output tokens are free, and holds them to the end (no preemption).
//
// A token is emitted when a request has computed the KV of every token it knows (prompt plus
// generated): the step that ends its prefill emits its first token, each decode the next one.
// Deterministic: the same inputs and seed give the same result.
#pragma once

#include <cstdint>
#include <vector>

#include "cost/inference.h"

namespace pentamesh::plan {

// A benchmark client's turnaround (GenAI-Perf/AIPerf, vLLM's benchmark_serving): its next request
// arrives after its last token's trip to it, the new request's trip back and its tokenization.
// Not zero: the engine forms its next batch the moment a step ends, before a request sent in
// reply to that step's token can be there, so the request joins the batch after. Any value
// between 0 and one decode step gives the same schedule.
inline constexpr double kClientTurnaroundS = 1e-3;

// One request of a trace: its arrival (seconds from the trace's start) and its lengths.
struct TraceRequest {
  double arrival_s = 0;
  int64_t input_tokens = 0, output_tokens = 0;
};

struct ServeTraffic {
  double rate_per_s = 0;    // Poisson arrivals per second (open loop); 0 = closed loop
  int64_t concurrency = 0;  // closed loop: clients, each with one request in flight
  double think_s = 0;       // closed loop: a client's last token to its next request's arrival
                            // (kClientTurnaroundS for a benchmark's clients)
  int64_t requests = 1000;  // requests simulated (all complete)
  uint64_t seed = 1;
  // Without a trace: each request's input and output lengths drawn uniformly from
  // [floor(r x the workload's), the workload's] (at least 1 token; 2 outputs when prefilled), r =
  // length_range_ratio: the --random-range-ratio of SGLang's bench_serving and of the
  // benchmark_serving.py that InferenceX runs. 1 = every request of the workload's lengths.
  double length_range_ratio = 1;
  double slo_ttft_s = 0, slo_itl_s = 0;  // goodput: both met (0 = no target)
  // A trace (sorted by arrival): when not empty, these requests with their own lengths, instead
  // of rate_per_s / concurrency / requests and the workload's input and output tokens.
  std::vector<TraceRequest> trace = {};
  // The decode pool of prefill/decode disaggregation: each request arrives with its prompt's KV
  // (computed by a prefill pool and sent over) and its first token, holds the prompt's blocks from
  // admission and only decodes; its TTFT is 0 here (the prefill pool's) and its first gap runs
  // from its arrival. REQUIRES: output tokens >= 2.
  bool prefilled = false;
};

struct Percentiles {
  double mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;  // nearest rank
};

struct ServeSimResult {
  Percentiles ttft_s;     // arrival to first token
  Percentiles itl_s;      // every gap between consecutive tokens of a request
  Percentiles tpot_s;     // per request: (end-to-end - TTFT) / (output tokens - 1)
  Percentiles e2e_s;      // arrival to last token
  double duration_s = 0;  // first arrival to last token
  double requests_per_s = 0, output_tokens_per_s = 0;
  double goodput_requests_per_s = 0;  // requests meeting both SLOs per second
  double mean_in_system = 0;          // time average of requests arrived and not finished
  double mean_batch_tokens = 0;       // tokens per step
  int64_t steps = 0, preemptions = 0;
  int64_t kv_blocks = 0;    // the paged KV cache
  int64_t max_running = 0;  // most requests in one step
};

// Simulates `traffic` on one ep group. w: input/output tokens (of every request without a
// trace) and the engine policy; kv_blocks: the blocks the KV cache holds
// (cost::ServeEstimate::kv_blocks).
// REQUIRES: a trace, or traffic.rate_per_s > 0 or traffic.concurrency >= 1 with
// traffic.requests >= 1; the longest request (input + output tokens) fits in kv_blocks (else
// the result has steps = 0).
ServeSimResult SimulateServe(const cost::ServeStepCost& cost, const cost::ServeWorkload& w,
                             int64_t kv_blocks, const ServeTraffic& traffic);

// A trace over `engines` engines alike (replicas x ep groups): its requests dealt round robin in
// arrival order (request i to engine i mod engines, what a round-robin router in front of the
// replicas does), each engine simulated with its share; one result over all the requests
// (percentiles of every request's latencies, throughputs of all engines over the first arrival
// to the last token). REQUIRES: traffic.trace not empty, engines >= 1.
ServeSimResult SimulateServeTrace(const cost::ServeStepCost& cost, const cost::ServeWorkload& w,
                                  int64_t kv_blocks, const ServeTraffic& traffic, int64_t engines);

// A serving layout under `traffic` over all of it: the replicas x ep groups each run their own
// engine (DP attention, cost/inference.h) and get an even share of the arrival rate, the
// clients and the requests (rounded up); the group's KV blocks from cost::EstimateServe.
struct ServeLoad {
  int64_t groups = 1;         // engines: replicas x ep
  ServeSimResult group;       // one engine's simulation (latencies hold for every request)
  double requests_per_s = 0;  // all engines
  double output_tokens_per_s = 0, output_tokens_per_s_gpu = 0;
  double goodput_requests_per_s = 0;
};
// With a trace: SimulateServeTrace over the groups (`group`'s latencies are over all requests,
// its throughputs and requests in the system the mean engine's, its steps and preemptions all
// engines'). REQUIRES: the layout fits (EstimateServe(...).fits).
ServeLoad SimulateLayout(const cost::Context& ctx, const cost::ServeLayout& layout,
                         const cost::ServeWorkload& w, const ServeTraffic& traffic);

}  // namespace pentamesh::plan

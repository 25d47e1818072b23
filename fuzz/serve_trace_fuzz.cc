// libFuzzer target for `serve --request-trace`'s reader (plan/serve_trace.h ParseServeTrace) and
// the simulation of what it accepts (plan::SimulateServe). Arbitrary bytes as a trace file for
// llama3-8b (context 131072) on one H100: reading must return the requests or a Status naming
// the file, never crash or throw; accepted requests are sorted, finite, within the context and
// at most kMaxTraceRequests. A small accepted trace (at most 64 requests, 4096 output tokens in
// all) is then simulated as `serve --tp 1` does (the estimate of its longest prompt and request),
// and again with only the longest request's KV blocks (preemption on every overlap), with or
// without chunked prefill and reserving by the input's size: every request completes, with finite
// latencies, TTFT <= end-to-end, and the output tokens/s times the duration = the trace's output.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cost/inference.h"
#include "plan/serve_sim.h"
#include "plan/serve_trace.h"
#include "spec/load_toml.h"

namespace {

using namespace pentamesh;

struct Specs {
  spec::ModelSpec model = spec::LoadModel("llama3-8b").value();
  spec::ClusterSpec cluster = spec::LoadCluster("h100-sxm", std::nullopt).value();
  cost::CostParams params;
};

const Specs& Get() {
  static const Specs specs;
  return specs;
}

bool Finite(double v) { return std::isfinite(v) && v >= 0; }

void Check(const plan::ServeSimResult& r, int64_t requests, double outputs) {
  if (r.steps <= 0) __builtin_trap();
  if (!Finite(r.ttft_s.max) || !Finite(r.e2e_s.max) || !Finite(r.itl_s.max)) __builtin_trap();
  if (r.ttft_s.max > r.e2e_s.max || r.ttft_s.mean > r.e2e_s.mean * (1 + 1e-12)) __builtin_trap();
  if (!(r.duration_s > 0) || !std::isfinite(r.duration_s)) __builtin_trap();
  if (std::abs(r.output_tokens_per_s * r.duration_s - outputs) > 1e-6 * outputs) __builtin_trap();
  if (std::abs(r.requests_per_s * r.duration_s - static_cast<double>(requests)) >
      1e-6 * static_cast<double>(requests)) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Specs& s = Get();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto trace = plan::ParseServeTrace(text, "fuzz.jsonl", s.model.max_seq_len);
  if (!trace.ok()) {
    if (trace.status().message().rfind("fuzz.jsonl", 0) != 0) __builtin_trap();
    return 0;
  }
  if (trace->empty() || static_cast<int64_t>(trace->size()) > plan::kMaxTraceRequests)
    __builtin_trap();
  double previous = 0, outputs = 0;
  for (const plan::TraceRequest& r : *trace) {
    if (!Finite(r.arrival_s) || r.arrival_s < previous) __builtin_trap();
    if (r.input_tokens < 1 || r.output_tokens < 1) __builtin_trap();
    if (r.input_tokens + r.output_tokens > s.model.max_seq_len) __builtin_trap();
    previous = r.arrival_s;
    outputs += static_cast<double>(r.output_tokens);
  }
  if (trace->size() > 64 || outputs > 4096) return 0;
  const plan::TraceSummary sum = plan::SummarizeTrace(*trace);
  cost::ServeWorkload w;
  w.input_tokens = sum.max_input_tokens;
  w.output_tokens = sum.max_total_tokens - sum.max_input_tokens;
  w.engine.profile.chunked_prefill = size % 2 == 0;
  w.engine.profile.reserve_full_length = size % 3 == 0;
  spec::TrainSpec train;
  train.seq_len = sum.max_total_tokens;
  const cost::Context ctx = cost::ServeContext(s.model, s.cluster, s.params, train);
  const cost::ServeLayout l{.tp = 1, .ep = 1, .pp = 1, .replicas = 1};
  const cost::ServeEstimate e = cost::EstimateServe(ctx, l, w);
  if (!e.fits) return 0;
  const cost::ServeStepCost c = cost::MakeServeStepCost(ctx, l, w);
  plan::ServeTraffic traffic;
  traffic.trace = *trace;
  const auto n = static_cast<int64_t>(trace->size());
  Check(plan::SimulateServe(c, w, e.kv_blocks, traffic), n, outputs);
  const int64_t tight = (sum.max_total_tokens + w.engine.block_tokens - 1) / w.engine.block_tokens;
  Check(plan::SimulateServe(c, w, tight, traffic), n, outputs);
  return 0;
}

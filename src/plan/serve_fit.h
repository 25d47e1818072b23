// plan::FitServeProfile: the engine profiles (cost::ServeEngineProfile) fitted on published
// serving measurements, and their cross-validation (bench/serving.sh; docs/COST_MODEL.md,
// "Engine profiles").
//
// A measurement (bench/data/serving_runs.json, inferencex_serving.json, published_serving.json
// rows with an "engine") is a closed loop of `concurrency` clients on one layout (tp, one
// replica) with fixed input and output lengths (or drawn below them: "length_range_ratio"), each
// client sending its next request kClientTurnaroundS after its last token; its mean (or, with
// "statistic": "median", median) TTFT and TPOT (GenAI-Perf's and vLLM's "ITL") and, for a fixed
// batch, the batch's latency. Optional row fields set what the benchmark ran that the engine's
// defaults would not: "benchmark_requests" (requests sent; else 3 per client, at least 8),
// "max_batched_tokens", "max_seqs", "gpu_memory_utilization" (of the device, or of what the
// weights leave for an engine whose profile says memory_fraction_of_free), "kv_fp8". Each is
// predicted by plan::SimulateServe of the row under a profile, with the scheduling policy, step
// budget and memory policy of the row's engine's shipped profile (not fitted). The fit minimises
// the sum over rows and compared metrics of log(predicted / measured)^2 over the profile's four
// parameters (Gauss-Newton with damping on numerical derivatives, parameters kept in bounds), from
// the profile "none".
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "cost/inference.h"
#include "plan/serve_sim.h"

namespace pentamesh::plan {

struct ServeRun {
  std::string name, group, config, engine;  // group: the source; config: model-GPU-tp-precision
  std::shared_ptr<const cost::Context> ctx;
  cost::ServeLayout layout;
  cost::ServeWorkload workload;
  ServeTraffic traffic;  // closed loop
  // Measured, seconds (0 = not published or not compared): means, or medians (row "statistic").
  double ttft_s = 0, tpot_s = 0, batch_s = 0;
  bool median = false;
  // Filled by PrepareServeRun: the step cost under the profile "none" and the KV blocks.
  cost::ServeStepCost base;
  int64_t kv_blocks = 0;
  bool fits = false;
};

// Reads the rows of a serving measurements file that have an "engine"; make_context gives the
// Context of a (model, cluster) (the stack's calibrated parameters). Rows are named in errors.
using ServeContextFn = std::function<core::Result<cost::Context>(const std::string& model,
                                                                 const std::string& cluster)>;
core::Result<std::vector<ServeRun>> LoadServeRuns(const std::string& path,
                                                  const ServeContextFn& make_context);

struct ServeRunPrediction {
  double ttft_s = 0, tpot_s = 0, batch_s = 0;
  bool fits = false;
};
ServeRunPrediction PredictServeRun(const ServeRun& run, const cost::ServeEngineProfile& profile);

// Fits `name`'s profile on `runs` (all of one engine).
cost::ServeEngineProfile FitServeProfile(const std::vector<const ServeRun*>& runs,
                                         const std::string& name);

// One compared metric of one run: predicted / measured.
struct ServeError {
  std::string run, metric;  // "ttft", "tpot", "batch"
  double ratio = 0;
};
std::vector<ServeError> ServeErrors(const ServeRun& run, const ServeRunPrediction& p);

}  // namespace pentamesh::plan

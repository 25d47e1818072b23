// The ONE cost model: parameter counts, FLOPs, memory per category, bytes per collective and
// step-time terms for one (model, cluster, train, layout). The planner predicts with it; the
// engine checks its measurements against it. Every formula lives here once; docs/COST_MODEL.md
// states each with its source.
//
// Units: bytes, seconds, FLOPs (not FLOP/s) unless the name says otherwise.
// Invariant: EstimateLayout never allocates on its hot path when `explain` is false, so the planner
// can call it millions of times per second.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/cluster_spec.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::cost {

// Parameter counts, derived from the architecture (never stated).
struct ParamCounts {
  double total = 0;
  double active = 0;          // per token: non-expert + (top_k + shared) experts per MoE layer
  double embedding = 0;       // input embedding
  double lm_head = 0;         // 0 when tied
  double attention = 0;       // all layers: q, k, v, o
  double dense_mlp = 0;       // all dense-FFN layers
  double routed_experts = 0;  // all MoE layers, all routed experts
  double shared_experts = 0;
  double router = 0;
  double norms = 0;
  double expert() const { return routed_experts; }
  double non_expert() const { return total - routed_experts; }
};
ParamCounts CountParams(const spec::ModelSpec& model);

// Messages (one per disagreement) when the spec's stated total/active params differ from the
// architecture by more than 1%; empty when they agree or are not stated.
std::vector<std::string> CheckStatedParams(const spec::ModelSpec& model);

// FLOPs per token of one training step (forward + backward).
struct FlopsPerToken {
  double model = 0;  // 6 * active matmul params + attention 12 * L * h_attn * s (full square)
  double model_causal = 0;  // same with the causal half of attention (6 * L * h_attn * s)
  double hardware = 0;      // model + recomputation (for HFU)
};
FlopsPerToken Flops(const spec::ModelSpec& model, int64_t seq_len, spec::Recompute recompute);

// Tunable efficiency and overhead parameters; defaults are calibrated (docs/COST_MODEL.md).
struct CostParams {
  double gemm_efficiency_max = 0.0;  // 0 = use the calibrated defaults set in cost.cc
  double moe_imbalance = 1.0;        // worst EP rank gets mean * imbalance tokens
  double dp_overlap = -1;            // fraction of DP comm hidden behind compute; <0 = default
  double cp_overlap = -1;            // fraction of CP ring comm hidden behind attention
  double framework_bytes = -1;       // CUDA context, NCCL, allocator reserve; <0 = default
  double fragmentation = -1;         // fraction of allocated bytes lost to fragmentation
  double safety_margin_bytes = -1;   // kept free below capacity; <0 = default (4 GB)
  bool materialize_scores = false;   // attention without flash: keep the s x s scores
};

// Memory per GPU of the most loaded pipeline stage, in bytes, by category.
struct Memory {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;         // fp32 master + Adam m and v
  double activations = 0;       // stashed for backward, all micro-batches in flight
  double attention_scores = 0;  // only when scores are materialized (no flash attention)
  double logits = 0;            // logits/loss buffers on the last stage
  double comm_buffers = 0;
  double framework = 0;
  double fragmentation = 0;
  double total = 0;
  double capacity = 0;  // HBM minus the safety margin
};

// Step time terms, seconds; `step` is what the step takes after overlap.
struct Time {
  double compute = 0;  // FLOPs of the stage / achieved FLOP/s, recomputation included
  double tp = 0;       // TP/SP collectives (exposed)
  double cp = 0;       // CP ring KV exchange or Ulysses all-to-all (exposed after overlap)
  double ep = 0;       // EP all-to-all dispatch + combine
  double pp = 0;       // pipeline p2p
  double dp = 0;       // DP/ZeRO reduce-scatter / all-gather / all-reduce (exposed after overlap)
  double bubble = 0;   // pipeline bubble
  double step = 0;
};

// Bytes one rank sends per optimizer step, per group (what Communicator counters measure).
struct CommBytes {
  double tp = 0, cp = 0, ep = 0, pp = 0, dp = 0;
};

struct Estimate {
  spec::Layout layout;
  int64_t microbatches = 0;             // per pipeline per step
  bool fits = false;                    // no violation, memory within capacity
  std::vector<std::string> violations;  // filled only when explain = true
  Memory memory;
  Time time;
  CommBytes comm_bytes;
  double bubble_fraction = 0;  // bubble / step
  double mfu = 0;
  double mfu_causal = 0;  // MFU under the causal-half attention FLOP convention
  double hfu = 0;
  double tokens_per_s = 0;
  double days = 0;  // for train.total_tokens
  double cost_usd = 0;
};

// Costs one layout. With explain = true, every structural violation (spec::Validate) and a
// memory violation naming the largest component are written to `violations`.
Estimate EstimateLayout(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                        const spec::TrainSpec& train, const spec::Layout& layout,
                        const CostParams& params = {}, bool explain = true);

}  // namespace pentamesh::cost

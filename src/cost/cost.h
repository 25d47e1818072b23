// The cost model: parameter counts, FLOPs, memory per category, bytes per collective and
// step-time terms for one (model, cluster, train, layout). The planner predicts with it; the
// engine checks its measurements against it. Its formulas live in cost/ once, except two it
// reads: wire bytes per collective (core/collective_bytes.h) and the pipeline's bubble, warm-up
// and chunk order (schedule/estimate.h, schedule/generate.h). docs/COST_MODEL.md states each
// formula with its source.
//
// Units: bytes, seconds, FLOPs (not FLOP/s) unless the name says otherwise.
// Invariant: EstimateLayout(const Context&, ...) never allocates when `explain` is false, so the
// planner can call it millions of times per second: build one cost::Context per (model, cluster,
// train, params) and reuse it for every layout.
//
// Usage:
//   cost::Context ctx(model_spec, cluster_spec, train_spec);   // once: counts, FLOPs, prefix sums
//   for (const spec::Layout& l : candidates) {
//     if (cost::CheckLayout(ctx, l) != cost::Rule::kOk) continue;   // numeric spec::Validate
//     cost::Estimate e = cost::EstimateLayout(ctx, l);               // explain = false: no allocs
//   }
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/mem_tag.h"
#include "cost/attention.h"
#include "cost/precision.h"
#include "spec/cluster_spec.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"
#include "spec/validate.h"

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
  // Parameters that take part in a matmul per token (FLOP counting): active minus the embedding
  // lookup and the norms; the LM head counts (it is the embedding matrix when tied).
  double active_matmul = 0;
  double expert() const { return routed_experts; }
  double non_expert() const { return total - routed_experts; }
};
ParamCounts CountParams(const spec::ModelSpec& model);

// Messages (one per disagreement) when the spec's stated total/active params differ from the
// architecture by more than 1%; empty when they agree or are not stated.
std::vector<std::string> CheckStatedParams(const spec::ModelSpec& model);

// FLOPs per token of one training step (forward + backward).
struct FlopsPerToken {
  // 6 * active matmul params + attention 12 * L * width * keys (GQA: 12 L h_attn s, the full
  // square; sliding-window layers count their window: cost/attention.h)
  double model = 0;
  double model_causal = 0;  // same with the keys a causal mask leaves (GQA: 6 L h_attn s)
  // 6 x active parameters (ParamCounts::active), no attention term: the case study's convention
  // (seeds 000, T_compute = 6 P_active B S / (peak N MFU)); independent of the sequence length.
  double model_6n = 0;
  double hardware = 0;  // model + recomputed forward work (for HFU), full-square convention
};
// modules: with selective recomputation, the spec::RecomputeModule bits it reruns (0: core
// attention alone); the hardware count adds each module's forward FLOPs.
FlopsPerToken Flops(const spec::ModelSpec& model, int64_t seq_len, spec::Recompute recompute,
                    uint32_t modules = 0);
// Forward FLOPs of core attention for one query token, all layers: QK^T and AV are 2 x keys x
// score width each per layer, keys from AttentionKeysOf over seq_len (causal: the average query of
// a causal sequence; full: a query that sees all seq_len keys, e.g. a decode step at context
// seq_len). Flops() counts 3x this (forward + backward).
double AttentionForwardFlops(const spec::ModelSpec& model, double seq_len, bool causal);

// Bytes per parameter of the model state: cost/precision.h (PrecisionPolicyOf).
inline constexpr double kDefaultGemmEfficiency = 0.75;

// Tunable efficiency and overhead parameters. The defaults are calibrated against published runs
// (docs/COST_MODEL.md, "Calibration"); every one is a physical quantity, not a fudge on the result.
struct CostParams {
  // Compute. A GEMM of M x N x K takes max(2MNK / (peak * gemm_efficiency_max) *
  // (1 + gemm_dim_overhead * (1/M + 1/N + 1/K)), bytes(A, B, C) / (hbm * hbm_efficiency)).
  // gemm_efficiency_max: fraction of the dense peak a large GEMM sustains; 0 = the cluster's
  // gemm_efficiency, or kDefaultGemmEfficiency when the cluster does not state one.
  double gemm_efficiency_max = 0;
  double gemm_dim_overhead = 128;  // elements of tile/wave overhead per GEMM dimension
  // Seconds each local expert's GEMM costs beyond the form above in the routed experts' grouped
  // kernel (its launch, its own tail wave): fine-grained MoE (16-32 local experts of FFN 768-2048)
  // feels it, 2-4 large local experts barely do.
  double expert_gemm_overhead_s = 0;
  double attention_relative = 0.75;  // flash attention's FLOP rate / a large GEMM's
  double hbm_efficiency = 0.80;      // fraction of HBM bandwidth memory-bound kernels reach
  // Inference (cost/inference.h): fraction of HBM bandwidth that streaming the weights and the KV
  // cache through a forward pass reaches (matrix-vector reads); 0 = hbm_efficiency. The CPU
  // engine's is its measured sgemv rate over the triad's (train::PredictGeneration), above 1 there:
  // a read-only stream moves more than the triad's 12 bytes an element count.
  double weight_read_efficiency = 0;
  // FP8 GEMM rate / BF16 GEMM rate; 0 = the cluster's calibrated one (training; else the peaks'
  // ratio, H100: 1979 / 989) and the peaks' ratio for serving (ServeGemmSpeedup). Attention
  // stays BF16; FP8 GEMMs also pay the casts of their inputs (3 bytes an element at HBM speed).
  double fp8_gemm_speedup = 0;
  // Bytes elementwise kernels move / the bytes of their inputs and outputs: 1 for fused kernels
  // (Transformer Engine, torch.compile, XLA); eager PyTorch launches each op apart and moves more.
  double elementwise_traffic = 1.0;
  // Seconds a layer costs per micro-batch (forward + backward) beyond its kernels' work: kernel
  // launches, framework hooks (FSDP's per-layer pre/post hooks), host synchronisation.
  double layer_overhead_s = 0;
  // Inference (cost/inference.h): seconds a decoder layer costs per forward pass beyond its
  // kernels' work, exposed at decode's small sizes: about 12 kernels a layer (norms, RoPE, QKV,
  // attention, out-projection, all-reduce, gate/up, activation, down, residuals) at ~3.5 us of
  // launch gap and tail each under CUDA graphs.
  double inference_layer_overhead_s = 40e-6;
  // Inference: flash attention's forward FLOP rate / a large GEMM's; 0 = attention_relative. A
  // calibrated GPU stack sets the parameter's physical prior here (calib::ApplyProfile), not its
  // fit: the training fit's attention_relative blends in the backward's slower kernels, and an
  // engine profile's attention_efficiency (ServeEngineProfile) is fitted on serving measurements
  // on top of this rate.
  double inference_attention_relative = 0;
  // Communication (alpha-beta, ring algorithms). Bus efficiency: achieved / link bandwidth.
  double bus_efficiency_intra = 0.80;  // NVLink (nccl-tests busbw / per-direction NVLink bw)
  double bus_efficiency_inter = 0.85;  // InfiniBand / RoCE
  // Overlap: fraction of the overlap window that hides communication.
  double tp_overlap = 0.0;  // TP/SP collectives hidden behind GEMMs (Megatron tp-comm-overlap)
  double dp_overlap = 0.9;  // DP/ZeRO collectives hidden behind backward/forward compute
  double cp_overlap = 0.9;  // CP ring KV exchange hidden behind attention compute
  double ep_overlap = 0.0;  // EP all-to-all hidden behind other micro-batches' compute
  // The MoE dispatcher sends a token once to each remote node that holds one of its experts and
  // fans it out there over NVLink (DeepEP / HybridEP: Megatron's --moe-token-dispatcher-type
  // flex); false: an all-to-all that sends every routed copy (Megatron's alltoall, the CPU
  // engine).
  bool ep_dispatch_per_node = false;
  // MoE: the worst EP rank gets mean * imbalance tokens (capped by the capacity factor when > 0).
  double moe_imbalance = 1.0;
  // Memory.
  // Gradients accumulated and reduced in fp32 (Megatron's main grads; cost/precision.h), else in
  // the weights' dtype.
  bool fp32_main_grads = false;
  double framework_bytes = 2.5e9;    // CUDA context, NCCL, cuBLAS workspaces
  double fragmentation = 0.10;       // fraction of the dynamic bytes lost to the allocator
  double safety_margin_bytes = 2e9;  // kept free below HBM capacity
  bool materialize_scores = false;   // attention without flash: keep the s x s scores
  bool dropout = false;              // dropout masks stashed (GPT-3 / Korthikanti's count)
  // Stash policy of the implementation; the defaults are Megatron-LM's (the planner's target).
  // fp32_logits_only: the LM head writes fp32 logits directly (fused cross-entropy, the CPU
  // engine) instead of bf16 logits plus an fp32 copy. selective_recomputes_qkv: selective
  // recomputation also reruns the QKV projections and RoPE, keeping neither q, k, v nor the
  // attention output (the CPU engine); Megatron recomputes core attention only.
  // moe_regathers_input: at ep = 1 the experts' backward gathers its input rows again from the
  // FFN input instead of stashing the dispatched copy (the CPU engine). ulysses_stash_fp32:
  // Ulysses context parallelism stashes its head-sharded q, k, v, o in fp32 (the CPU engine).
  // moe_replicated_over_tp: under tp > 1 the router and routed experts are replicated over tp,
  // each tp rank dispatching all of its tokens' rows (the CPU engine); Megatron splits the
  // tokens over tp before the dispatch.
  bool fp32_logits_only = false;
  bool ulysses_stash_fp32 = false;
  bool moe_replicated_over_tp = false;
  bool selective_recomputes_qkv = false;
  // Share of a layer's forward GEMMs and elementwise work that selective recomputation reruns on
  // top of core attention: 0 for Megatron (core attention only); torchtitan's per-op selective
  // checkpointing saves every other matmul's output, and its per-layer mode checkpoints every
  // other layer: about half.
  double selective_forward_share = 0;
  // Selective recomputation as torchtitan's per-op checkpointing: a layer keeps its input, the
  // attention output and log-sum-exp, and every other matmul's output (the rest is recomputed),
  // instead of Megatron's everything-but-core-attention.
  bool selective_op_sac = false;
  // The loss is an eager log-softmax + NLL over fp32 logits (12 bytes a logit at its peak)
  // instead of a fused cross-entropy (the fp32 logits and the bf16 GEMM output).
  bool unfused_cross_entropy = false;
  // FSDP under a pipeline keeps each stage's parameters gathered for the whole step (no
  // re-gather per micro-batch) and accumulates unsharded fp32 gradients until the last one
  // (torchtitan: reshard_after_forward off with PP).
  bool fsdp_unsharded_with_pp = false;
  // Under SP, the column-parallel GEMMs (QKV, FFN up/gate) keep their all-gathered, full-sequence
  // input for backward (PyTorch DTensor TP, torchtitan) instead of the sequence-sharded one that
  // Megatron gathers again in backward.
  bool tp_saves_gathered_input = false;
  // Pipeline buffers as torch.distributed.pipelining allocates them (torchtitan): a receive buffer
  // per micro-batch for the stage input (all stages but the first) and for the output's gradient
  // (all but the last), and each in-flight micro-batch's stage output kept until its backward;
  // false: Megatron's two send and two receive buffers, outputs freed once sent.
  bool pp_buffers_per_microbatch = false;
  // Count transient workspaces: the activation gradients a layer's backward holds at its peak,
  // and ring attention's fp32 output and dq accumulators under cp > 1 (GPU stacks; the CPU
  // engine tags those transients "other", which its prediction does not cover).
  bool transient_workspaces = false;
  // FP8 training: the weights are cast to FP8 once a step, on its first micro-batch, and reused by
  // the others (Transformer Engine's weight caching, which Megatron-LM and NeMo use); false: every
  // GEMM casts its weight again (torchao's float8 linears). The once-a-step cast, three bytes a
  // local parameter at HBM speed, is under 0.1% of a step and not counted.
  bool fp8_weight_cache = false;
  // fp8_stash_gemm_inputs: in FP8 training the stack keeps each linear layer's input for the
  // weight gradient in FP8, 1 byte an element (Transformer Engine's Linear, LayerNormLinear and
  // GroupedLinear save the quantized input), not the BF16 activation (torchao's float8 linears
  // save the high-precision input and cast it again in backward). Core attention's q, k, v, the
  // activation function's inputs and the router's input stay BF16.
  bool fp8_stash_gemm_inputs = false;
  bool moe_regathers_input = false;
  // pp_scatter_gather: without SP, each tp rank sends 1/tp of the stage boundary's activation and
  // the receiver all-gathers it over NVLink (Megatron's scatter/gather optimization, Narayanan et
  // al. 2021); false: every tp rank sends its full replica (the CPU engine). Under SP the
  // activation is sequence-sharded either way.
  bool pp_scatter_gather = true;
  // pp_p2p_overlap: an interleaved pipeline posts each chunk's send (its activation forward, its
  // gradient backward) and computes the next chunk meanwhile (Megatron-LM's overlap_p2p_comm, on
  // by default with virtual stages and switched off without them): a send costs only what
  // outlasts half a chunk's forward and backward. false: every send on the critical path (other
  // schedules, the CPU engine).
  bool pp_p2p_overlap = false;
};

// Memory per GPU of the most loaded pipeline stage, in bytes, by category.
struct Memory {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;         // fp32 master + Adam m and v
  double activations = 0;       // stashed for backward, all micro-batches in flight
  double attention_scores = 0;  // working score block when scores are materialized (no flash)
  double logits = 0;            // logits/loss buffers on the last stage (fp32 + bf16 copy)
  double comm_buffers = 0;
  double framework = 0;
  double fragmentation = 0;
  double total = 0;
  double capacity = 0;  // HBM minus the safety margin

  // Every component with its report name, in report order (total and capacity excluded), from
  // kMemoryCategories.
  std::array<std::pair<const char*, double>, 9> components() const;
  // The bytes the engine's allocator tag of each category should hold (core::MemTag order; the
  // categories without a tag add to none): what metrics.jsonl and `train` set next to the peaks.
  std::array<double, core::kMemTagCount> ByTag() const;
};

// The memory categories, in report order: the one list that tables, JSON, charts and
// explanations walk. name: key in tables and JSON; label: the short form of one-line summaries
// and charts; tag: the engine allocator's tag that measures it (nullopt: no CPU counterpart).
struct MemoryCategory {
  const char* name;
  const char* label;
  double Memory::*field;
  std::optional<core::MemTag> tag;
};
inline constexpr std::array<MemoryCategory, 9> kMemoryCategories = {{
    {"weights", "weights", &Memory::weights, core::MemTag::kWeights},
    {"grads", "grads", &Memory::grads, core::MemTag::kGrads},
    {"optimizer", "optimizer", &Memory::optimizer, core::MemTag::kOptimizer},
    {"activations", "activations", &Memory::activations, core::MemTag::kActivations},
    {"attention_scores", "scores", &Memory::attention_scores, core::MemTag::kActivations},
    {"logits", "logits", &Memory::logits, core::MemTag::kLogits},
    {"comm_buffers", "comm", &Memory::comm_buffers, core::MemTag::kComm},
    {"framework", "framework", &Memory::framework, std::nullopt},
    {"fragmentation", "fragmentation", &Memory::fragmentation, std::nullopt},
}};

inline std::array<std::pair<const char*, double>, 9> Memory::components() const {
  std::array<std::pair<const char*, double>, 9> out;
  for (size_t i = 0; i < kMemoryCategories.size(); ++i) {
    out[i] = {kMemoryCategories[i].name, this->*kMemoryCategories[i].field};
  }
  return out;
}

inline std::array<double, core::kMemTagCount> Memory::ByTag() const {
  std::array<double, core::kMemTagCount> out{};
  for (const MemoryCategory& c : kMemoryCategories) {
    if (c.tag) out[static_cast<size_t>(*c.tag)] += this->*c.field;
  }
  return out;
}

// Step time terms, seconds; they add up to `step` (exposed parts only).
struct Time {
  double compute = 0;    // GEMMs, attention and memory-bound kernels of the slowest stage, with
                         // recomputation, all micro-batches
  double tp = 0;         // TP/SP collectives (exposed)
  double cp = 0;         // CP ring KV exchange or Ulysses all-to-all (exposed after overlap)
  double ep = 0;         // EP all-to-all dispatch + combine
  double pp = 0;         // pipeline p2p
  double dp = 0;         // DP/ZeRO reduce-scatter / all-gather / all-reduce (exposed after overlap)
  double bubble = 0;     // pipeline bubble
  double optimizer = 0;  // AdamW update (memory bound)
  double step = 0;
};

// The step-time terms (step excluded), in report order: the one list that tables, JSON, the
// scaling analysis and metrics.jsonl walk. name: key in tables and JSON; group: the engine's mesh
// groups whose measured collective time is the term's counterpart (metrics.jsonl), "" for none.
struct TimeTerm {
  const char* name;
  double Time::*field;
  std::array<const char*, 3> groups;
};
inline constexpr std::array<TimeTerm, 8> kTimeTerms = {{
    {"compute", &Time::compute, {}},
    {"tp", &Time::tp, {"tp"}},
    {"cp", &Time::cp, {"cp"}},
    {"ep", &Time::ep, {"ep"}},
    {"pp", &Time::pp, {"pp"}},
    {"dp", &Time::dp, {"dp", "dp_cp", "expert_dp"}},
    {"bubble", &Time::bubble, {}},
    {"optimizer", &Time::optimizer, {}},
}};
// The step before overlap accounting: every term of kTimeTerms summed, so a term added to the list
// is in the step, the tables, JSON, the scaling analysis and the charts without further edits.
inline double SumOfTerms(const Time& time) {
  double step = 0;
  for (const TimeTerm& term : kTimeTerms) step += time.*term.field;
  return step;
}

// Bytes one rank sends per optimizer step, per group (what Communicator counters measure), for a
// rank of the given pipeline stage. Ring conventions: all-reduce of n bytes over g ranks sends
// 2(g-1)/g*n, all-gather / reduce-scatter (n = full tensor) (g-1)/g*n, all-to-all (g-1)/g*n,
// p2p n. docs/COST_MODEL.md lists each collective.
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
  CommBytes comm_bytes;        // for a rank of stage `critical_stage`
  int64_t memory_stage = 0;    // pp rank whose memory is reported (the most loaded)
  int64_t critical_stage = 0;  // pp rank with the longest time per micro-batch
  // Seconds of one micro-batch on the first pp rank, on each middle one and on the last (the
  // PipelineBubble inputs; with pp = 2 the middle is unused, with pp = 1 all are the one stage).
  double stage_microbatch_s[3] = {0, 0, 0};
  double bubble_fraction = 0;  // bubble / step
  double mfu = 0;
  double mfu_causal = 0;  // MFU under the causal-half attention FLOP convention
  double mfu_6n = 0;      // MFU under the 6N convention (FlopsPerToken::model_6n)
  double hfu = 0;
  double tokens_per_s = 0;
  double days = 0;  // for train.total_tokens
  double cost_usd = 0;
};

// The structural rules (spec/validate.h's table): CheckLayout returns the first broken one.
using spec::Rule;
using spec::RuleName;

// Everything per (model, cluster, train, params) that does not depend on the layout: counts,
// per-layer sizes, a prefix sum of MoE layers. Copies the specs; they need not outlive it.
class Context {
 public:
  Context(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
          const spec::TrainSpec& train, const CostParams& params = {});

  const spec::ModelSpec& model() const { return model_; }
  const spec::ClusterSpec& cluster() const { return cluster_; }
  const spec::TrainSpec& train() const { return train_; }
  const CostParams& params() const { return params_; }
  const ParamCounts& counts() const { return counts_; }
  const AttentionShape& attention() const { return attention_; }
  // MoE layers among layers [begin, end).
  int64_t MoeLayers(int64_t begin, int64_t end) const {
    return moe_prefix_[static_cast<size_t>(end)] - moe_prefix_[static_cast<size_t>(begin)];
  }
  // Sliding-window (local) layers among layers [begin, end).
  int64_t LocalLayers(int64_t begin, int64_t end) const {
    return local_prefix_[static_cast<size_t>(end)] - local_prefix_[static_cast<size_t>(begin)];
  }

  // Per-layer parameter counts (unsharded).
  double attn_params_layer = 0;    // projections split over tp (GQA: q, k, v, o)
  double attn_params_rep = 0;      // projections every tp rank holds whole (MLA's down-projections)
  double mlp_params_layer = 0;     // dense FFN
  double expert_params_one = 0;    // one routed expert
  double shared_params_layer = 0;  // all shared experts of one MoE layer
  double router_params_layer = 0;
  double norm_params_layer = 0;  // the two RMSNorms (+ MLA's latent norms)
  FlopsPerToken flops_none, flops_selective, flops_full;

 private:
  spec::ModelSpec model_;
  spec::ClusterSpec cluster_;
  spec::TrainSpec train_;
  CostParams params_;
  ParamCounts counts_;
  AttentionShape attention_;
  std::vector<int64_t> moe_prefix_;    // moe_prefix_[i] = MoE layers among the first i
  std::vector<int64_t> local_prefix_;  // local_prefix_[i] = sliding-window layers among the first i
};

// First structural rule the layout breaks (Rule::kOk when none): spec::FirstBrokenRule over the
// context's specs, so Validate(...) is empty iff CheckLayout(...) == kOk. Never allocates.
Rule CheckLayout(const Context& ctx, const spec::Layout& layout);

// The achieved fraction of the dense peak of a large GEMM: CostParams::gemm_efficiency_max, else
// the cluster's calibrated gemm_efficiency, else kDefaultGemmEfficiency.
double GemmEfficiency(const Context& ctx);
// The GPU's factor on the stack's flash-attention rate (spec::ClusterSpec::attention_factor; 1
// when the cluster states none).
double AttentionFactor(const Context& ctx);
// FP8 GEMM rate / BF16 GEMM rate: CostParams::fp8_gemm_speedup, else the cluster's calibrated
// one, else the ratio of the cluster's peaks.
double Fp8GemmSpeedup(const Context& ctx);
// An inference engine's FP8 (or, with fp4, NVFP4) GEMM rate / its BF16 GEMM rate: the ratio of
// the cluster's peaks (CostParams::fp8_gemm_speedup when set, scaled to FP4 by the peaks). Not
// Fp8GemmSpeedup: that one is fitted on training runs, whose FP8 GEMMs quantize their weights and
// activations at run time and keep scaling histories; a served checkpoint's weights are
// quantized offline with static scales, and its GEMMs reach the BF16 ones' share of their peak
// (docs/COST_MODEL.md, "Serving simulation", TensorRT-LLM's maximum-throughput tables).
// REQUIRES: the cluster has the FP8 (and with fp4 the FP4) peak.
double ServeGemmSpeedup(const Context& ctx, bool fp4);

// Model FLOPs utilization: model FLOPs per token (Flops(...).model) x tokens/s over the
// cluster's dense peak (all its GPUs). Predictions (EstimateLayout) and the engine's measurement
// (train::Trainer, over train::HostCluster) both use it.
double Mfu(double model_flops_per_token, double tokens_per_s, const spec::ClusterSpec& cluster);

// Costs one layout. With explain = true, every structural violation (spec::Validate) and a
// memory violation naming the largest component are written to `violations`. With explain =
// false it never allocates; a structurally invalid layout returns fits = false and zero terms.
Estimate EstimateLayout(const Context& ctx, const spec::Layout& layout, bool explain = false);

// What spec's kTpInNode rule ("tp must divide gpus_per_node") keeps out: the layout costed as if
// its tp group could span nodes, its TP collectives priced on the inter-node link a group wider
// than a node gets (NIC share per rank; terms.cc MakeLink), every other term as EstimateLayout's.
// fits is false and violations holds the rule's message. nullopt unless kTpInNode is the only
// rule the layout breaks. For `pentamesh estimate` to show the cost of the layout it refuses.
std::optional<Estimate> EstimateTpAcrossNodes(const Context& ctx, const spec::Layout& layout);

// Convenience: builds a Context and explains (allocates; for the CLI and tests).
Estimate EstimateLayout(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                        const spec::TrainSpec& train, const spec::Layout& layout,
                        const CostParams& params = {}, bool explain = true);

// Bytes one rank of pp stage `pp_rank` sends per step, per group. REQUIRES: CheckLayout == kOk.
CommBytes CommBytesForStage(const Context& ctx, const spec::Layout& layout, int64_t pp_rank);
// Memory of a rank of pp stage `pp_rank` (its layers, micro-batches in flight per schedule,
// embedding/head where they live). REQUIRES: CheckLayout == kOk.
Memory MemoryForStage(const Context& ctx, const spec::Layout& layout, int64_t pp_rank);

// The working block of attention scores one rank holds when scores are materialized (bytes):
// ring CP: (heads/tp) * (s/cp)^2 * mbs * 2; Ulysses: heads/(tp*cp) * s^2 * mbs * 2 (seed 000:
// 64 heads, tp 8, cp 16, s = 128,000 -> 1.02 GB).
double AttentionScoreBlockBytes(int64_t heads, int64_t seq_len, int64_t mbs, int64_t tp, int64_t cp,
                                spec::CpKind cp_kind);

// Pipeline bubble as a fraction of the ideal (bubble-free) step time of m micro-batches:
// GPipe/1F1B (p-1)/m, interleaved (p-1)/(V m), zero bubble ZB-H1 (p-1)/(3m). The fraction of the
// whole step is b/(1+b), e.g. 1F1B p=16, m=64: (15/64)/(1+15/64) = 15/79.
double BubbleOverIdeal(spec::Schedule schedule, int64_t pp, int64_t microbatches,
                       int64_t virtual_stages);

// Bubble seconds of a step whose pipeline stages take unequal time per micro-batch (first: the
// embedding, last: the LM head and loss, middle: each of the pp - 2 others): the other stages'
// warm-up and cool-down around the slowest, BubbleOverIdeal x m x the mean time of the pp - 1
// stages that are not the slowest. Equal stages give BubbleOverIdeal x m x t. Checked against
// schedule::SimulateSchedule with per-stage costs (tests/cost/time_test.cc).
double PipelineBubble(spec::Schedule schedule, int64_t pp, int64_t microbatches,
                      int64_t virtual_stages, double first, double middle, double last);

}  // namespace pentamesh::cost

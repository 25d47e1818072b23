// Inference (serving) in the cost model: for a model on a GPU, a serving layout (tp x ep x pp per
// replica, replicas), a number of concurrent requests and their input/output lengths: memory per
// GPU (weights, KV cache), how many requests fit, prefill time (the training model's forward pass
// of the request, internal::LayerForwardTime), decode step time (memory-bound roofline: weights
// touched + KV read over HBM, plus the TP all-reduces, EP all-to-alls and PP sends of a step),
// TTFT, inter-token latency, tokens/s per GPU and cost.
// MoE: experts per GPU, experts a decode step touches, expert offloading to host memory.
// docs/COST_MODEL.md, "Inference", states every formula and parameter with its source.
//
// Serving layout (rank order pp-ep-tp, tp innermost): one replica is tp x ep x pp GPUs. Dense
// weights (attention, dense FFN, embedding, head, shared experts) are split over tp and the pp
// stages and replicated over ep; the routed experts are split over ep (experts / ep per GPU per
// MoE layer) and each expert's FFN over tp. Each of the ep groups runs attention for its own share
// of the replica's requests (DP attention; the seed's 16 pods of TP 8 that share 128 experts).
//
// Time model (what "p95" means here): the replica's requests arrive together; each ep group
// prefills its requests one after another (first come, first served), then decodes them as one
// batch. The k-th request of a group waits k prefills, so TTFT mean = (n+1)/2 prefills and TTFT
// p95 = ceil(0.95 n) prefills for n requests per group (1 request: p95 = mean = one prefill). No
// arrival process, no chunked prefill interleaved with decode steps.
//
// Invariant: EstimateServe never fails: a layout that breaks a rule or does not fit comes back
// with fits = false and every reason in `violations`, each naming the field (--tp, --ep, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "spec/train_spec.h"

namespace pentamesh::cost {

struct ServeLayout {
  int64_t tp = 1, ep = 1, pp = 1;  // per replica: tp x ep x pp GPUs
  int64_t replicas = 1;
  int64_t gpus_per_replica() const { return tp * ep * pp; }
  int64_t gpus() const { return gpus_per_replica() * replicas; }
  bool operator==(const ServeLayout&) const = default;
};
std::string FormatServeLayout(const ServeLayout& l);  // "tp=4 ep=1 pp=1 replicas=2"

// Engine memory and batching policy (vLLM's names and defaults, vllm/config: EngineArgs):
// the engine may use gpu_memory_utilization x the device's usable bytes
// (ClusterSpec::hbm_usable_gb); weights, the activations of one step of max_batched_tokens
// and CostParams::framework_bytes (CUDA context, NCCL, cuBLAS workspaces, CUDA graphs) come
// out of it, the rest is the paged KV cache in blocks of block_tokens tokens (a profile with
// memory_fraction_of_free: the KV cache is gpu_memory_utilization x what the device has left
// after those, TensorRT-LLM's way). A step
// schedules at most max_batched_tokens tokens (chunked prefill) of at most max_seqs requests.
// Profile of a serving engine (docs/COST_MODEL.md, "Engine profiles"): what its scheduler,
// input preparation, sampling and detokenization add to every step beyond the kernels (a fixed
// time a step and a time per scheduled request), and the fraction of the attention kernel's
// roofline (KV read and score FLOPs) it achieves. The default (name "none") adds nothing: the
// kernels' roofline alone, which the closed forms of EstimateServe are.
// Its scheduler's policy (the engine's defaults, not fitted; plan/serve_sim.h):
// chunked_prefill: a prompt may be split over steps under the token budget (vLLM V1, SGLang);
// false: only whole prompts join a step, first come first served until one does not fit in
// what is left of the budget (TensorRT-LLM's MicroBatchScheduler with enable_chunked_context
// off, its default). reserve_full_length: a request is admitted only when the KV blocks of its
// whole length (input + output) are free and keeps them, so nothing is ever preempted
// (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler, its default); false: blocks are taken
// as tokens are cached and the newest request is preempted when they run out (vLLM).
struct ServeEngineProfile {
  std::string name = "none";
  double step_overhead_s = 0;       // per scheduler step
  double seq_overhead_s = 0;        // per request scheduled in a step
  double attention_efficiency = 1;  // attention kernel time = roofline / attention_efficiency
  // The API front end's time a request (HTTP, chat template, tokenization), one request after
  // another: a request reaches the scheduler frontend_s after it was sent or after the request
  // before it reached it, whichever is later (plan::SimulateServe); its TTFT counts from sending.
  double frontend_s = 0;
  bool chunked_prefill = true;
  bool reserve_full_length = false;
  // The engine's step budget (ServeEngine::max_batched_tokens) unless the user sets one; 0 = the
  // ServeEngine default.
  int64_t max_batched_tokens = 0;
  // The engine's FP8 checkpoints hold an FP8 KV cache as well (TensorRT-LLM's FP8 recipe,
  // examples/quantization: --qformat fp8 --kv_cache_dtype fp8): a measurement of its FP8 weights
  // is of an FP8 KV cache (plan::LoadServeRuns).
  bool fp8_kv_with_fp8_weights = false;
  // ServeEngine::gpu_memory_utilization is a share of what is free after the weights, the step's
  // activations and the framework (TensorRT-LLM's KvCacheConfig free_gpu_memory_fraction, 0.9 by
  // default), not of the device (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static).
  bool memory_fraction_of_free = false;
  bool operator==(const ServeEngineProfile&) const = default;
};
// The shipped profiles, fitted by bench/serving.sh on bench/data/serving_runs.json and
// bench/data/published_serving.json ("none" and the engines with measurements). nullptr when
// `name` has none.
const ServeEngineProfile* FindServeEngineProfile(const std::string& name);
std::vector<std::string> ServeEngineProfileNames();

struct ServeEngine {
  double gpu_memory_utilization = 0.9;
  int64_t max_batched_tokens = 8192;
  int64_t max_seqs = 256;
  int64_t block_tokens = 16;
  ServeEngineProfile profile;
};

constexpr int kWeightOnlyGroup = 128;

// NVFP4 (Blackwell's FP4, as NVIDIA ModelOpt checkpoints hold it): a 4-bit E2M1 element plus one
// FP8 E4M3 scale per block of 16, for weights and the activations the GEMMs quantize on the fly.
constexpr int kNvfp4Block = 16;
constexpr double kNvfp4Bytes = 0.5 + 1.0 / kNvfp4Block;

// Serving's weight formats by name: "bf16", "fp8" (weights and GEMMs), "fp4" (NVFP4 weights and
// GEMMs), "int8", "int4" (weight-only, BF16 GEMMs). ParseServeWeights sets w.precision,
// w.weight_only_bits and w.fp4; false for another name.
struct ServeWorkload;
bool ParseServeWeights(const std::string& name, ServeWorkload& w);
std::string ServeWeightsName(spec::Precision precision, int weight_only_bits, bool fp4);
const std::vector<std::string>& ServeWeightsNames();

struct ServeWorkload {
  int64_t input_tokens = 0;   // prompt tokens per request
  int64_t output_tokens = 0;  // generated tokens per request (the first comes from prefill)
  int64_t requests = 1;       // concurrent requests over all replicas (split evenly)
  // Weights and GEMMs: kBf16 (2 bytes) or kFp8 (1 byte, GEMMs at ServeGemmSpeedup). kFp32 is 4
  // bytes.
  spec::Precision precision = spec::Precision::kBf16;
  // Weight-only integer quantization (W8A16 / W4A16, as AWQ and GPTQ checkpoints hold it): 0 =
  // none, else 8 or 4 bits a weight plus one BF16 scale per group of kWeightOnlyGroup weights,
  // dequantized inside BF16 GEMMs (precision kBf16).
  int weight_only_bits = 0;
  // NVFP4 weights and GEMMs (precision kFp8, whose paths it refines): kNvfp4Bytes an element, the
  // GEMMs at ServeGemmSpeedup's FP4 rate. Needs a GPU with an FP4 peak (Blackwell).
  bool fp4 = false;
  // KV cache in FP8 (1 byte an element) instead of BF16 (2; FP32, 4, when precision is kFp32)
  bool kv_fp8 = false;
  // Expert offloading (MoE): routed experts of each MoE layer that one ep group keeps in HBM
  // (0 = all of its experts / ep); the others live in host memory and a touched expert that is
  // not resident crosses PCIe. expert_hit_rate: fraction of touched experts found in HBM.
  int64_t experts_in_hbm = 0;
  double expert_hit_rate = 1.0;
  // Prefix caching (vLLM's automatic prefix caching, SGLang's RadixAttention): the share of each
  // prompt's tokens found in the cache (a shared system prompt, earlier turns), in [0, 1); those
  // are not prefilled again (CachedPrefixTokens), while every request still holds its whole
  // context's KV blocks (sharing between requests not counted).
  double prefix_hit_rate = 0;
  double pcie_gbps = 50;  // host-to-GPU bandwidth achieved per GPU (PCIe Gen5 x16: 64 GB/s peak)
  double usd_per_gpu_hour = 2.5;
  ServeEngine engine = {};
};

// Bytes per GPU. capacity: the engine's share of the device, gpu_memory_utilization x
// ClusterSpec::usable_hbm_bytes(). The KV cache gets what is left after the weights, the
// framework and the larger of the request's activations and the engine's activation_reserve
// (a step of max_batched_tokens tokens, the working set the engine profiles before sizing it).
struct ServeMemory {
  double weights = 0;             // dense / (tp pp) + resident routed experts / (tp pp)
  double kv_cache = 0;            // the ep group's requests, input + output tokens each
  double activations = 0;         // one layer's prefill working set (below)
  double activation_reserve = 0;  // the same for a step of max_batched_tokens tokens
  double framework = 0;           // CostParams::framework_bytes
  double total = 0;
  double capacity = 0;
};

struct ServeEstimate {
  ServeLayout layout;
  bool fits = false;
  std::vector<std::string> violations;  // rules broken and memory overflows, each naming a field
  ServeMemory memory;
  // KV cache: whole model (all layers, all kv heads) per token; per GPU per token; per GPU for one
  // request of input + output tokens (sliding-window layers keep at most their window).
  double kv_bytes_per_token = 0, kv_bytes_per_token_gpu = 0, kv_bytes_per_request_gpu = 0;
  int64_t requests_fit = 0;  // per replica: ep groups x requests whose KV fits beside the weights
  double tokens_fit = 0;     // per ep group: tokens of KV cache the free memory holds
  int64_t kv_blocks = 0;     // paged KV: floor(tokens_fit / block_tokens) blocks per ep group
  int64_t requests_per_group = 0;  // requests one ep group serves (the decode batch)
  double experts_per_gpu = 0;      // routed experts per MoE layer on one GPU (each 1/tp of it)
  double experts_touched = 0;      // distinct routed experts per MoE layer a decode step reads
  // Prefill of one request, seconds, summed over the pp stages.
  double prefill_compute_s = 0, prefill_offload_s = 0, prefill_overhead_s = 0;
  double prefill_tp_s = 0, prefill_ep_s = 0, prefill_pp_s = 0, prefill_s = 0;
  // One decode step of the group's batch, seconds, summed over the pp stages.
  double decode_weights_s = 0, decode_kv_s = 0, decode_compute_s = 0, decode_offload_s = 0;
  double decode_overhead_s = 0;
  double decode_tp_s = 0, decode_ep_s = 0, decode_pp_s = 0, itl_s = 0;
  double ttft_mean_s = 0, ttft_p95_s = 0;
  double request_s = 0;  // the batch from arrival to its last token: n prefills + decode steps
  double output_tokens_per_s_gpu = 0;
  double usd_per_request = 0, usd_per_million_output_tokens = 0;
};

// Rules of the layout and workload alone (no memory): each message names its flag. Empty = ok.
std::vector<std::string> ServeRuleViolations(const Context& ctx, const ServeLayout& layout,
                                             const ServeWorkload& w);

// A serving Context: the model, cluster and cost parameters with attention at the inference rate
// (CostParams::inference_attention_relative where it is set), the training fit's MoE terms
// (expert_gemm_overhead_s, ep_overlap) and the GPU's training attention factor
// (spec::ClusterSpec::attention_factor) at their defaults, and `train` (only its seq_len is
// read, by the rules). Every serving estimate and simulation is made on one.
Context ServeContext(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                     CostParams params, const spec::TrainSpec& train = {});

// Costs one serving layout. ctx: a ServeContext. fits = no rule broken and one request's KV cache
// fits per GPU beside the weights.
ServeEstimate EstimateServe(const Context& ctx, const ServeLayout& layout, const ServeWorkload& w);

// The tokens of a prompt of `input_tokens` found in the prefix cache: floor(prefix_hit_rate x
// input_tokens), at most input_tokens - 1 (the last prompt token is computed for its logits).
int64_t CachedPrefixTokens(const ServeWorkload& w, int64_t input_tokens);

// Prefill/decode disaggregation: seconds to send one request's prompt KV (w.input_tokens tokens)
// from a prefill replica of `layout` to a decode replica in another node (RDMA, as NIXL and
// Mooncake's transfer engine do): each GPU sends its own shard at its share of the node's NICs
// (the inter-node link of the collectives), plus one message latency. REQUIRES: layout fits.
double KvTransferSeconds(const Context& ctx, const ServeLayout& layout, const ServeWorkload& w);

// One step of a continuous-batching engine (vLLM / SGLang / TensorRT-LLM in-flight batching) on
// one ep group's tp x pp GPUs, summed over the pp stages: decodes (one token each) and prefill
// chunks, all costed as ONE forward pass of their tokens. Each kernel is its own roofline and
// kernels run one after another: the linear layers read the weights once per step (the dense
// weights and the experts the step's tokens touch) or run their GEMMs, whichever is longer; the
// attention kernel reads every scheduled request's KV (its context) or runs its score FLOPs,
// whichever is longer; then the per-layer overhead and the step's TP all-reduces, EP
// all-to-alls and PP sends of all its tokens. A lone prefill step equals EstimateServe's
// prefill_s and a lone decode batch its itl_s whenever the GEMMs of the prefill outlast the
// weight read and the decode is memory-bound (docs/COST_MODEL.md, "Serving simulation").
struct ServeStepCost {
  // Linear layers (every layer's forward but its core attention: GEMMs, elementwise kernels) of
  // a step of linear_tokens[i] tokens take linear_s[i] seconds (ascending; interpolated between),
  // or the weight read, whichever is longer.
  std::vector<double> linear_tokens, linear_s;
  double dense_read_s = 0;          // non-expert weights except the embedding table
  double expert_read_s_one = 0;     // one routed expert of every MoE layer (1/tp of it)
  double expert_offload_s_one = 0;  // the same crossing PCIe, times the miss rate (offloading)
  double experts = 0, top_k = 0, ep = 1;
  // Attention: seconds per (query, key) pair and per token of KV read, for the global and the
  // sliding-window layers (window tokens; 0 = none).
  double attention_s_per_pair_global = 0, attention_s_per_pair_local = 0;
  double kv_s_per_token_global = 0, kv_s_per_token_local = 0;
  double window = 0;
  double overhead_s = 0;  // layers x CostParams::inference_layer_overhead_s
  // The engine's own time (ServeEngineProfile): a step, and a request scheduled in it.
  double step_overhead_s = 0, seq_overhead_s = 0;
  // TP + EP + PP communication of a step of n tokens: comm_fixed_s + comm_s_per_token n.
  double comm_fixed_s = 0, comm_s_per_token = 0;
};
// With w.engine.profile applied (ApplyServeEngineProfile).
ServeStepCost MakeServeStepCost(const Context& ctx, const ServeLayout& layout,
                                const ServeWorkload& w);
// `c` costed with the profile "none" under `profile` instead: attention terms / efficiency, the
// engine's step and per-request times.
ServeStepCost ApplyServeEngineProfile(ServeStepCost c, const ServeEngineProfile& profile);

// The (query, key) pairs a chunk of `tokens` tokens after `prior` cached ones attends to under
// the causal mask (the flash convention of AttentionKeysOf: s^2 / 2 for a whole sequence of s),
// and the same within `window` (0 = none). A decode is a chunk of one token.
double CausalPairs(double prior, double tokens, double window);

// What one step schedules: decodes (one token each) and prefill chunks, summed over requests.
struct ServeStepBatch {
  double tokens = 0;     // scheduled tokens (decodes + prefill chunk tokens)
  double sequences = 0;  // requests scheduled (each decode or prefill chunk is one)
  double pairs_global = 0, pairs_local = 0;          // CausalPairs over the scheduled chunks
  double kv_tokens_global = 0, kv_tokens_local = 0;  // KV tokens read (context incl. the chunk)
};
double ServeStepTime(const ServeStepCost& c, const ServeStepBatch& b);

// Expected distinct experts among `experts` that `tokens` tokens touch when each picks top_k
// distinct experts uniformly: E (1 - (1 - k/E)^T).
double ExpertsTouched(double experts, double top_k, double tokens);

}  // namespace pentamesh::cost

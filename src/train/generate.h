// Generation on the engine: a trained model continues a prompt, one token at a time, with a KV
// cache (model/kv_cache.h). A prefill runs the whole prompt through Stage::ForwardCached (filling
// the cache), then each decode step runs only the newest token at the next position; the next
// token is the argmax of the logits (temperature 0: greedy) or a seeded draw from the tempered,
// top-k / top-p truncated softmax (SampleToken), so a seed reproduces a run.
// Distributed (a mesh): the layout's tp ranks hold their attention/MLP/vocab shards and the ep
// ranks their experts, exactly as in training (the same layers; sequence parallelism off, since a
// decode step has one token); every rank runs the same sequence and world rank 0's choice of each
// token is broadcast, so all ranks agree. pp > 1 and cp > 1 are refused by name.
// Invariant: greedy generation equals recomputing the full sequence at every step without a cache
// (tests/model/kv_cache_test.cc) and equals one process at any tp x ep (tests/mpi).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "comm/communicator.h"
#include "core/allocator.h"
#include "core/status.h"
#include "cost/inference.h"
#include "mesh/mesh.h"
#include "model/stage.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "train/run_config.h"

namespace pentamesh::train {

struct SamplingOptions {
  double temperature = 0;  // 0: greedy (argmax, the lowest id on ties)
  int64_t top_k = 0;       // keep the k most likely tokens; 0 = all
  double top_p = 1;        // then the smallest most-likely set whose probability reaches p; 1 = all
  uint64_t seed = 0;       // the draw of step i is core::CounterRng::Uniform(seed, stream, i)
};

// The token chosen from full-vocabulary logits at generation step `step` (0 = the first new
// token). Pure: the same logits, options and step give the same token.
int32_t SampleToken(std::span<const float> logits, const SamplingOptions& options, int64_t step);

struct GenerateRequest {
  std::vector<int32_t> prompt{};
  int64_t max_new_tokens = 0;
  SamplingOptions sampling{};
  bool keep_logits = false;  // return the logits each new token was chosen from
  int threads = 0;           // this rank's BLAS threads for the run; 0 = OpenBLAS's setting
};

struct GenerateResult {
  std::vector<int32_t> tokens;             // the new tokens, max_new_tokens of them
  std::vector<std::vector<float>> logits;  // keep_logits: (max_new_tokens, V)
  double prefill_ms = 0;                   // the prompt's forward and the first token's choice
  double decode_ms_mean = 0;       // mean of the later steps (one token each); 0 with one token
  double decode_tokens_per_s = 0;  // 1000 / decode_ms_mean (0 with one token)
  double total_ms = 0;             // prefill and every decode step
  double tokens_per_s = 0;         // new tokens / total time
  int64_t kv_cache_bytes = 0;      // this rank's cache (allocator tag kv_cache)
  int64_t kv_cache_tokens = 0;     // its capacity: prompt + max_new_tokens
};

class Generator {
 public:
  // The model of `model` at `layout` (tp, ep; everything else 1) over `world`'s ranks (null: one
  // process), with weights to be set by the caller (params()). Errors name the field: a layout
  // degree the model does not divide (layout: kv_heads=2 must be divisible by tp=4, ...), pp or
  // cp > 1, a rank count that is not the layout's.
  static core::Result<std::unique_ptr<Generator>> Create(const spec::ModelSpec& model,
                                                         const spec::Layout& layout,
                                                         comm::World* world);
  // The same with the weights (and MoE routing biases) of checkpoint `ckpt` (any training
  // layout), whose model is the run config saved in its manifest.
  static core::Result<std::unique_ptr<Generator>> FromCheckpoint(const ckpt::Checkpoint& ckpt,
                                                                 const spec::Layout& layout,
                                                                 comm::World* world);
  // Errors name the field: an empty prompt, a token outside the vocabulary, max_new_tokens < 1,
  // prompt + max_new_tokens beyond model.max_seq_len. Collective over the world.
  core::Result<GenerateResult> Generate(const GenerateRequest& request);

  model::ParamSet& params() { return model_->params(); }
  model::Stage& stage() { return model_->stage(); }
  const spec::ModelSpec& model() const { return spec_; }
  const spec::Layout& layout() const { return layout_; }
  int rank() const { return world_->rank(); }
  int ranks() const { return world_->size(); }

 private:
  Generator() = default;
  spec::ModelSpec spec_;
  spec::Layout layout_;
  std::unique_ptr<comm::Communicator> self_;  // the world of a one-process run
  comm::Communicator* world_ = nullptr;
  std::unique_ptr<mesh::Mesh> mesh_;
  core::Allocator alloc_;
  std::unique_ptr<model::Model> model_;
};

// The generation layout's violations (empty: it runs): the planner's rules on the model that
// concern tp and ep (spec/validate.h), the engine's vocab % tp, and pp, cp, dp = 1.
std::vector<std::string> GenerateLayoutViolations(const spec::ModelSpec& model,
                                                  const spec::Layout& layout, int ranks);

// The inference cost model's prediction for one generation on this host: cost::EstimateServe over
// HostCluster and EngineCostParams of `config` (its model; run.host: the measured host,
// run.threads: each rank's BLAS threads) at `layout`'s tp x ep as one replica, with the rank's
// weight and KV read bandwidth that of its one-row matmuls (HostProfile::WeightReadGbps at
// RankCores cores: the reads are sgemv at the BLAS threads, not the single-threaded kernels;
// CostParams::weight_read_efficiency), prefill the forward pass (cost/inference.h), one request of
// `prompt_tokens` in and `new_tokens` out, FP32 weights and KV cache (the engine's). prefill_s
// predicts GenerateResult::prefill_ms, itl_s its decode_ms_mean (a step's KV read is that of the
// mean context, prompt + new_tokens / 2).
cost::ServeEstimate PredictGeneration(RunConfig config, const spec::Layout& layout,
                                      int64_t prompt_tokens, int64_t new_tokens);

}  // namespace pentamesh::train

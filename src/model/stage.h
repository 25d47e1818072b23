// Stage: the layers one pipeline rank owns for one model chunk: [first_layer, last_layer), plus
// the embedding on the first stage and the head on the last. Forward(mb) stashes what Backward(mb)
// needs, one Stash per in-flight micro-batch, so any schedule (GPipe, 1F1B, interleaved; zero
// bubble through BackwardInput / BackwardWeight) can run it; with pp = 1 the single stage is the
// whole model. Model (below) holds a rank's Stages and their one ParamSet.
// Sequence parallel (shard.sequence_parallel, tp > 1): x_in, x_out, dy_out, dx_in and the
// residual stream hold this rank's ResidualRows = T/tp rows of the micro-batch (tokens and
// targets stay whole), and the norm weight grads are summed over tp (ReduceSequenceParallelGrads,
// or per layer in backward under ZeRO-2/3 hooks).
// Invariant: every Forward(mb) is matched by exactly one Backward(mb) or BackwardInput(mb), which
// frees its stash (BackwardWeight(mb) then runs the deferred weight GEMMs), or by Drop(mb).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "model/block.h"
#include "model/embedding.h"
#include "model/head.h"
#include "model/kv_cache.h"
#include "spec/model_spec.h"

namespace pentamesh::model {

struct StageConfig {
  spec::ModelSpec model;
  int64_t first_layer = 0, last_layer = 0;  // [first, last)
  bool has_embedding = true, has_head = true;
  ShardConfig shard{};
  // Context parallel: the mesh's cp group (null or size 1: none); micro-batches then hold this
  // rank's 2 chunks of every sequence (dims.seq = seq_len / cp local rows).
  comm::Communicator* cp = nullptr;
  spec::CpKind cp_kind = spec::CpKind::kRing;
  // Expert parallel: the mesh's ep group, of size shard.ep_size (null when ep_size is 1).
  comm::Communicator* ep = nullptr;
  // etp = 1 under sequence parallelism (tp > 1): every tp rank routes its own T/tp rows to whole
  // experts over an ep group spanning the tp ranks (mesh/rank_grid.h), so each MoE layer's
  // router, replicated over tp, gets partial grads summed over tp like a norm's.
  bool moe_routes_rank_rows = false;
  // The ranks whose tokens together form a micro-batch's load-balancing statistics (MoeConfig::
  // balance): the cp group, or dp x cp under model.moe.aux_loss_scope = "global"; null = this
  // rank's tokens alone.
  comm::Communicator* balance = nullptr;
  double bias_update_rate = 0;  // aux-loss-free balancing step of every MoE layer (0 = off)
  spec::Recompute recompute = spec::Recompute::kNone;
  bool bf16 = false;  // bf16 weights and activations, fp32 master weights and grads
  double aux_loss_coef = 0.01, z_loss_coef = 0.0;
};

// One micro-batch as the stage sees it. tokens/targets: (T) i32, targets < 0 are ignored.
struct MicroBatch {
  ConstTensor tokens, targets;
  Dims dims;
  float loss_scale = 1.0f;  // 1 / global valid tokens of the step
  float aux_scale = 1.0f;   // tokens of this micro-batch / tokens of the step
};

struct StageForward {
  double loss_sum = 0;  // summed cross-entropy of valid targets (last stage)
  int64_t valid_tokens = 0;
  MoeStats moe;  // summed over this stage's MoE layers
};

class Stage {
 public:
  Stage(const StageConfig& config, ParamSet& params, core::Allocator& alloc);
  // Rows of the residual stream (and of x_in, x_out, dy_out, dx_in) for a micro-batch of `dims`:
  // its tokens, or tokens / tp under sequence parallelism.
  int64_t ResidualRows(Dims dims) const;
  // Under sequence parallelism each tp rank's RMSNorm weight grads cover its own rows only: sums
  // them over tp (one all-reduce of this stage's norm weights). Call once per step after the
  // last Backward, before the optimizer reads the grads; a no-op without SP.
  void ReduceSequenceParallelGrads();
  // The same for several stages of one ParamSet (a pipeline rank's chunks): one all-reduce of
  // all their norm weight grads, as the cost model counts it (one per step per pp rank).
  static void ReduceSequenceParallelGrads(const std::vector<Stage*>& stages);
  // First stage reads mb.tokens, otherwise x_in (T, H). Non-last stages write x_out (T, H).
  StageForward Forward(int64_t mb_id, const MicroBatch& mb, ConstTensor x_in, Tensor x_out);
  // Last stage ignores dy_out; non-first stages write dx_in (T, H).
  void Backward(int64_t mb_id, ConstTensor dy_out, Tensor dx_in);
  // Zero-bubble split of Backward: BackwardInput ("B") computes dx_in and the norm/embedding
  // grads, frees the forward stash and keeps what the weight GEMMs need; BackwardWeight ("W")
  // runs those GEMMs into the grads. B then W equals Backward (tests/model).
  void BackwardInput(int64_t mb_id, ConstTensor dy_out, Tensor dx_in);
  void BackwardWeight(int64_t mb_id);
  // Generation: runs the N new tokens (N) i32 of one sequence through the whole model, reading
  // and extending `cache` (their positions start at cache.length(); the cache advances by N),
  // and writes the next-token logits of the LAST of them, all V of the vocabulary, into
  // logits (V) (the tp ranks' vocab shards all-gathered, so every rank holds them). No stash,
  // no grads. REQUIRES: the whole model (embedding and head), sp=off, cp=1; every rank of the tp
  // and ep groups calls it with the same tokens.
  void ForwardCached(ConstTensor tokens, KvCache& cache, Tensor logits);
  // A KV cache for this stage's layers: `capacity` tokens of this rank's kv heads.
  KvCache NewKvCache(int64_t capacity) const;
  // Drops a micro-batch's stash without backward (evaluation).
  void Drop(int64_t mb_id) { stashes_.erase(mb_id); }
  // The logits of a micro-batch between its Forward and Backward (for tests and eval).
  ConstTensor logits(int64_t mb_id) const;
  int64_t in_flight() const { return static_cast<int64_t>(stashes_.size()); }
  // Micro-batches between BackwardInput and BackwardWeight.
  int64_t pending_weight() const { return static_cast<int64_t>(deferred_.size()); }
  const StageConfig& config() const { return config_; }
  // Aux-loss-free balancing: the routed counts accumulated by Forward since the last call, one
  // (E) vector per block of the stage (empty for dense blocks), and the bias update of each MoE
  // block from such counts once the caller has summed them over the ranks sharing the router.
  // Take clears the accumulated counts.
  std::vector<std::vector<int64_t>> TakeRoutedPerMoeLayer();
  void UpdateMoeBias(const std::vector<std::vector<int64_t>>& routed);
  // The MoE layers of this stage as (global layer index, layer) (checkpoints save their bias).
  std::vector<std::pair<int64_t, Moe*>> MoeLayers();
  // ZeRO-2/3: called around every layer (model/param_set.h ParamHooks); null = none. The hooks
  // outlive the Stage. BackwardInput parks each layer's grads; BackwardWeight finishes them.
  void SetParamHooks(ParamHooks* hooks) { hooks_ = hooks; }

 private:
  struct Stash {
    MicroBatch mb;
    std::vector<int32_t> tokens, targets;  // copies, so the caller's batch may be reused
    std::vector<Block::Saved> blocks;
    core::Buffer out;  // (T, H) output of the last block (head input)
    Head::Saved head;
  };
  LayerContext Context(const MicroBatch& mb) const;
  void RunBackward(int64_t mb_id, ConstTensor dy_out, Tensor dx_in, DeferredWeightGrads* deferred);
  StageConfig config_;
  ParamSet& params_;
  core::Allocator& alloc_;
  std::unique_ptr<comm::Communicator> own_tp_;  // the one-rank tp group when none was given
  std::unique_ptr<Embedding> embedding_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<Head> head_;
  std::map<int64_t, Stash> stashes_;
  std::map<int64_t, DeferredWeightGrads> deferred_;
  std::vector<std::vector<int64_t>> routed_;  // per MoE layer, since TakeRoutedPerMoeLayer
  bool sequence_parallel_ = false;
  std::vector<ParamId> norm_weights_;  // tp-replicated weights that see sequence-sharded rows
  ParamHooks* hooks_ = nullptr;
  int32_t embedding_unit_ = -1, head_unit_ = -1;  // ParamSet units (ParamSet::BeginUnit)
  std::vector<int32_t> block_units_;
  void Acquire(int32_t unit, Pass pass) {
    if (hooks_ && unit >= 0) hooks_->Acquire(unit, pass);
  }
  void Release(int32_t unit, Pass pass) {
    if (hooks_ && unit >= 0) hooks_->Release(unit, pass);
  }
  // End of a layer's backward: Release, or Park for W when the weight grads are deferred.
  void ReleaseBackward(int32_t unit, int64_t mb_id, bool deferred) {
    if (!hooks_ || unit < 0) return;
    if (deferred) {
      hooks_->Park(unit, mb_id);
    } else {
      hooks_->Release(unit, Pass::kBackward);
    }
  }
  // SP: all-reduces over tp the norm weight grads of `unit` (-1: of every unit). With ZeRO-2/3
  // hooks, once per layer per micro-batch just before the layer's grads are reduce-scattered.
  void ReduceNormGrads(int32_t unit);
  // Sums the grads of `ids` (norm weights of this ParamSet) over tp in one all-reduce.
  void AllReduceOverTp(const std::vector<ParamId>& ids);
  // The embedding's unit when the head reads it (tied), else -1.
  int32_t TiedUnit() const { return config_.model.tied_embeddings ? embedding_unit_ : -1; }
};

// Checks that the engine implements the model itself (SwiGLU, even head_dim for RoPE, kv_heads
// dividing heads, positive sizes); what a layout needs of it is train/engine_rules.h's.
core::Status CheckSupported(const spec::ModelSpec& model);

// The model of one process: a ParamSet and its Stages. The first constructor holds the whole
// model (one Stage over all layers); the second the given chunks (a pipeline rank's virtual
// stages, in chunk order), all in one ParamSet.
class Model {
 public:
  Model(const StageConfig& config, core::Allocator& alloc, const ParamLayout& param_layout = {});
  Model(const std::vector<StageConfig>& chunks, core::Allocator& alloc,
        const ParamLayout& param_layout = {});
  ParamSet& params() { return params_; }
  Stage& stage() { return *stages_.front(); }
  Stage& chunk(size_t c) { return *stages_.at(c); }
  size_t chunks() const { return stages_.size(); }
  // Stage::ReduceSequenceParallelGrads over every chunk (one all-reduce); once per step.
  void ReduceSequenceParallelGrads();

 private:
  ParamSet params_;
  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace pentamesh::model

#include "model/stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "comm/communicator.h"
#include "kernels/cpu/elementwise.h"

namespace pentamesh::model {
namespace {

BlockConfig MakeBlockConfig(const StageConfig& c, int64_t layer) {
  const spec::ModelSpec& m = c.model;
  const double std_out = 0.02 / std::sqrt(2.0 * static_cast<double>(m.layers));
  BlockConfig b;
  b.attention = {.hidden = m.hidden,
                 .heads = m.heads,
                 .kv_heads = m.kv_heads,
                 .head_dim = m.head_dim,
                 .rope_theta = m.rope_theta,
                 .rope_scaling = m.rope_scaling,
                 .max_seq = m.max_seq_len,
                 .std_out = std_out,
                 .shard = c.shard,
                 .cp = c.cp,
                 .cp_kind = c.cp_kind};
  b.moe = m.IsMoeLayer(layer);
  b.ffn_hidden = m.ffn_hidden;
  b.moe_config = {.hidden = m.hidden,
                  .experts = m.moe.experts,
                  .top_k = m.moe.top_k,
                  .expert_ffn = m.moe.expert_ffn_hidden,
                  .shared_ffn = m.moe.shared_experts * m.moe.expert_ffn_hidden,
                  .capacity_factor = m.moe.capacity_factor,
                  .aux_loss_coef = c.aux_loss_coef,
                  .z_loss_coef = c.z_loss_coef,
                  .std_out = std_out,
                  .bias_update_rate = c.bias_update_rate,
                  .router = m.moe.router,
                  .shard = c.shard,
                  .ep = c.shard.ep_size > 1 ? c.ep : nullptr,
                  .balance = c.balance,
                  .routes_rank_rows = c.moe_routes_rank_rows};
  b.norm_eps = m.norm_eps;
  b.recompute = c.recompute;
  return b;
}

}  // namespace

core::Status CheckSupported(const spec::ModelSpec& m) {
  std::vector<std::string> errors;
  if (m.activation != spec::Activation::kSwiGLU)
    errors.push_back("model.activation: the engine implements swiglu only");
  if (m.is_mla())
    errors.push_back(
        "model.mla: the engine implements grouped-query attention only, not multi-head latent "
        "attention (the cost model costs it: estimate, plan)");
  if (m.sliding_window > 0)
    errors.push_back(fmt::format(
        "model.sliding_window: {} but the engine implements full causal attention only (the cost "
        "model costs it: estimate, plan)",
        m.sliding_window));
  if (m.head_dim % 2 != 0)
    errors.push_back(fmt::format("model.head_dim: {} must be even for RoPE", m.head_dim));
  if (m.kv_heads <= 0 || m.heads <= 0 || m.heads % m.kv_heads != 0)
    errors.push_back(fmt::format("model.kv_heads: {} must be positive and divide heads={}",
                                 m.kv_heads, m.heads));
  if (m.hidden <= 0 || m.layers <= 0 || m.vocab <= 0)
    errors.push_back("model: layers, hidden and vocab must be positive");
  const spec::RopeScaling& rope = m.rope_scaling;
  if (rope.kind == spec::RopeScalingKind::kYarn)
    errors.push_back(
        "model.rope_scaling: yarn but the engine implements none, base and llama3 only (the cost "
        "model costs it: RoPE's frequencies change no FLOP)");
  if (rope.kind == spec::RopeScalingKind::kLlama3 &&
      !(rope.factor >= 1 && rope.original_max_positions > 0 && rope.low_freq_factor > 0 &&
        rope.high_freq_factor > rope.low_freq_factor))
    errors.push_back(fmt::format(
        "model.rope_scaling: llama3 needs factor >= 1, original_max_positions > 0 and "
        "high_freq_factor > low_freq_factor > 0 (got factor={}, original_max_positions={}, "
        "low_freq_factor={}, high_freq_factor={})",
        rope.factor, rope.original_max_positions, rope.low_freq_factor, rope.high_freq_factor));
  if (!(m.rope_theta > 0) || rope.theta < 0)
    errors.push_back(fmt::format("model.rope_theta: {} must be positive", m.rope_theta));
  if (errors.empty()) return core::Status::Ok();
  std::string msg = "model not supported by the engine:";
  for (const auto& e : errors) msg += "\n  " + e;
  return core::Status::Error(msg);
}

Stage::Stage(const StageConfig& c, ParamSet& params, core::Allocator& alloc)
    : config_(c), params_(params), alloc_(alloc) {
  if (config_.shard.tp_comm == nullptr) {
    PM_CHECK(c.shard.tp_size == 1) << "tp=" << c.shard.tp_size << " needs shard.tp_comm";
    own_tp_ = std::make_unique<comm::SelfCommunicator>("tp", 0);
    config_.shard.tp_comm = own_tp_.get();
  }
  PM_CHECK(config_.shard.tp_comm->size() == c.shard.tp_size &&
           config_.shard.tp_comm->rank() == c.shard.tp_rank)
      << "shard tp " << c.shard.tp_rank << "/" << c.shard.tp_size << " vs tp group "
      << config_.shard.tp_comm->Describe();
  const StageConfig& cs = config_;
  const spec::ModelSpec& m = c.model;
  PM_CHECK(0 <= c.first_layer && c.first_layer <= c.last_layer && c.last_layer <= m.layers)
      << "layers [" << c.first_layer << ", " << c.last_layer << ") of " << m.layers;
  PM_CHECK(c.shard.ep_size == 1 ||
           (c.ep != nullptr && c.ep->size() == c.shard.ep_size && c.ep->rank() == c.shard.ep_rank))
      << "shard ep " << c.shard.ep_rank << "/" << c.shard.ep_size << " needs the ep group";
  if (c.has_embedding) {
    embedding_unit_ = params.BeginUnit();
    embedding_ =
        std::make_unique<Embedding>(params, "embedding.weight", m.vocab, m.hidden, cs.shard);
  }
  for (int64_t l = c.first_layer; l < c.last_layer; ++l) {
    block_units_.push_back(params.BeginUnit());
    blocks_.push_back(std::make_unique<Block>(params, l, MakeBlockConfig(cs, l)));
  }
  if (c.has_head) {
    PM_CHECK(!m.tied_embeddings || embedding_) << "a tied head needs the embedding on its stage";
    head_unit_ = params.BeginUnit();
    head_ = std::make_unique<Head>(params, m.hidden, m.vocab, m.norm_eps,
                                   m.tied_embeddings ? embedding_->weight() : -1, cs.shard);
  }
  sequence_parallel_ = cs.shard.sequence_parallel && cs.shard.tp_size > 1;
  for (const auto& block : blocks_) {
    for (ParamId id : block->norm_weights()) norm_weights_.push_back(id);
    if (sequence_parallel_ && cs.moe_routes_rank_rows && block->moe() != nullptr)
      norm_weights_.push_back(block->moe()->router_weight());
  }
  if (head_) norm_weights_.push_back(head_->norm_weight());
}

int64_t Stage::ResidualRows(Dims dims) const {
  return sequence_parallel_ ? dims.tokens() / config_.shard.tp_size : dims.tokens();
}

void Stage::ReduceSequenceParallelGrads() { ReduceSequenceParallelGrads({this}); }

void Stage::ReduceSequenceParallelGrads(const std::vector<Stage*>& stages) {
  // With ZeRO-2/3 hooks the grads exist per layer only: ReduceUnitNormGrads did it per layer.
  std::vector<ParamId> ids;
  for (const Stage* stage : stages) {
    if (!stage->sequence_parallel_ || stage->hooks_) continue;
    PM_CHECK(&stage->params_ == &stages.front()->params_) << "stages of different ParamSets";
    ids.insert(ids.end(), stage->norm_weights_.begin(), stage->norm_weights_.end());
  }
  if (!ids.empty()) stages.front()->AllReduceOverTp(ids);
}

void Stage::ReduceNormGrads(int32_t unit) {
  if (!sequence_parallel_) return;
  std::vector<ParamId> ids;
  for (ParamId id : norm_weights_) {
    if (unit < 0 || params_.unit_of(id) == unit) ids.push_back(id);
  }
  AllReduceOverTp(ids);
}

void Stage::AllReduceOverTp(const std::vector<ParamId>& ids) {
  if (ids.empty()) return;
  std::vector<float> packed;
  for (ParamId id : ids) {
    const Tensor g = params_.grad(id);
    packed.insert(packed.end(), g.f32(), g.f32() + g.numel());
  }
  config_.shard.tp_comm->all_reduce(packed.data(), static_cast<int64_t>(packed.size()),
                                    core::Dtype::kF32);
  const float* src = packed.data();
  for (ParamId id : ids) {
    const Tensor g = params_.grad(id);
    std::copy(src, src + g.numel(), g.f32());
    src += g.numel();
  }
}

LayerContext Stage::Context(const MicroBatch& mb) const {
  return {.alloc = &alloc_, .bf16 = config_.bf16, .aux_scale = mb.aux_scale};
}

StageForward Stage::Forward(int64_t mb_id, const MicroBatch& mb, ConstTensor x_in, Tensor x_out) {
  PM_CHECK(!stashes_.count(mb_id)) << "micro-batch " << mb_id << " already in flight";
  const int64_t T = mb.dims.tokens(), H = config_.model.hidden;
  PM_CHECK(mb.tokens.numel() == T && mb.targets.numel() == T) << "micro-batch tokens";
  PM_CHECK(mb.dims.seq <= config_.model.max_seq_len) << "seq " << mb.dims.seq << " > max_seq_len";
  PM_CHECK(!sequence_parallel_ || T % config_.shard.tp_size == 0)
      << "sequence parallel: " << T << " tokens not divisible by tp=" << config_.shard.tp_size;
  Stash& st = stashes_[mb_id];
  st.tokens.assign(mb.tokens.i32(), mb.tokens.i32() + T);
  st.targets.assign(mb.targets.i32(), mb.targets.i32() + T);
  st.mb = mb;
  st.mb.tokens = ConstTensor(core::Tensor(st.tokens.data(), core::Dtype::kI32, {T}));
  st.mb.targets = ConstTensor(core::Tensor(st.targets.data(), core::Dtype::kI32, {T}));
  const LayerContext ctx = Context(mb);
  StageForward result;
  const int64_t rows = ResidualRows(mb.dims);
  core::Buffer a = NewBuffer(ctx, core::MemTag::kOther, {rows, H});
  core::Buffer b = NewBuffer(ctx, core::MemTag::kOther, {rows, H});
  if (embedding_) {
    Acquire(embedding_unit_, Pass::kForward);
    embedding_->Forward(a.view(), st.mb.tokens, ctx);
    Release(embedding_unit_, Pass::kForward);
  } else {
    kernels::copy(a.view(), x_in);
  }
  st.blocks.resize(blocks_.size());
  routed_.resize(blocks_.size());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    Acquire(block_units_[l], Pass::kForward);
    MoeStats layer;
    blocks_[l]->Forward(b.view(), st.blocks[l], a.view(), mb.dims, ctx, &layer);
    Release(block_units_[l], Pass::kForward);
    if (!layer.routed.empty()) {
      result.moe.Add(layer);
      std::vector<int64_t>& sum = routed_[l];
      sum.resize(layer.routed.size(), 0);
      for (size_t e = 0; e < sum.size(); ++e) sum[e] += layer.routed[e];
    }
    std::swap(a, b);
  }
  if (head_) {
    st.out = NewBuffer(ctx, ctx.RoundedStashTag(core::MemTag::kActivations), {rows, H});
    kernels::copy(st.out.view(), a.view());
    Acquire(head_unit_, Pass::kForward);
    Acquire(TiedUnit(), Pass::kForward);
    result.loss_sum = head_->Forward(st.head, st.out.view(), st.mb.targets, ctx);
    Release(TiedUnit(), Pass::kForward);
    Release(head_unit_, Pass::kForward);
    if (ctx.bf16) {  // both hold bf16-rounded values: store them as bf16
      CompactToBf16(st.out);
      CompactToBf16(st.head.xn);
    }
    for (int32_t t : st.targets) result.valid_tokens += t >= 0 ? 1 : 0;
  } else {
    kernels::copy(x_out, a.view());
  }
  return result;
}

KvCache Stage::NewKvCache(int64_t capacity) const {
  const spec::ModelSpec& m = config_.model;
  return KvCache(alloc_, static_cast<int64_t>(blocks_.size()), capacity,
                 m.kv_heads / config_.shard.tp_size, m.head_dim);
}

void Stage::ForwardCached(ConstTensor tokens, KvCache& cache, Tensor logits) {
  PM_CHECK(embedding_ && head_) << "ForwardCached needs the whole model on one stage (pp=1)";
  PM_CHECK(!sequence_parallel_) << "ForwardCached needs sp=off";
  PM_CHECK(config_.cp == nullptr || config_.cp->size() == 1) << "ForwardCached needs cp=1";
  PM_CHECK(cache.layers() == static_cast<int64_t>(blocks_.size())) << "cache layers";
  const int64_t N = tokens.numel(), H = config_.model.hidden, V = config_.model.vocab;
  const int64_t pos0 = cache.length();
  PM_CHECK(N > 0 && pos0 + N <= cache.capacity() && pos0 + N <= config_.model.max_seq_len)
      << "positions " << pos0 << " + " << N << " beyond cache " << cache.capacity()
      << " or max_seq_len " << config_.model.max_seq_len;
  PM_CHECK(logits.numel() == V) << "logits " << logits.shape().ToString();
  const LayerContext ctx{.alloc = &alloc_};
  core::Buffer a = NewBuffer(ctx, core::MemTag::kOther, {N, H});
  core::Buffer b = NewBuffer(ctx, core::MemTag::kOther, {N, H});
  embedding_->Forward(a.view(), tokens, ctx);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const int64_t layer = static_cast<int64_t>(l);
    blocks_[l]->ForwardCached(b.view(), a.view(), cache.k(layer), cache.v(layer), pos0, ctx);
    std::swap(a, b);
  }
  cache.Advance(N);
  // The head on the last token only: its (1, V/tp) logits, then the tp ranks' vocab shards.
  std::vector<int32_t> ignore{-1};
  Head::Saved head;
  head_->Forward(head, a.view().Rows(N - 1, N),
                 ConstTensor(core::Tensor(ignore.data(), core::Dtype::kI32, {1})), ctx);
  const ConstTensor local = head.logits.view();
  config_.shard.tp_comm->all_gather(logits.data(), local.f32(), local.numel(), core::Dtype::kF32);
}

void Stage::Backward(int64_t mb_id, ConstTensor dy_out, Tensor dx_in) {
  RunBackward(mb_id, dy_out, dx_in, nullptr);
}

void Stage::BackwardInput(int64_t mb_id, ConstTensor dy_out, Tensor dx_in) {
  PM_CHECK(!deferred_.count(mb_id)) << "BackwardInput of micro-batch " << mb_id << " twice";
  RunBackward(mb_id, dy_out, dx_in, &deferred_[mb_id]);
}

void Stage::BackwardWeight(int64_t mb_id) {
  auto it = deferred_.find(mb_id);
  PM_CHECK(it != deferred_.end()) << "BackwardWeight of micro-batch " << mb_id
                                  << " without BackwardInput";
  it->second.Run();
  deferred_.erase(it);
  if (!hooks_) return;
  // In the order BackwardInput parked them (collectives stay in the same order on every rank).
  if (head_ && head_unit_ >= 0) hooks_->FinishWeightGrads(head_unit_, mb_id);
  for (size_t l = blocks_.size(); l-- > 0;) {
    if (block_units_[l] >= 0) hooks_->FinishWeightGrads(block_units_[l], mb_id);
  }
  if (embedding_ && embedding_unit_ >= 0) hooks_->FinishWeightGrads(embedding_unit_, mb_id);
}

void Stage::RunBackward(int64_t mb_id, ConstTensor dy_out, Tensor dx_in,
                        DeferredWeightGrads* deferred) {
  auto it = stashes_.find(mb_id);
  PM_CHECK(it != stashes_.end()) << "Backward of micro-batch " << mb_id << " without Forward";
  Stash& st = it->second;
  LayerContext ctx = Context(st.mb);
  ctx.deferred = deferred;
  const bool defer = deferred != nullptr;
  const int64_t rows = ResidualRows(st.mb.dims), H = config_.model.hidden;
  core::Buffer dy = NewBuffer(ctx, core::MemTag::kOther, {rows, H});
  core::Buffer dx = NewBuffer(ctx, core::MemTag::kOther, {rows, H});
  if (head_) {
    ExpandToF32(st.out);
    ExpandToF32(st.head.xn);
    Acquire(head_unit_, Pass::kBackward);
    Acquire(TiedUnit(), Pass::kBackward);  // held until the embedding's backward
    head_->Backward(dy.view(), st.out.view(), st.mb.targets, st.head, st.mb.loss_scale, ctx);
    if (hooks_) ReduceNormGrads(head_unit_);
    ReleaseBackward(head_unit_, mb_id, defer);
    st.out.Release();
  } else {
    kernels::copy(dy.view(), dy_out);
  }
  for (size_t l = blocks_.size(); l-- > 0;) {
    Acquire(block_units_[l], Pass::kBackward);
    blocks_[l]->Backward(dx.view(), dy.view(), st.blocks[l], st.mb.dims, ctx);
    if (hooks_) ReduceNormGrads(block_units_[l]);  // SP: this micro-batch's norm grads over tp
    ReleaseBackward(block_units_[l], mb_id, defer);
    std::swap(dx, dy);
  }
  if (embedding_) {
    Acquire(embedding_unit_, Pass::kBackward);
    embedding_->Backward(dy.view(), st.mb.tokens, ctx);
    ReleaseBackward(embedding_unit_, mb_id, defer);
    if (head_) ReleaseBackward(TiedUnit(), mb_id, defer);
  } else {
    kernels::copy(dx_in, dy.view());
  }
  stashes_.erase(it);
}

std::vector<std::vector<int64_t>> Stage::TakeRoutedPerMoeLayer() {
  std::vector<std::vector<int64_t>> out(blocks_.size());
  for (size_t l = 0; l < blocks_.size(); ++l) {
    if (blocks_[l]->moe() != nullptr)
      out[l].assign(static_cast<size_t>(config_.model.moe.experts), 0);
    if (l < routed_.size() && !routed_[l].empty()) out[l] = routed_[l];
  }
  routed_.clear();
  return out;
}

void Stage::UpdateMoeBias(const std::vector<std::vector<int64_t>>& routed) {
  PM_CHECK(routed.size() == blocks_.size()) << "UpdateMoeBias: " << routed.size() << " layers";
  for (size_t l = 0; l < blocks_.size(); ++l) {
    Moe* moe = blocks_[l]->moe();
    if (moe == nullptr) continue;
    MoeStats step;
    step.routed = routed[l];
    moe->UpdateBias(step);
  }
}

std::vector<std::pair<int64_t, Moe*>> Stage::MoeLayers() {
  std::vector<std::pair<int64_t, Moe*>> out;
  for (size_t l = 0; l < blocks_.size(); ++l) {
    if (Moe* moe = blocks_[l]->moe())
      out.emplace_back(config_.first_layer + static_cast<int64_t>(l), moe);
  }
  return out;
}

ConstTensor Stage::logits(int64_t mb_id) const {
  auto it = stashes_.find(mb_id);
  PM_CHECK(it != stashes_.end() && !it->second.head.logits.empty()) << "no logits for " << mb_id;
  return it->second.head.logits.view();
}

Model::Model(const StageConfig& config, core::Allocator& alloc, const ParamLayout& param_layout)
    : params_(alloc, config.bf16 ? core::Dtype::kBF16 : core::Dtype::kF32) {
  StageConfig c = config;
  c.first_layer = 0;
  c.last_layer = c.model.layers;
  c.has_embedding = c.has_head = true;
  stages_.push_back(std::make_unique<Stage>(c, params_, alloc));
  params_.Finalize(param_layout);
}

Model::Model(const std::vector<StageConfig>& chunks, core::Allocator& alloc,
             const ParamLayout& param_layout)
    : params_(alloc, chunks.at(0).bf16 ? core::Dtype::kBF16 : core::Dtype::kF32) {
  for (const StageConfig& c : chunks) stages_.push_back(std::make_unique<Stage>(c, params_, alloc));
  params_.Finalize(param_layout);
}

void Model::ReduceSequenceParallelGrads() {
  std::vector<Stage*> stages;
  for (const auto& stage : stages_) stages.push_back(stage.get());
  Stage::ReduceSequenceParallelGrads(stages);
}

}  // namespace pentamesh::model

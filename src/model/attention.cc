#include "model/attention.h"

#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/matmul.h"
#include "model/regions.h"
#include "model/rope_frequencies.h"

namespace pentamesh::model {

Attention::Attention(ParamSet& params, const std::string& prefix, const AttentionConfig& c)
    : params_(params),
      config_(c),
      ends_(*c.shard.tp_comm, c.shard.sequence_parallel),
      heads_local_(c.heads / c.shard.tp_size),
      kv_heads_local_(c.kv_heads / c.shard.tp_size),
      rope_(c.max_seq, RopeInverseFrequencies(c.head_dim, c.rope_theta, c.rope_scaling)) {
  const int64_t H = c.hidden, D = c.head_dim;
  const Sharding column{
      .dim = 0, .axis = MeshAxis::kTp, .size = c.shard.tp_size, .rank = c.shard.tp_rank};
  const Sharding row{
      .dim = 1, .axis = MeshAxis::kTp, .size = c.shard.tp_size, .rank = c.shard.tp_rank};
  const InitRule init{.kind = InitKind::kNormal, .std = 0.02};
  wq_ = params.Add(prefix + ".wq", {c.heads * D, H}, column, init, true);
  wk_ = params.Add(prefix + ".wk", {c.kv_heads * D, H}, column, init, true);
  wv_ = params.Add(prefix + ".wv", {c.kv_heads * D, H}, column, init, true);
  wo_ = params.Add(prefix + ".wo", {H, c.heads * D}, row,
                   {.kind = InitKind::kNormal, .std = c.std_out}, true);
}

void Attention::Rope(Tensor x, Dims dims, bool inverse) const {
  auto apply = [&](Tensor rows, int64_t seq, int64_t pos0) {
    if (inverse) {
      kernels::rope_backward(rows, rows, rope_, seq, pos0);
    } else {
      kernels::rope_forward(rows, rows, rope_, seq, pos0);
    }
  };
  if (!context_parallel()) return apply(x, dims.seq, 0);
  const int cp = config_.cp->size(), rank = config_.cp->rank();
  const int64_t chunk = dims.seq / 2;
  for (int64_t b = 0; b < dims.batch; ++b) {
    const int64_t row = b * dims.seq;
    apply(x.Rows(row, row + chunk), chunk, rank * chunk);
    apply(x.Rows(row + chunk, row + 2 * chunk), chunk, (2 * cp - 1 - rank) * chunk);
  }
}

CpAttentionDims Attention::CpDims(Dims dims) const {
  return {.batch = dims.batch,
          .seq = dims.seq * config_.cp->size(),
          .heads = heads_local_,
          .kv_heads = kv_heads_local_,
          .head_dim = config_.head_dim};
}

kernels::AttentionDims Attention::LocalDims(Dims dims) const {
  return {.batch = dims.batch,
          .seq = dims.seq,
          .heads = heads_local_,
          .kv_heads = kv_heads_local_,
          .head_dim = config_.head_dim};
}

void Attention::Internals(Saved& s, ConstTensor x, Dims dims, const LayerContext& ctx,
                          core::MemTag tag) const {
  const int64_t T = dims.tokens(), A = heads_local_, K = kv_heads_local_, D = config_.head_dim;
  const core::MemTag rounded = ctx.RoundedStashTag(tag);
  s.q = NewBuffer(ctx, rounded, {T, A, D});
  s.k = NewBuffer(ctx, rounded, {T, K, D});
  s.v = NewBuffer(ctx, rounded, {T, K, D});
  s.o = NewBuffer(ctx, rounded, {T, A, D});
  if (!context_parallel()) s.lse = NewBuffer(ctx, tag, {dims.batch, A, dims.seq});
  kernels::linear_forward(s.q.view().Reshape({T, A * D}), x, params_.weight(wq_));
  kernels::linear_forward(s.k.view().Reshape({T, K * D}), x, params_.weight(wk_));
  kernels::linear_forward(s.v.view().Reshape({T, K * D}), x, params_.weight(wv_));
  Rope(s.q.view(), dims, false);
  Rope(s.k.view(), dims, false);
  RoundActivation(ctx, s.q.view());
  RoundActivation(ctx, s.k.view());
  RoundActivation(ctx, s.v.view());
  if (context_parallel()) {
    CpAttentionForward(s.o.view(), s.cp, s.q.view(), s.k.view(), s.v.view(), CpDims(dims),
                       config_.cp_kind, *config_.cp, *ctx.alloc);
  } else {
    kernels::attention_forward(s.o.view(), s.lse.view(), s.q.view(), s.k.view(), s.v.view(),
                               LocalDims(dims));
  }
  RoundActivation(ctx, s.o.view());
}

void Attention::Forward(Tensor y, Saved& saved, ConstTensor x, Dims dims, const LayerContext& ctx,
                        bool keep_internals) const {
  Saved local;
  Saved& s = keep_internals ? saved : local;
  {
    core::Buffer gathered;
    Internals(s, ends_.Gather(ctx, x, gathered), dims, ctx,
              keep_internals ? core::MemTag::kActivations : core::MemTag::kOther);
  }
  if (context_parallel() && config_.cp_kind == spec::CpKind::kUlysses) {
    // The Ulysses core stashed head-sharded copies; backward reads only o of these (for Wo).
    s.q.Release();
    s.k.Release();
    s.v.Release();
  }
  const int64_t T = dims.tokens();
  core::Buffer partial;
  const Tensor y_full = ends_.PartialFor(ctx, y, partial);
  kernels::linear_forward(y_full, s.o.view().Reshape({T, heads_local_ * config_.head_dim}),
                          params_.weight(wo_));
  ends_.Sum(y, y_full);
  RoundActivation(ctx, y);
}

void Attention::ForwardCached(Tensor y, ConstTensor x, Tensor k_cache, Tensor v_cache, int64_t pos0,
                              const LayerContext& ctx) const {
  PM_CHECK(!ends_.sequence_parallel()) << "cached attention needs sp=off";
  PM_CHECK(!context_parallel()) << "cached attention needs cp=1";
  const int64_t N = x.dim(0), A = heads_local_, K = kv_heads_local_, D = config_.head_dim;
  PM_CHECK(k_cache.dim(1) == K && k_cache.dim(2) == D) << "cache " << k_cache.shape().ToString();
  PM_CHECK(pos0 + N <= k_cache.dim(0)) << "pos0=" << pos0 << " + " << N << " > cache rows";
  core::Buffer q = NewBuffer(ctx, core::MemTag::kOther, {N, A, D});
  const Tensor k = k_cache.Rows(pos0, pos0 + N), v = v_cache.Rows(pos0, pos0 + N);
  kernels::linear_forward(q.view().Reshape({N, A * D}), x, params_.weight(wq_));
  kernels::linear_forward(k.Reshape({N, K * D}), x, params_.weight(wk_));
  kernels::linear_forward(v.Reshape({N, K * D}), x, params_.weight(wv_));
  kernels::rope_forward(q.view(), q.view(), rope_, N, pos0);
  kernels::rope_forward(k, k, rope_, N, pos0);
  core::Buffer o = NewBuffer(ctx, core::MemTag::kOther, {N, A, D});
  kernels::attention_cached(o.view(), q.view(), k_cache.Rows(0, pos0 + N),
                            v_cache.Rows(0, pos0 + N),
                            {.queries = N, .pos0 = pos0, .heads = A, .kv_heads = K, .head_dim = D});
  kernels::linear_forward(y, o.view().Reshape({N, A * D}), params_.weight(wo_));
  ends_.Sum(y, y);
}

void Attention::Backward(Tensor dx, ConstTensor dy_rows, ConstTensor x_rows, Saved& saved,
                         Dims dims, const LayerContext& ctx) const {
  core::Buffer dy_gathered, x_gathered;
  const ConstTensor dy = ends_.Gather(ctx, dy_rows, dy_gathered);
  const ConstTensor x = ends_.Gather(ctx, x_rows, x_gathered);
  if (saved.empty()) Internals(saved, x, dims, ctx, core::MemTag::kOther);  // selective recompute
  const int64_t T = dims.tokens(), A = heads_local_, K = kv_heads_local_, D = config_.head_dim;
  ConstTensor o2d = saved.o.view().Reshape({T, A * D});
  WeightGradGemm(ctx, params_.grad(wo_), dy, o2d);
  core::Buffer dq = NewBuffer(ctx, core::MemTag::kOther, {T, A, D});
  core::Buffer dk = NewBuffer(ctx, core::MemTag::kOther, {T, K, D});
  core::Buffer dv = NewBuffer(ctx, core::MemTag::kOther, {T, K, D});
  {
    core::Buffer d_o = NewBuffer(ctx, core::MemTag::kOther, {T, A, D});
    kernels::linear_backward_input(d_o.view().Reshape({T, A * D}), dy, params_.weight(wo_));
    if (context_parallel()) {
      CpAttentionBackward(dq.view(), dk.view(), dv.view(), d_o.view(), saved.q.view(),
                          saved.k.view(), saved.v.view(), saved.o.view(), saved.cp, CpDims(dims),
                          config_.cp_kind, *config_.cp, *ctx.alloc);
    } else {
      kernels::attention_backward(dq.view(), dk.view(), dv.view(), d_o.view(), saved.q.view(),
                                  saved.k.view(), saved.v.view(), saved.o.view(), saved.lse.view(),
                                  LocalDims(dims));
    }
  }
  Rope(dq.view(), dims, true);
  Rope(dk.view(), dims, true);
  ConstTensor dq2 = dq.view().Reshape({T, A * D}), dk2 = dk.view().Reshape({T, K * D}),
              dv2 = dv.view().Reshape({T, K * D});
  WeightGradGemm(ctx, params_.grad(wq_), dq2, x);
  WeightGradGemm(ctx, params_.grad(wk_), dk2, x);
  WeightGradGemm(ctx, params_.grad(wv_), dv2, x);
  core::Buffer partial;
  const Tensor dx_full = ends_.PartialFor(ctx, dx, partial);
  kernels::linear_backward_input(dx_full, dq2, params_.weight(wq_));
  kernels::linear_backward_input(dx_full, dk2, params_.weight(wk_), /*accumulate_dx=*/true);
  kernels::linear_backward_input(dx_full, dv2, params_.weight(wv_), /*accumulate_dx=*/true);
  ends_.Sum(dx, dx_full);
  saved = Saved();  // the stash is consumed
}

}  // namespace pentamesh::model

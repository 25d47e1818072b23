// Context-parallel attention under mpirun (4 ranks): ring and Ulysses for cp in {2, 4} against
// single-process causal attention over the whole sequence (output, dQ, dK, dV within 1e-5), the
// bytes each rank sends on the cp group against the cost model's cp bytes (one layer, one
// micro-batch, fp32, no recompute), and the attention stash per rank falling as 1/cp. Then the
// whole Attention layer (projections, RoPE at global positions, CP core): y, dx and the weight
// grads (summed over cp) against the layer on one process.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "cost/cost.h"
#include "kernels/cpu/attention.h"
#include "model/attention.h"
#include "model/cp_attention.h"
#include "spec/load_toml.h"
#include "spec/validate.h"
#include "tests/mpi/mpi_test_main.h"

namespace pentamesh {
namespace {

using core::Allocator;
using core::Buffer;
using core::Dtype;
using core::MemTag;
using model::CpAttentionDims;

constexpr int64_t kBatch = 2, kSeq = 32, kHeads = 8, kKvHeads = 4, kHeadDim = 8;

std::vector<float> Random(uint64_t stream, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] =
        static_cast<float>(core::CounterRng::Normal(7, stream, static_cast<uint64_t>(i)));
  return out;
}

// Rows of the local shard of a full (B*S, N, D) tensor: sequence b, local row r of cp rank.
std::vector<float> LocalRows(const std::vector<float>& full, int64_t N, int cp, int rank) {
  const std::vector<int64_t> pos = model::CpLocalPositions(kSeq, cp, rank);
  const int64_t L = static_cast<int64_t>(pos.size()), row = N * kHeadDim;
  std::vector<float> out(static_cast<size_t>(kBatch * L * row));
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t r = 0; r < L; ++r)
      std::copy_n(full.begin() + (b * kSeq + pos[static_cast<size_t>(r)]) * row, row,
                  out.begin() + (b * L + r) * row);
  return out;
}

void ExpectNear(const std::vector<float>& want, const float* got, const char* what) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(want[i] - got[i])));
  EXPECT_LT(worst, 1e-5) << what;
}

// The cost model's cp bytes for this shape: one attention layer, one micro-batch of kBatch.
double PredictedCpBytes(int cp, spec::CpKind kind) {
  spec::ModelSpec m;
  m.name = "cp-test", m.layers = 1, m.hidden = kHeads * kHeadDim, m.heads = kHeads;
  m.kv_heads = kKvHeads, m.head_dim = kHeadDim, m.ffn_hidden = 64, m.vocab = 64;
  m.max_seq_len = kSeq;
  spec::TrainSpec t;
  t.name = "cp-test", t.seq_len = kSeq, t.global_batch_tokens = kBatch * kSeq;
  t.precision = spec::Precision::kFp32;
  spec::Layout l;
  l.cp = cp, l.mbs = kBatch, l.cp_kind = kind;
  const cost::Context ctx(m, *spec::LoadCluster("h100-sxm", cp), t);
  EXPECT_EQ(cost::CheckLayout(ctx, l), cost::Rule::kOk);
  EXPECT_EQ(spec::MicroBatches(t, l), 1);
  return cost::CommBytesForStage(ctx, l, 0).cp;
}

struct Reference {
  std::vector<float> q, k, v, dout, o, dq, dk, dv;
};

Reference MakeReference() {
  Reference r;
  const int64_t T = kBatch * kSeq;
  r.q = Random(1, T * kHeads * kHeadDim), r.k = Random(2, T * kKvHeads * kHeadDim);
  r.v = Random(3, T * kKvHeads * kHeadDim), r.dout = Random(4, T * kHeads * kHeadDim);
  r.o.resize(r.q.size()), r.dq.resize(r.q.size()), r.dk.resize(r.k.size());
  r.dv.resize(r.v.size());
  std::vector<float> lse(static_cast<size_t>(kBatch * kHeads * kSeq));
  const kernels::AttentionDims ad{kBatch, kSeq, kHeads, kKvHeads, kHeadDim};
  auto T3 = [](std::vector<float>& x, int64_t n) {
    return core::Tensor(x.data(), {kBatch * kSeq, n, kHeadDim});
  };
  kernels::attention_forward(T3(r.o, kHeads), core::Tensor(lse.data(), {kBatch, kHeads, kSeq}),
                             T3(r.q, kHeads), T3(r.k, kKvHeads), T3(r.v, kKvHeads), ad);
  kernels::attention_backward(T3(r.dq, kHeads), T3(r.dk, kKvHeads), T3(r.dv, kKvHeads),
                              T3(r.dout, kHeads), T3(r.q, kHeads), T3(r.k, kKvHeads),
                              T3(r.v, kKvHeads), T3(r.o, kHeads),
                              core::Tensor(lse.data(), {kBatch, kHeads, kSeq}), ad);
  return r;
}

class CpAttention : public ::testing::TestWithParam<std::tuple<int, spec::CpKind>> {};

TEST_P(CpAttention, MatchesSingleProcessAndCostBytes) {
  const auto [cp_size, kind] = GetParam();
  comm::MpiWorld& world = mpitest::TestWorld();
  ASSERT_EQ(world.size() % cp_size, 0);
  const int first = world.rank() / cp_size * cp_size;
  std::vector<int> members;
  for (int i = 0; i < cp_size; ++i) members.push_back(first + i);
  std::unique_ptr<comm::Communicator> cp = world.CreateGroup("cp", members);
  const int rank = cp->rank();

  Reference ref = MakeReference();
  std::vector<float> q = LocalRows(ref.q, kHeads, cp_size, rank);
  std::vector<float> k = LocalRows(ref.k, kKvHeads, cp_size, rank);
  std::vector<float> v = LocalRows(ref.v, kKvHeads, cp_size, rank);
  std::vector<float> dout = LocalRows(ref.dout, kHeads, cp_size, rank);
  const int64_t T = kBatch * kSeq / cp_size;
  std::vector<float> o(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  auto T3 = [T](std::vector<float>& x, int64_t n) {
    return core::Tensor(x.data(), {T, n, kHeadDim});
  };
  const CpAttentionDims dims{kBatch, kSeq, kHeads, kKvHeads, kHeadDim};
  Allocator alloc;
  model::CpAttentionSaved saved;
  model::CpAttentionForward(T3(o, kHeads), saved, T3(q, kHeads), T3(k, kKvHeads), T3(v, kKvHeads),
                            dims, kind, *cp, alloc);
  const int64_t stash_bytes = alloc.peak_bytes(MemTag::kActivations);
  model::CpAttentionBackward(T3(dq, kHeads), T3(dk, kKvHeads), T3(dv, kKvHeads), T3(dout, kHeads),
                             T3(q, kHeads), T3(k, kKvHeads), T3(v, kKvHeads), T3(o, kHeads), saved,
                             dims, kind, *cp, alloc);
  ExpectNear(LocalRows(ref.o, kHeads, cp_size, rank), o.data(), "o");
  ExpectNear(LocalRows(ref.dq, kHeads, cp_size, rank), dq.data(), "dq");
  ExpectNear(LocalRows(ref.dk, kKvHeads, cp_size, rank), dk.data(), "dk");
  ExpectNear(LocalRows(ref.dv, kKvHeads, cp_size, rank), dv.data(), "dv");

  // Bytes sent on the cp group = the cost model's cp bytes for one layer, one micro-batch.
  const comm::OpStats total = cp->stats().total();
  EXPECT_DOUBLE_EQ(total.bytes_wire, PredictedCpBytes(cp_size, kind));
  // Ring stashes only its queries' lse (B, A, S/cp); Ulysses its head share of q, k, v, o, lse:
  // both fall as 1/cp.
  const int64_t per_token =
      kind == spec::CpKind::kRing ? kHeads : (2 * kHeads + 2 * kKvHeads) * kHeadDim + kHeads;
  EXPECT_EQ(stash_bytes, kBatch * kSeq / cp_size * per_token * 4);
}

INSTANTIATE_TEST_SUITE_P(All, CpAttention,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(spec::CpKind::kRing,
                                                              spec::CpKind::kUlysses)));

// The Attention layer with a cp group vs the same layer on one process over whole sequences.
class CpAttentionLayer : public ::testing::TestWithParam<std::tuple<int, spec::CpKind>> {};

struct AttentionLayer {
  Allocator alloc;
  model::ParamSet params{alloc, Dtype::kF32};
  comm::SelfCommunicator tp{"tp", 0};
  std::unique_ptr<model::Attention> attn;
  AttentionLayer(comm::Communicator* cp, spec::CpKind kind) {
    model::AttentionConfig c{
        .hidden = 32, .heads = kHeads, .kv_heads = kKvHeads, .head_dim = kHeadDim, .max_seq = kSeq};
    c.cp = cp, c.cp_kind = kind, c.shard.tp_comm = &tp;
    attn = std::make_unique<model::Attention>(params, "attn", c);
    params.Finalize();
    params.Init(3);
  }
};

TEST_P(CpAttentionLayer, MatchesSingleProcess) {
  const auto [cp_size, kind] = GetParam();
  comm::MpiWorld& world = mpitest::TestWorld();
  const int first = world.rank() / cp_size * cp_size;
  std::vector<int> members;
  for (int i = 0; i < cp_size; ++i) members.push_back(first + i);
  std::unique_ptr<comm::Communicator> cp = world.CreateGroup("cp", members);
  constexpr int64_t H = 32;
  const int64_t T = kBatch * kSeq, Tl = T / cp_size;
  std::vector<float> x = Random(5, T * H), dy = Random(6, T * H);
  std::vector<float> y(x.size()), dx(x.size());
  AttentionLayer ref(nullptr, kind);
  int64_t ref_stash_bytes = 0;  // q, k, v, o, lse of all T tokens
  {
    model::Attention::Saved saved;
    const model::LayerContext ctx{.alloc = &ref.alloc};
    const model::Dims dims{.batch = kBatch, .seq = kSeq};
    ref.attn->Forward(core::Tensor(y.data(), {T, H}), saved, core::Tensor(x.data(), {T, H}), dims,
                      ctx, true);
    ref_stash_bytes = ref.alloc.peak_bytes(MemTag::kActivations);
    ref.attn->Backward(core::Tensor(dx.data(), {T, H}), core::Tensor(dy.data(), {T, H}),
                       core::Tensor(x.data(), {T, H}), saved, dims, ctx);
  }
  AttentionLayer mine(cp.get(), kind);
  // The local rows: H values per token, taken like a (T, 1, H) tensor.
  auto local = [&](const std::vector<float>& full) {
    std::vector<float> out(static_cast<size_t>(Tl * H));
    const std::vector<int64_t> pos = model::CpLocalPositions(kSeq, cp_size, cp->rank());
    const int64_t L = kSeq / cp_size;
    for (int64_t b = 0; b < kBatch; ++b)
      for (int64_t r = 0; r < L; ++r)
        std::copy_n(full.begin() + (b * kSeq + pos[static_cast<size_t>(r)]) * H, H,
                    out.begin() + (b * L + r) * H);
    return out;
  };
  std::vector<float> xl = local(x), dyl = local(dy), yl(xl.size()), dxl(xl.size());
  model::Attention::Saved saved;
  const model::LayerContext ctx{.alloc = &mine.alloc};
  const model::Dims dims{.batch = kBatch, .seq = kSeq / cp_size};
  for (const bool keep : {true, false}) {  // stashed, then selective recomputation
    mine.params.ZeroGrads();
    mine.attn->Forward(core::Tensor(yl.data(), {Tl, H}), saved, core::Tensor(xl.data(), {Tl, H}),
                       dims, ctx, keep);
    if (keep) {  // the stash falls as 1/cp; Ulysses also keeps its head-sharded q, k, v, o
      const int64_t qkvo = T * (2 * kHeads + 2 * kKvHeads) * kHeadDim * 4;
      EXPECT_EQ(mine.alloc.peak_bytes(MemTag::kActivations),
                (ref_stash_bytes + (kind == spec::CpKind::kUlysses ? qkvo : 0)) / cp_size);
    }
    mine.attn->Backward(core::Tensor(dxl.data(), {Tl, H}), core::Tensor(dyl.data(), {Tl, H}),
                        core::Tensor(xl.data(), {Tl, H}), saved, dims, ctx);
    std::vector<float> yw = local(y), dxw = local(dx);
    ExpectNear(yw, yl.data(), "y");
    ExpectNear(dxw, dxl.data(), "dx");
    for (const char* name : {"attn.wq", "attn.wk", "attn.wv", "attn.wo"}) {
      core::Tensor g = mine.params.grad(mine.params.Find(name));
      cp->all_reduce(g.f32(), g.numel(), Dtype::kF32);
      const core::Tensor want = ref.params.grad(ref.params.Find(name));
      ExpectNear(std::vector<float>(want.f32(), want.f32() + want.numel()), g.f32(), name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, CpAttentionLayer,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(spec::CpKind::kRing,
                                                              spec::CpKind::kUlysses)));

}  // namespace
}  // namespace pentamesh

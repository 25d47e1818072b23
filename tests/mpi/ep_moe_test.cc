// Expert-parallel MoE under mpirun (4 ranks): for ep in {2, 4}, dropless, each ep rank routes
// its own tokens, dispatches them with all_to_all_v to the experts' owners and combines the
// outputs. Against one process running the same layer on all the group's tokens: output, input
// grad, expert weight grads (the owner's shard), router grad (summed over the group), for a
// random router and an unbalanced one (experts with zero tokens, one expert taking most). With a
// balanced router the bytes each rank sends on the ep group equal cost::CommBytesForStage's ep.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "cost/cost.h"
#include "model/moe.h"
#include "spec/load_toml.h"
#include "spec/validate.h"
#include "tests/mpi/mpi_test_main.h"

namespace pentamesh {
namespace {

using core::Allocator;
using core::Dtype;

constexpr int64_t kHidden = 16, kExperts = 8, kTopK = 2, kFfn = 12, kTokensPerRank = 16;

enum class Router { kRandom, kUnbalanced, kBalanced };

std::vector<float> Random(uint64_t stream, int64_t n, bool positive) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double z = core::CounterRng::Normal(11, stream, static_cast<uint64_t>(i));
    out[static_cast<size_t>(i)] = static_cast<float>(positive ? std::fabs(z) + 0.1 : z);
  }
  return out;
}

// Input rows of `tokens` tokens: random, or (balanced) token t one-hot on dims t%E, (t+1)%E.
std::vector<float> Inputs(int64_t tokens, Router router) {
  if (router != Router::kBalanced)
    return Random(1, tokens * kHidden, router == Router::kUnbalanced);
  std::vector<float> x(static_cast<size_t>(tokens * kHidden), 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    x[static_cast<size_t>(t * kHidden + t % kExperts)] = 1.0f;
    x[static_cast<size_t>(t * kHidden + (t + 1) % kExperts)] = 1.0f;
  }
  return x;
}

struct Layer {
  Allocator alloc;
  model::ParamSet params{alloc, Dtype::kF32};
  std::unique_ptr<model::Moe> moe;
  Layer(int ep_size, int ep_rank, comm::Communicator* ep, Router router) {
    model::MoeConfig c{.hidden = kHidden, .experts = kExperts, .top_k = kTopK, .expert_ffn = kFfn};
    c.aux_loss_coef = 0;  // the aux loss is per data rank (local f_i); z-loss is per token
    c.z_loss_coef = 0.01;
    c.shard.ep_size = ep_size, c.shard.ep_rank = ep_rank, c.ep = ep;
    moe = std::make_unique<model::Moe>(params, "moe", c);
    params.Finalize();
    params.Init(5);
    core::Tensor w = params.master(params.Find("moe.router"));  // (E, H), fp32 = the weight
    for (int64_t e = 0; e < kExperts; ++e) {
      for (int64_t h = 0; h < kHidden; ++h) {
        float& v = w.f32()[e * kHidden + h];
        if (router == Router::kUnbalanced && (e == 2 || e == 5)) v = -1.0f;  // never chosen
        if (router == Router::kUnbalanced && e == 0) v = 0.5f;               // chosen by most
        if (router == Router::kBalanced) v = e == h ? 4.0f : 0.0f;
      }
    }
  }
};

void ExpectNear(const float* want, const float* got, int64_t n, const char* what) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(want[i] - got[i])));
  EXPECT_LT(worst, 1e-5) << what;
}

double PredictedEpBytes(int ep) {
  spec::ModelSpec m;
  m.name = "ep-test", m.layers = 1, m.hidden = kHidden, m.heads = 2, m.kv_heads = 2;
  m.head_dim = 8, m.ffn_hidden = 32, m.vocab = 64, m.max_seq_len = kTokensPerRank;
  m.moe.experts = kExperts, m.moe.top_k = kTopK, m.moe.expert_ffn_hidden = kFfn;
  m.moe.capacity_factor = 0;
  spec::TrainSpec t;
  t.name = "ep-test", t.seq_len = kTokensPerRank, t.global_batch_tokens = ep * kTokensPerRank;
  t.precision = spec::Precision::kFp32;
  spec::Layout l;
  l.ep = ep, l.mbs = 1, l.ep_placement = spec::EpPlacement::kSeparate;
  cost::CostParams params;
  params.moe_imbalance = 1.0;  // the balanced router: every expert gets the mean
  const cost::Context ctx(m, *spec::LoadCluster("h100-sxm", ep), t, params);
  EXPECT_EQ(cost::CheckLayout(ctx, l), cost::Rule::kOk);
  EXPECT_EQ(spec::MicroBatches(t, l), 1);
  return cost::CommBytesForStage(ctx, l, 0).ep;
}

class EpMoe : public ::testing::TestWithParam<std::tuple<int, Router>> {};

TEST_P(EpMoe, MatchesSingleProcess) {
  const auto [ep_size, router] = GetParam();
  comm::MpiWorld& world = mpitest::TestWorld();
  ASSERT_EQ(world.size() % ep_size, 0);
  const int first = world.rank() / ep_size * ep_size;
  std::vector<int> members;
  for (int i = 0; i < ep_size; ++i) members.push_back(first + i);
  std::unique_ptr<comm::Communicator> ep = world.CreateGroup("ep", members);
  const int rank = ep->rank();
  const int64_t T = ep_size * kTokensPerRank, Tl = kTokensPerRank;

  std::vector<float> x = Inputs(T, router), dy = Random(2, T * kHidden, false);
  Layer ref(1, 0, nullptr, router);
  std::vector<float> y(x.size()), dx(x.size());
  {
    model::Moe::Saved saved;
    model::MoeStats stats;
    const model::LayerContext ctx{.alloc = &ref.alloc};
    ref.moe->Forward(core::Tensor(y.data(), {T, kHidden}), saved,
                     core::Tensor(x.data(), {T, kHidden}), ctx, &stats);
    ref.moe->Backward(core::Tensor(dx.data(), {T, kHidden}), core::Tensor(dy.data(), {T, kHidden}),
                      core::Tensor(x.data(), {T, kHidden}), saved, ctx);
    if (router == Router::kUnbalanced) {
      EXPECT_EQ(stats.routed[2], 0);
      EXPECT_EQ(stats.routed[5], 0);
      EXPECT_TRUE(stats.CollapseWarning(kTopK)) << stats.MaxExpertShare();
    }
  }
  Layer mine(ep_size, rank, ep.get(), router);
  const int64_t row0 = rank * Tl;
  std::vector<float> yl(static_cast<size_t>(Tl * kHidden)), dxl(yl.size());
  model::Moe::Saved saved;
  model::MoeStats stats;
  const model::LayerContext ctx{.alloc = &mine.alloc,
                                .aux_scale = 1.0f / static_cast<float>(ep_size)};
  const core::ConstTensor xl(x.data() + row0 * kHidden, {Tl, kHidden});
  mine.moe->Forward(core::Tensor(yl.data(), {Tl, kHidden}), saved, xl, ctx, &stats);
  mine.moe->Backward(core::Tensor(dxl.data(), {Tl, kHidden}),
                     core::ConstTensor(dy.data() + row0 * kHidden, {Tl, kHidden}), xl, saved, ctx);
  ExpectNear(y.data() + row0 * kHidden, yl.data(), Tl * kHidden, "y");
  ExpectNear(dx.data() + row0 * kHidden, dxl.data(), Tl * kHidden, "dx");
  for (const char* name : {"moe.experts.w1", "moe.experts.w3", "moe.experts.w2"}) {
    const core::Tensor g = mine.params.grad(mine.params.Find(name));
    const core::Tensor want = ref.params.grad(ref.params.Find(name));
    const int64_t per_rank = g.numel();
    ExpectNear(want.f32() + rank * per_rank, g.f32(), per_rank, name);
  }
  core::Tensor router_grad = mine.params.grad(mine.params.Find("moe.router"));
  const double bytes_ep = ep->stats().total().bytes_wire;  // before the test's own all_reduce
  ep->all_reduce(router_grad.f32(), router_grad.numel(), Dtype::kF32);
  ExpectNear(ref.params.grad(ref.params.Find("moe.router")).f32(), router_grad.f32(),
             router_grad.numel(), "router");
  if (router == Router::kBalanced) {
    EXPECT_DOUBLE_EQ(bytes_ep, PredictedEpBytes(ep_size));
  }
}

INSTANTIATE_TEST_SUITE_P(All, EpMoe,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(Router::kRandom, Router::kUnbalanced,
                                                              Router::kBalanced)));

}  // namespace
}  // namespace pentamesh

// MoE balancing without the auxiliary loss (DeepSeek-V3's per-expert routing bias) and the
// expert-collapse statistic: closed forms on hand-made statistics, and on a router skewed towards
// one expert the bias updates bring max/mean load down while the gates stay unbiased probs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "model/moe.h"

namespace pentamesh::model {
namespace {

TEST(MoeStats, ShareAndCollapseWarning) {
  MoeStats s;
  s.routed = {10, 10, 10, 70};
  EXPECT_DOUBLE_EQ(s.MaxExpertShare(), 0.7);
  EXPECT_DOUBLE_EQ(s.LoadImbalance(), 70.0 / 25.0);
  EXPECT_TRUE(s.CollapseWarning());
  s.routed = {25, 25, 25, 25, 0, 0, 0, 0};
  EXPECT_FALSE(s.CollapseWarning());  // exactly 25% is not above
  s.routed = {0, 0};
  EXPECT_EQ(s.MaxExpertShare(), 0.0);
}

TEST(MoeBias, UpdateNudgesTowardBalanceAndKeepsGates) {
  constexpr int64_t H = 8, E = 8, T = 64;
  core::Allocator alloc;
  ParamSet params(alloc, core::Dtype::kF32);
  MoeConfig c{.hidden = H, .experts = E, .top_k = 2, .expert_ffn = 8};
  c.aux_loss_coef = 0;
  c.bias_update_rate = 0.02;
  Moe moe(params, "moe", c);
  params.Finalize();
  params.Init(9);
  core::Tensor w = params.master(params.Find("moe.router"));
  for (int64_t h = 0; h < H; ++h) w.f32()[h] = 0.3f;  // expert 0 favored by positive inputs
  std::vector<float> x(static_cast<size_t>(T * H)), y(x.size());
  for (int64_t i = 0; i < T * H; ++i)
    x[static_cast<size_t>(i)] =
        static_cast<float>(std::fabs(core::CounterRng::Normal(1, 0, static_cast<uint64_t>(i))));
  const LayerContext ctx{.alloc = &alloc};
  auto route = [&] {
    Moe::Saved saved;
    MoeStats stats;
    moe.Forward(core::Tensor(y.data(), {T, H}), saved, core::Tensor(x.data(), {T, H}), ctx, &stats);
    // Gates are the unbiased softmax probabilities of the chosen experts.
    for (size_t a = 0; a < saved.gate.size(); ++a) {
      EXPECT_GT(saved.gate[a], 0.0f);
      EXPECT_LT(saved.gate[a], 1.0f);
    }
    return stats;
  };
  const MoeStats first = route();
  ASSERT_GT(first.LoadImbalance(), 1.5);
  MoeStats last = first;
  for (int step = 0; step < 40; ++step) {
    moe.UpdateBias(last);
    last = route();
  }
  EXPECT_LT(moe.bias()[0], 0.0f);
  EXPECT_LT(last.LoadImbalance(), first.LoadImbalance() - 0.3)
      << first.LoadImbalance() << " -> " << last.LoadImbalance();
}

TEST(MoeBias, RateZeroIsANoOp) {
  core::Allocator alloc;
  ParamSet params(alloc, core::Dtype::kF32);
  Moe moe(params, "moe", MoeConfig{.hidden = 4, .experts = 4, .top_k = 1, .expert_ffn = 4});
  MoeStats s;
  s.routed = {9, 1, 1, 1};
  moe.UpdateBias(s);
  for (float b : moe.bias()) EXPECT_EQ(b, 0.0f);
}

}  // namespace
}  // namespace pentamesh::model

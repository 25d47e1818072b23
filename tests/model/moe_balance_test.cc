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

// The collapse threshold is midway between an expert's fair share 1/E and the most it can take,
// 1/top_k: (1/E + 1/k) / 2, strict.
TEST(MoeStats, ShareAndCollapseWarning) {
  MoeStats s;
  s.routed = {10, 10, 10, 70};
  EXPECT_DOUBLE_EQ(s.MaxExpertShare(), 0.7);
  EXPECT_DOUBLE_EQ(s.LoadImbalance(), 70.0 / 25.0);
  EXPECT_TRUE(s.CollapseWarning(/*top_k=*/2));  // 0.7 > 0.375
  s.routed = {3, 1, 1, 3};
  EXPECT_FALSE(s.CollapseWarning(2));  // exactly 3/8 = (1/4 + 1/2) / 2 is not above
  s.routed = {30, 20, 25, 25};
  EXPECT_FALSE(s.CollapseWarning(2));  // 30% of 4 experts, top-2: ordinary noise
  s.routed = {25, 25, 25, 25, 0, 0, 0, 0};
  EXPECT_FALSE(s.CollapseWarning(2));  // 25% < (1/8 + 1/2) / 2 = 31.25%
  // 128 experts, top-4 (the case study): 15% on one expert is 20x its fair share, past
  // (1/128 + 1/4) / 2 = 12.890625%; a fixed 25% could never fire (a top-4 router's ceiling).
  s.routed.assign(128, 87);
  s.routed[0] = 2000;
  EXPECT_NEAR(s.MaxExpertShare(), 2000.0 / (2000 + 127 * 87), 1e-12);
  EXPECT_TRUE(s.CollapseWarning(4));
  EXPECT_DOUBLE_EQ(cost::ExpertCollapseShare(128, 4), 0.12890625);
  EXPECT_DOUBLE_EQ(cost::ExpertCollapseShare(4, 4), 0.25);  // every expert chosen: never above
  s.routed = {0, 0};
  EXPECT_EQ(s.MaxExpertShare(), 0.0);
  EXPECT_FALSE(s.CollapseWarning(1));
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

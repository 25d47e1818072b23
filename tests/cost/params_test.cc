// Parameter counts and FLOPs against hand-derived values and the presets' published totals.
#include <gtest/gtest.h>

#include "cost/cost.h"
#include "spec/load_toml.h"
#include "testing/tiny_specs.h"

namespace pentamesh::cost {
namespace {

TEST(CountParams, GptTinyByHand) {
  const ParamCounts c = CountParams(testing::GptTiny());
  // attention 4h^2 per layer, FFN 2 * h * 4h, norms 2h per layer + final h, tied embedding V*h.
  EXPECT_DOUBLE_EQ(c.attention, 4 * 4.0 * 64 * 64);
  EXPECT_DOUBLE_EQ(c.dense_mlp, 4 * 2.0 * 64 * 256);
  EXPECT_DOUBLE_EQ(c.norms, (2 * 4 + 1) * 64.0);
  EXPECT_DOUBLE_EQ(c.embedding, 1000.0 * 64);
  EXPECT_DOUBLE_EQ(c.lm_head, 0.0);
  EXPECT_DOUBLE_EQ(c.total, 65536 + 131072 + 576 + 64000);
  EXPECT_DOUBLE_EQ(c.active, c.total);
  // Matmul params: layers + the (tied) head; no lookup, no norms.
  EXPECT_DOUBLE_EQ(c.active_matmul, 65536 + 131072 + 64000);
}

TEST(CountParams, MoeTinyByHand) {
  const ParamCounts c = CountParams(testing::MoeTiny());
  const double attn = 2.0 * 64 * 64 + 2.0 * 64 * 32;  // q, o: h x 64; k, v: h x 32
  const double expert = 3.0 * 64 * 32;
  EXPECT_DOUBLE_EQ(c.attention, 4 * attn);
  EXPECT_DOUBLE_EQ(c.dense_mlp, 1 * 3.0 * 64 * 128);
  EXPECT_DOUBLE_EQ(c.routed_experts, 3 * 8 * expert);
  EXPECT_DOUBLE_EQ(c.router, 3 * 64.0 * 8);
  EXPECT_DOUBLE_EQ(c.lm_head, 64000.0);
  EXPECT_DOUBLE_EQ(c.active, c.total - 3 * 6 * expert);  // 6 of 8 experts idle per token
}

struct Published {
  const char* name;
  double total, active, expert;  // billions; active/expert 0 = not checked
  double tolerance;              // relative
};

TEST(CountParams, PresetsMatchPublishedTotals) {
  const Published runs[] = {
      {"meridianfin-72b", 72.0, 18.0, 55.7, 0.005},  // the case study's own totals
      {"llama3-405b", 405.9, 0, 0, 0.002},           // Dubey et al. 2024
      {"llama3-70b", 70.6, 0, 0, 0.002},
      {"llama3-8b", 8.03, 0, 0, 0.002},
      {"mixtral-8x7b", 46.7, 12.9, 0, 0.005},  // Jiang et al. 2024
      {"gpt3-175b", 175.0, 0, 0, 0.01},
  };
  for (const auto& r : runs) {
    const ParamCounts c = CountParams(*spec::LoadModel(r.name));
    EXPECT_NEAR(c.total / 1e9, r.total, r.total * r.tolerance) << r.name;
    if (r.active > 0) {
      EXPECT_NEAR(c.active / 1e9, r.active, r.active * r.tolerance) << r.name;
    }
    if (r.expert > 0) {
      EXPECT_NEAR(c.expert() / 1e9, r.expert, r.expert * r.tolerance) << r.name;
    }
    EXPECT_TRUE(CheckStatedParams(*spec::LoadModel(r.name)).empty()) << r.name;
  }
}

TEST(CheckStatedParams, ReportsDisagreementAboveOnePercent) {
  spec::ModelSpec m = *spec::LoadModel("meridianfin-72b");
  m.total_params = 72.0e9 * 1.009;  // within 1%
  EXPECT_TRUE(CheckStatedParams(m).empty());
  // The case study's literal dimensions: 64 MHA heads, 128 experts of FFN 4096 in all layers.
  m.kv_heads = 64;
  m.moe.expert_ffn_hidden = 4096;
  m.moe.first_dense_layers = 0;
  const auto messages = CheckStatedParams(m);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[0].find("total_params=72.65B"), std::string::npos) << messages[0];
  EXPECT_NE(messages[0].find("implies"), std::string::npos) << messages[0];
  EXPECT_NE(messages[1].find("active_params"), std::string::npos) << messages[1];
}

TEST(Flops, HandDerivedConventions) {
  const spec::ModelSpec m = testing::GptTiny();
  const ParamCounts c = CountParams(m);
  const double s = 128, attn = 4.0 * 4 * 64 * s;  // forward QK^T + AV per token, full square
  const FlopsPerToken none = Flops(m, 128, spec::Recompute::kNone);
  EXPECT_DOUBLE_EQ(none.model, 6 * c.active_matmul + 12.0 * 4 * 64 * s);
  EXPECT_DOUBLE_EQ(none.model_causal, 6 * c.active_matmul + 6.0 * 4 * 64 * s);
  EXPECT_DOUBLE_EQ(none.hardware, none.model);
  EXPECT_DOUBLE_EQ(Flops(m, 128, spec::Recompute::kSelective).hardware, none.model + attn);
  const double head = 1000.0 * 64;
  EXPECT_DOUBLE_EQ(Flops(m, 128, spec::Recompute::kFull).hardware,
                   none.model + 2 * (c.active_matmul - head) + attn);
}

TEST(Flops, Llama405bPerTokenMatchesTheSixNRule) {
  const spec::ModelSpec m = *spec::LoadModel("llama3-405b");
  const FlopsPerToken f = Flops(m, 8192, spec::Recompute::kNone);
  // 6 * 405B matmul params (~2.43 TFLOP) + 12 * 126 * 16384 * 8192 (~0.203 TFLOP).
  EXPECT_NEAR(f.model / 1e12, 2.431 + 0.203, 0.01);
}

}  // namespace
}  // namespace pentamesh::cost

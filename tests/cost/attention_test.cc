// Attention variants in the cost model (cost/attention.h): MLA parameter counts and FLOPs against
// closed forms and DeepSeek-V3's published totals, sliding-window key lengths and their effect on
// FLOPs and step time, and GQA's shapes equal to the formulas the cost model used before.
#include "cost/attention.h"

#include <gtest/gtest.h>

#include "cost/cost.h"
#include "spec/load_toml.h"
#include "testing/tiny_specs.h"

namespace pentamesh::cost {
namespace {

// A small MLA model: h 64, 4 heads, q_lora 32, kv_lora 16, qk 8 + 4, v 8.
spec::ModelSpec TinyMla(int64_t q_lora_rank = 32) {
  spec::ModelSpec m = testing::GptTiny();
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.mla = {.q_lora_rank = q_lora_rank,
           .kv_lora_rank = 16,
           .qk_nope_head_dim = 8,
           .qk_rope_head_dim = 4,
           .v_head_dim = 8};
  return m;
}

TEST(MlaParams, ClosedForm) {
  const double d = 64, h = 4, q = 32, kv = 16, nope = 8, rope = 4, v = 8;
  const double q_path = d * q + q * h * (nope + rope);
  const double kv_path = d * (kv + rope) + kv * h * (nope + v);
  const double out = h * v * d;
  const spec::ModelSpec m = TinyMla();
  const ParamCounts c = CountParams(m);
  EXPECT_DOUBLE_EQ(c.attention, 4 * (q_path + kv_path + out));
  // The latent norms (q_lora + kv_lora per layer) count as norms, not as matmul parameters.
  EXPECT_DOUBLE_EQ(c.norms, (2 * 4 + 1) * 64.0 + 4 * (q + kv));
  const ParamCounts gpt = CountParams(testing::GptTiny());
  EXPECT_DOUBLE_EQ(c.total - c.attention - c.norms, gpt.total - gpt.attention - gpt.norms);
  EXPECT_DOUBLE_EQ(c.active_matmul - c.attention, gpt.active_matmul - gpt.attention);
  // Without query compression the query is one hidden x heads*(nope+rope) projection.
  const ParamCounts full_q = CountParams(TinyMla(0));
  EXPECT_DOUBLE_EQ(full_q.attention, 4 * (d * h * (nope + rope) + kv_path + out));
  EXPECT_DOUBLE_EQ(full_q.norms, (2 * 4 + 1) * 64.0 + 4 * kv);
  // Split over tp: the up- and out-projections; whole on every rank: the down-projections.
  const AttentionShape a = AttentionShapeOf(m);
  EXPECT_DOUBLE_EQ(a.params_tp, q * h * (nope + rope) + kv * h * (nope + v) + out);
  EXPECT_DOUBLE_EQ(a.params_rep, d * q + d * (kv + rope));
  EXPECT_EQ(a.gemm_count, 5);
  EXPECT_EQ(AttentionShapeOf(TinyMla(0)).gemm_count, 4);
}

TEST(MlaFlops, ClosedForm) {
  const spec::ModelSpec m = TinyMla();
  const ParamCounts c = CountParams(m);
  const double s = 128, heads = 4, qk = 12, v = 8;
  // Forward per token and layer over the full square: QK^T 2 s heads qk, AV 2 s heads v.
  const double attn = 4 * (2 * s * heads * qk + 2 * s * heads * v);
  const FlopsPerToken f = Flops(m, 128, spec::Recompute::kNone);
  EXPECT_DOUBLE_EQ(f.model, 6 * c.active_matmul + 3 * attn);
  EXPECT_DOUBLE_EQ(f.model_causal, 6 * c.active_matmul + 1.5 * attn);
  EXPECT_DOUBLE_EQ(Flops(m, 128, spec::Recompute::kSelective).hardware, f.model + attn);
}

// DeepSeek-V3 (config.json): 61 layers are 671B parameters, 37B active; the preset's 62nd layer
// stands in for the 14B multi-token-prediction module (671B + 14B = 685B on the model card).
TEST(MlaParams, DeepSeekV3PublishedTotals) {
  spec::ModelSpec m = *spec::LoadModel("deepseek-v3-like");
  ASSERT_TRUE(m.is_mla());
  const ParamCounts with_mtp = CountParams(m);
  EXPECT_NEAR(with_mtp.total / 1e9, 685.0, 685.0 * 0.01);
  m.layers = 61;
  const ParamCounts c = CountParams(m);
  EXPECT_NEAR(c.total / 1e9, 671.0, 671.0 * 0.002);
  EXPECT_NEAR(c.active / 1e9, 37.0, 37.0 * 0.02);
  // MLA: 187.1M projection parameters a layer (DeepSeek-V3's q_a, q_b, kv_a, kv_b, o).
  EXPECT_DOUBLE_EQ(c.attention / 61, 187105280.0);
}

TEST(SlidingWindow, KeyLengths) {
  spec::ModelSpec m = testing::GptTiny();
  m.sliding_window = 32;
  const AttentionKeys global = AttentionKeysOf(m, 128, false);
  EXPECT_DOUBLE_EQ(global.full, 128);
  EXPECT_DOUBLE_EQ(global.causal, 64);
  const AttentionKeys local = AttentionKeysOf(m, 128, true);
  EXPECT_DOUBLE_EQ(local.full, 32);
  EXPECT_DOUBLE_EQ(local.causal, 32 - 32.0 * 32 / 256);  // w - w^2 / 2s
  // A window as long as the sequence is full attention.
  m.sliding_window = 128;
  EXPECT_DOUBLE_EQ(AttentionKeysOf(m, 128, true).causal, 64);
  m.sliding_window = 4096;
  EXPECT_DOUBLE_EQ(AttentionKeysOf(m, 128, true).full, 128);
}

TEST(SlidingWindow, LocalLayersFollowGlobalEvery) {
  spec::ModelSpec m = testing::GptTiny();
  m.layers = 12;
  EXPECT_EQ(LocalLayerCount(m), 0);
  m.sliding_window = 16;
  EXPECT_EQ(LocalLayerCount(m), 12);  // global_every = 0: every layer local (Mistral)
  m.global_every = 2;                 // Gemma-2: layers 1, 3, 5, ... global
  EXPECT_EQ(LocalLayerCount(m), 6);
  EXPECT_TRUE(m.IsLocalLayer(0));
  EXPECT_FALSE(m.IsLocalLayer(1));
  m.global_every = 6;  // Gemma-3: layers 5 and 11 global
  EXPECT_EQ(LocalLayerCount(m), 10);
  EXPECT_FALSE(m.IsLocalLayer(5));
  m.global_every = 1;  // every layer global
  EXPECT_EQ(LocalLayerCount(m), 0);
}

TEST(SlidingWindow, FlopsScaleWithTheWindow) {
  spec::ModelSpec m = testing::GptTiny();
  const double s = 8192, h_attn = 64;
  const FlopsPerToken full = Flops(m, 8192, spec::Recompute::kNone);
  // A window >= the sequence is full attention.
  m.sliding_window = 8192;
  const FlopsPerToken same = Flops(m, 8192, spec::Recompute::kNone);
  EXPECT_DOUBLE_EQ(same.model, full.model);
  EXPECT_DOUBLE_EQ(same.model_causal, full.model_causal);
  // w << s: a causal layer's attention goes from s^2/2 to about s*w key-query pairs.
  m.sliding_window = 256;
  const double matmul = 6 * CountParams(m).active_matmul;
  const FlopsPerToken local = Flops(m, 8192, spec::Recompute::kNone);
  const double pairs_per_token = (local.model_causal - matmul) / (3 * 4 * 4 * h_attn);
  EXPECT_DOUBLE_EQ(pairs_per_token, 256 - 256.0 * 256 / (2 * s));
  EXPECT_NEAR(pairs_per_token / (s / 2), 2 * 256 / s, 0.01 * 2 * 256 / s * 2);
  EXPECT_DOUBLE_EQ(local.model - matmul, 3 * 4 * 4 * h_attn * 256);  // full convention: w keys
  // Half the layers global (global_every = 2): half-way between.
  m.global_every = 2;
  const FlopsPerToken mixed = Flops(m, 8192, spec::Recompute::kNone);
  EXPECT_DOUBLE_EQ(mixed.model_causal - matmul,
                   0.5 * (local.model_causal - matmul) + 0.5 * (full.model_causal - matmul));
}

// A local layer's core attention is cheaper: the step time falls with the window and equals full
// attention's when the window covers the sequence; memory and bytes do not change.
TEST(SlidingWindow, StepTimeThroughEstimateLayout) {
  spec::ModelSpec m = testing::GptTiny();
  m.max_seq_len = 16384;
  const spec::ClusterSpec c = testing::H100Cluster(4);
  const spec::TrainSpec t = testing::Train(16384, 8);
  const spec::Layout l{.dp = 2, .pp = 2};
  const Estimate full = EstimateLayout(m, c, t, l);
  m.sliding_window = 16384;
  const Estimate covering = EstimateLayout(m, c, t, l);
  EXPECT_EQ(covering.time.step, full.time.step);
  EXPECT_EQ(covering.mfu, full.mfu);
  m.sliding_window = 512;
  const Estimate local = EstimateLayout(m, c, t, l);
  EXPECT_LT(local.time.compute, 0.5 * full.time.compute);
  EXPECT_EQ(local.memory.total, full.memory.total);
  EXPECT_EQ(local.comm_bytes.dp, full.comm_bytes.dp);
  // global_every = 4: layer 3 of 4 keeps full attention; it sits on the last stage, whose
  // compute then grows while the first stage's stays the local one's.
  m.global_every = 4;
  const Estimate one_global = EstimateLayout(m, c, t, l);
  EXPECT_GT(one_global.time.compute, local.time.compute);
  EXPECT_EQ(one_global.critical_stage, 1);
  EXPECT_EQ(one_global.memory.total, local.memory.total);
}

// GQA through AttentionShapeOf: the widths and parameter counts the cost model's formulas used
// before the attention variants (2h(h_attn + h_kv) parameters a layer, one fused QKV GEMM).
TEST(GqaShape, EqualsTheGqaFormulas) {
  for (const char* name : {"llama3-405b", "llama3-8b", "mixtral-8x7b", "gpt3-175b"}) {
    const spec::ModelSpec m = *spec::LoadModel(name);
    const double h = static_cast<double>(m.hidden);
    const double h_attn = static_cast<double>(m.heads * m.head_dim);
    const double h_kv = static_cast<double>(m.kv_heads * m.head_dim);
    const AttentionShape a = AttentionShapeOf(m);
    EXPECT_EQ(a.params_tp, 2.0 * h * h_attn + 2.0 * h * h_kv) << name;
    EXPECT_EQ(a.params_rep, 0.0) << name;
    EXPECT_EQ(a.norm_params, 0.0) << name;
    EXPECT_EQ(a.latent_stash, 0.0) << name;
    EXPECT_EQ(a.score_width, h_attn) << name;
    EXPECT_EQ(a.q + a.k + a.v + a.o, 2 * h_attn + 2 * h_kv) << name;
    ASSERT_EQ(a.gemm_count, 2) << name;
    EXPECT_EQ(a.gemms[0].n, h_attn + 2 * h_kv) << name;
    EXPECT_EQ(a.gemms[1].k, h_attn) << name;
    const FlopsPerToken f = Flops(m, 8192, spec::Recompute::kNone);
    const double matmul = 6.0 * CountParams(m).active_matmul;
    EXPECT_EQ(f.model, matmul + 3.0 * (4.0 * static_cast<double>(m.layers) * 8192 * h_attn))
        << name;
    EXPECT_EQ(f.model_causal, matmul + 1.5 * (4.0 * static_cast<double>(m.layers) * 8192 * h_attn))
        << name;
  }
}

}  // namespace
}  // namespace pentamesh::cost

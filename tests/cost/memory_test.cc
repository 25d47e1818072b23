// Memory terms against hand derivations: Korthikanti et al. 2022's activation equations, the
// seeds' worked numbers (1.02 GB ring-attention scores, Llama-3 405B model state), ZeRO stages,
// EP sharding, micro-batches in flight per schedule, the uneven pipeline split.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "cost/cost.h"
#include "cost/internal.h"
#include "schedule/generate.h"
#include "schedule/simulate.h"
#include "schedule/table.h"
#include "spec/load_toml.h"
#include "spec/validate.h"
#include "testing/tiny_specs.h"

namespace pentamesh::cost {
namespace {

using spec::Layout;

// The last stage's head stash per micro-batch: final norm input and LM head input, bf16.
double HeadStash(const Layout& l, double hidden, double tokens) {
  return 2.0 * 2.0 * hidden * tokens / (l.sp ? static_cast<double>(l.tp) : 1.0);
}

// Activations of one layer and one micro-batch: GPT-tiny with pp = 1, m = 1, without the head's
// stash, divided by layers.
double ActPerLayer(const Layout& l, const CostParams& p, int64_t seq = 128) {
  const spec::ModelSpec m = testing::GptTiny();
  const Estimate e =
      EstimateLayout(m, testing::H100Cluster(l.gpus()), testing::Train(seq, l.dp), l, p);
  EXPECT_TRUE(e.fits) << (e.violations.empty() ? "" : e.violations[0]);
  const double tokens = static_cast<double>(seq * l.mbs / l.cp);
  return (e.memory.activations - HeadStash(l, static_cast<double>(m.hidden), tokens)) /
         static_cast<double>(m.layers);
}

TEST(Activations, KorthikantiEquationsForGpt) {
  CostParams p;
  p.materialize_scores = true;
  p.dropout = true;
  const double s = 128, b = 1, h = 64, a = 8;
  // Eq. 1 (no parallelism): sbh(34 + 5as/h).
  EXPECT_DOUBLE_EQ(ActPerLayer(Layout{}, p), s * b * h * (34 + 5 * a * s / h));
  // Eq. 5 (TP t with sequence parallelism): sbh/t (34 + 5as/h).
  Layout tp4{.tp = 4};
  EXPECT_DOUBLE_EQ(ActPerLayer(tp4, p), s * b * h / 4 * (34 + 5 * a * s / h));
  // Eq. 2 (TP without SP): sbh(10 + 24/t + 5as/(ht)).
  tp4.sp = false;
  EXPECT_DOUBLE_EQ(ActPerLayer(tp4, p), s * b * h * (10 + 24.0 / 4 + 5 * a * s / (h * 4)));
  // Selective recomputation drops the scores: sbh/t * 34.
  Layout sel{.tp = 4, .recompute = spec::Recompute::kSelective};
  EXPECT_DOUBLE_EQ(ActPerLayer(sel, p), s * b * h / 4 * 34);
}

TEST(Activations, LlamaStyleFlashWithGqaAndSwiglu) {
  // Per token: norm inputs 2*2h, QKV input 2h, Q 2h_attn, K and V 2*2h_kv, attention output
  // 2h_attn, log-sum-exp 4a, FFN input 2h, SwiGLU gate/up/output 3*2f; all / tp with SP.
  const spec::ModelSpec m = testing::MoeTiny();
  spec::ModelSpec dense = m;
  dense.moe = {};
  const double h = 64, h_attn = 64, h_kv = 32, f = 128, a = 8, t = 2, s = 256;
  const double per_token =
      (2 * h + 2 * h + 2 * h_attn + 4 * h_kv + 2 * h_attn + 4 * a + 2 * h + 2 * h + 6 * f) / t;
  const Layout l{.tp = 2, .cp = 2};
  const Estimate e =
      EstimateLayout(dense, testing::H100Cluster(4), testing::Train(512, 1), l, CostParams{});
  ASSERT_TRUE(e.fits);
  // 4 layers, 512/cp tokens, and the head's stash.
  EXPECT_DOUBLE_EQ(e.memory.activations, 4 * s * per_token + HeadStash(l, h, s));
}

// FP8 with Transformer Engine's linears (CostParams::fp8_stash_gemm_inputs): each linear layer's
// stashed input is 1 byte an element, not 2. Per token and layer (tp 2): the QKV input h and the
// out-projection's input h_attn, the FFN input h and the down-projection's input f, over t; for
// MoE per routed copy the dispatched input h and the activation output f_e, per shared expert f_e.
TEST(Activations, Fp8LinearsStashTheirInputsInFp8) {
  spec::ModelSpec dense = testing::MoeTiny();
  dense.moe = {};
  spec::ClusterSpec cluster = testing::H100Cluster(4);
  cluster.peak_fp8_tflops = 2 * cluster.peak_tflops;
  spec::TrainSpec train = testing::Train(512, 1);
  train.precision = spec::Precision::kFp8;
  const Layout l{.tp = 2, .cp = 2};
  auto act = [&](const spec::ModelSpec& m, const Layout& at, bool fp8_inputs) {
    CostParams p;
    p.fp8_stash_gemm_inputs = fp8_inputs;
    return EstimateLayout(m, cluster, train, at, p).memory.activations;
  };
  const double h = 64, h_attn = 64, f = 128, t = 2, s = 256;
  EXPECT_DOUBLE_EQ(act(dense, l, false) - act(dense, l, true), 4 * s * (h + h_attn + h + f) / t);
  // MoE (3 MoE layers of top-2, f_e 32, one shared expert added here; dp 2 x ep 2, tp 1): the dense
  // layer as above, each MoE layer its attention inputs and per copy h + f_e, the shared f_e.
  spec::ModelSpec moe = testing::MoeTiny();
  moe.moe.shared_experts = 1;
  const Layout e{.dp = 2, .ep = 2};
  train.global_batch_tokens = 4 * 512;
  const double tokens = 512;
  EXPECT_DOUBLE_EQ(act(moe, e, false) - act(moe, e, true),
                   tokens * (4 * (h + h_attn) + 1 * (h + f) + 3 * (2 * (h + 32) + 32)));
  // The flag acts in FP8 only.
  train.precision = spec::Precision::kBf16;
  EXPECT_DOUBLE_EQ(act(moe, e, false), act(moe, e, true));
}

TEST(Activations, MoeLayerScalesWithTopKAndImbalance) {
  const spec::ModelSpec m = testing::MoeTiny();
  const Layout l{.ep = 2};
  CostParams p;
  const Estimate base = EstimateLayout(m, testing::H100Cluster(2), testing::Train(128, 2), l, p);
  p.moe_imbalance = 1.5;
  const Estimate skewed = EstimateLayout(m, testing::H100Cluster(2), testing::Train(128, 2), l, p);
  // Per routed copy: dispatched input 2h, expert output 2h (combine needs it for the router's
  // gradient), SwiGLU gate/up/output 3*2*fe; 3 MoE layers, 128 tokens, top-2.
  const double per_copy = 2 * 64 + 2 * 64 + 6 * 32;
  EXPECT_DOUBLE_EQ(skewed.memory.activations - base.memory.activations,
                   3 * 128 * 2 * 0.5 * per_copy);
  // A capacity factor caps the worst rank at cf * mean.
  spec::ModelSpec capped = m;
  capped.moe.capacity_factor = 1.25;
  const Estimate c = EstimateLayout(capped, testing::H100Cluster(2), testing::Train(128, 2), l, p);
  EXPECT_DOUBLE_EQ(c.memory.activations - base.memory.activations, 3 * 128 * 2 * 0.25 * per_copy);
}

// Megatron's --recompute-modules, each against its hand count per token (bf16, tp 1): moe_act drops
// each routed copy's activation output (fe), layernorm the MoE block's pre-FFN norm output (h),
// mlp the dense FFN's intermediates (3 f, SwiGLU), mla_up_proj the up-projected q, k, v; a list
// without core_attn keeps the attention's fp32 log-sum-exp (4 a).
TEST(Activations, RecomputeModulesDropWhatTheyRerun) {
  const spec::ModelSpec m = testing::MoeTiny();  // 4 layers, the first dense; h 64, f 128, fe 32
  auto act = [&](uint32_t modules) {
    const Layout l{.ep = 2, .recompute = spec::Recompute::kSelective, .recompute_modules = modules};
    return EstimateLayout(m, testing::H100Cluster(2), testing::Train(128, 2), l, CostParams{})
        .memory.activations;
  };
  const double core = act(0), tokens = 128;
  EXPECT_DOUBLE_EQ(act(spec::kRecomputeCoreAttn), core);
  EXPECT_DOUBLE_EQ(core - act(spec::kRecomputeCoreAttn | spec::kRecomputeMoeAct),
                   3 * tokens * 2 /*top-2*/ * 2 * 32);
  EXPECT_DOUBLE_EQ(core - act(spec::kRecomputeCoreAttn | spec::kRecomputeLayerNorm),
                   3 * tokens * 2 * 64);
  EXPECT_DOUBLE_EQ(core - act(spec::kRecomputeCoreAttn | spec::kRecomputeMlp),
                   1 * tokens * 3 * 2 * 128);
  EXPECT_DOUBLE_EQ(
      act(spec::kRecomputeMoeAct) - act(spec::kRecomputeCoreAttn | spec::kRecomputeMoeAct),
      4 * tokens * 4 * 8);
  // MLA: q, k, v after the up-projections, every layer.
  const spec::ModelSpec ds = *spec::LoadModel("deepseek-v3-like");
  const AttentionShape sh = AttentionShapeOf(ds);
  auto mla = [&](uint32_t modules) {
    const Layout l{.dp = 8, .recompute = spec::Recompute::kSelective, .recompute_modules = modules};
    return EstimateLayout(ds, testing::H100Cluster(8), testing::Train(1024, 8), l, CostParams{})
        .memory.activations;
  };
  EXPECT_NEAR(mla(0) - mla(spec::kRecomputeCoreAttn | spec::kRecomputeMlaUpProj),
              static_cast<double>(ds.layers) * 1024 * 2 * (sh.q + sh.k + sh.v), 1e-6 * mla(0));
}

TEST(AttentionScores, SeedRingAttentionExample) {
  // Seed 000: 64 heads / TP 8 = 8 heads, 128,000 / CP 16 = 8,000 tokens: 8 * 8000^2 * 2 bytes.
  EXPECT_DOUBLE_EQ(AttentionScoreBlockBytes(64, 128000, 1, 8, 16, spec::CpKind::kRing), 1.024e9);
  // Without CP: 8 * 128,000^2 * 2 = 262 GB.
  EXPECT_NEAR(AttentionScoreBlockBytes(64, 128000, 1, 8, 1, spec::CpKind::kRing) / 1e9, 262.1, 0.1);
  // And through EstimateLayout on the case-study model.
  const spec::ModelSpec m = *spec::LoadModel("meridianfin-72b");
  CostParams p;
  p.materialize_scores = true;
  const Layout l{.dp = 1, .tp = 8, .pp = 8, .cp = 16, .ep = 1, .recompute = spec::Recompute::kFull};
  const Estimate e =
      EstimateLayout(m, testing::H100Cluster(1024), testing::Train(128000, 16), l, p);
  ASSERT_TRUE(e.violations.empty()) << e.violations[0];
  EXPECT_DOUBLE_EQ(e.memory.attention_scores, 1.024e9);
}

TEST(ModelState, Llama405bSeedNumbers) {
  // Seed 001: 405e9 params: 810 GB bf16 weights, 810 GB bf16 grads, 3,240 GB Adam m + v.
  EXPECT_DOUBLE_EQ(405e9 * 2, 810e9);
  const StateBytes& bf16 = PrecisionPolicyOf(spec::Precision::kBf16, false);
  EXPECT_DOUBLE_EQ(405e9 * bf16.moments, 3240e9);
  // The derived count (405.9B) through EstimateLayout on one (huge) GPU.
  const spec::ModelSpec m = *spec::LoadModel("llama3-405b");
  const double n = CountParams(m).total;
  const Estimate e = EstimateLayout(m, testing::H100Cluster(1), testing::Train(8192, 1), Layout{});
  EXPECT_DOUBLE_EQ(e.memory.weights, 2 * n);
  EXPECT_DOUBLE_EQ(e.memory.grads, 2 * n);
  EXPECT_DOUBLE_EQ(e.memory.optimizer, (bf16.master + bf16.moments) * n);
  EXPECT_NEAR(e.memory.weights / 1e9, 810, 810 * 0.003);
  // Seed 001 "FSDP" per rank with TP 8, PP 16 and DP 128 on 16,384 GPUs: the 810 / 128 of the
  // seed omits TP and PP; with them a middle stage holds 8 layers / 8.
}

// The precision policy (cost/precision.h): 16 bytes a parameter for bf16 mixed precision
// (Rajbhandari et al. 2020), 18 with Megatron's fp32 main grads (Korthikanti et al. 2022, Fig. 1:
// 2 + 4 + 4 + 8), 16 for fp32 (no master copy); memory and the DP all-reduce both follow it.
TEST(ModelState, PrecisionPolicyBytes) {
  EXPECT_DOUBLE_EQ(PrecisionPolicyOf(spec::Precision::kBf16, false).total(), 16);
  EXPECT_DOUBLE_EQ(PrecisionPolicyOf(spec::Precision::kBf16, true).total(), 18);
  EXPECT_DOUBLE_EQ(PrecisionPolicyOf(spec::Precision::kFp32, false).total(), 16);
  EXPECT_DOUBLE_EQ(PrecisionPolicyOf(spec::Precision::kFp32, false).master, 0);
  const spec::ModelSpec m = testing::GptTiny();
  const double n = CountParams(m).total;
  CostParams p;
  const Layout l{.dp = 2};
  const Estimate bf16 = EstimateLayout(m, testing::H100Cluster(2), testing::Train(128, 2), l, p);
  p.fp32_main_grads = true;
  const Estimate main = EstimateLayout(m, testing::H100Cluster(2), testing::Train(128, 2), l, p);
  ASSERT_TRUE(bf16.fits && main.fits);
  EXPECT_DOUBLE_EQ(bf16.memory.weights + bf16.memory.grads + bf16.memory.optimizer, 16 * n);
  EXPECT_DOUBLE_EQ(main.memory.weights + main.memory.grads + main.memory.optimizer, 18 * n);
  // All-reduce over dp = 2 of the gradient buffer: 2 (g-1)/g n bytes, in the reduction dtype.
  EXPECT_DOUBLE_EQ(bf16.comm_bytes.dp, 2 * 0.5 * 2 * n);
  EXPECT_DOUBLE_EQ(main.comm_bytes.dp, 2 * 0.5 * 4 * n);
}

TEST(Zero, StagesShardMonotonicallyAndExactly) {
  const spec::ModelSpec m = testing::GptTiny();
  double prev = 1e300;
  double w0 = 0, g0 = 0, o0 = 0;
  for (int z = 0; z <= 3; ++z) {
    const Layout l{.dp = 4, .zero = z};
    const Estimate e = EstimateLayout(m, testing::H100Cluster(4), testing::Train(128, 4), l);
    const double state = e.memory.weights + e.memory.grads + e.memory.optimizer;
    EXPECT_LT(state, prev) << "zero=" << z;
    prev = state;
    if (z == 0) {
      w0 = e.memory.weights;
      g0 = e.memory.grads;
      o0 = e.memory.optimizer;
    }
    EXPECT_DOUBLE_EQ(e.memory.optimizer, z >= 1 ? o0 / 4 : o0);
    EXPECT_DOUBLE_EQ(e.memory.grads, z >= 2 ? g0 / 4 : g0);
    EXPECT_DOUBLE_EQ(e.memory.weights, z >= 3 ? w0 / 4 : w0);
  }
}

TEST(ExpertParallel, ShardsExpertsNotTheRest) {
  const spec::ModelSpec m = testing::MoeTiny();
  const ParamCounts c = CountParams(m);
  const auto weights = [&](const Layout& l, int64_t seqs) {
    return EstimateLayout(m, testing::H100Cluster(l.gpus()), testing::Train(128, seqs), l)
        .memory.weights;
  };
  EXPECT_DOUBLE_EQ(weights(Layout{}, 1), 2 * c.total);
  EXPECT_DOUBLE_EQ(weights(Layout{.ep = 4}, 4), 2 * (c.non_expert() + c.expert() / 4));
  // Folded: ep divides dp*cp; experts replicated over dp*cp/ep = 2 ranks, ZeRO-1 shards their
  // optimizer state over those 2 and the non-expert state over all 4.
  const Layout folded{.dp = 4, .ep = 2, .zero = 1, .ep_placement = spec::EpPlacement::kFolded};
  const Estimate e = EstimateLayout(m, testing::H100Cluster(4), testing::Train(128, 4), folded);
  EXPECT_DOUBLE_EQ(e.memory.weights, 2 * (c.non_expert() + c.expert() / 2));
  EXPECT_DOUBLE_EQ(e.memory.optimizer, 12 * (c.non_expert() / 4 + c.expert() / 2 / 2));
}

TEST(Pipeline, MicrobatchesInFlightPerSchedule) {
  // GPT-tiny, 4 layers on pp = 2 (2 per stage), m = 8 micro-batches; stage 0 is the most loaded.
  spec::ModelSpec m = testing::GptTiny();
  m.vocab = 16;  // so the last stage's logits never outweigh the first stage's activations
  const auto act = [&](spec::Schedule s, int64_t V) {
    Layout l{.pp = 2, .schedule = s, .virtual_stages = V};
    const Estimate e = EstimateLayout(m, testing::H100Cluster(2), testing::Train(128, 8), l);
    if (s != spec::Schedule::kZeroBubble) {
      EXPECT_EQ(e.memory_stage, s == spec::Schedule::kGPipe ? 1 : 0);  // GPipe: equal, last wins
    }
    return e.memory.activations;
  };
  const double one = act(spec::Schedule::kOneFOneB, 1) / 2;  // min(m, p) = 2 in flight
  // GPipe's most loaded stage is the last one: 8 micro-batches, each also with the head's stash.
  EXPECT_DOUBLE_EQ(act(spec::Schedule::kGPipe, 1), 8 * (one + HeadStash(Layout{}, 64, 128)));
  // ZB-H1: 1F1B's micro-batches, plus the fp32 copies B keeps for W (per token, GeLU MLP, bf16
  // stash, h = a = kv = 64, f = 256, T = 128): MLP phase 4(2h + 2f) = 2560 B; then the MLP stash
  // 2*2f is freed and the attention's 4(2h + 2a + 2kv) = 1536 B added: peak 3072 B. A layer's W
  // copies (4096 B) outweigh its bf16 stash (one / 2 / 128 tokens), so each further layer B walks
  // adds the difference. Stage 0 (r = 0) has no micro-batch waiting for W; stage 1 has r = 1,
  // whose W copies include the head's 4(h + vocab) (x: final norm output, dy: logits grad).
  const Context ctx(m, testing::H100Cluster(2), testing::Train(128, 8), CostParams{});
  const Layout zb{.pp = 2, .schedule = spec::Schedule::kZeroBubble};
  const Layout f1b{.pp = 2, .schedule = spec::Schedule::kOneFOneB};
  const double walk = 128.0 * 3072 + (4096.0 * 128 - one / 2);  // 2 layers per stage
  EXPECT_DOUBLE_EQ(MemoryForStage(ctx, zb, 0).activations, 2 * one + walk);
  const double head_w = 128.0 * 4 * (64 + 16);
  EXPECT_DOUBLE_EQ(
      MemoryForStage(ctx, zb, 1).activations,
      MemoryForStage(ctx, f1b, 1).activations + (2 * 4096.0 * 128 + head_w) + head_w + walk);
  // Interleaved V = 2: Megatron's warm-up 2(p-1) + (V-1)p + 1 = 5 chunk-micro-batches of 1 layer.
  EXPECT_DOUBLE_EQ(act(spec::Schedule::kInterleaved, 2), 5 * one / 2);
}

TEST(Pipeline, UnevenSplitLlama3) {
  // 126 layers on 16 stages: the first and last stage hold 7, the others 8 (Llama 3).
  EXPECT_EQ(spec::ChunkLayers(126, 16, 0), 7);
  EXPECT_EQ(spec::ChunkLayers(126, 16, 1), 8);
  EXPECT_EQ(spec::ChunkLayers(126, 16, 15), 7);
  EXPECT_EQ(spec::ChunkFirstLayer(126, 16, 1), 7);
  EXPECT_EQ(spec::ChunkFirstLayer(126, 16, 15), 7 + 14 * 8);
  int64_t sum = 0;
  for (int64_t c = 0; c < 64; ++c) sum += spec::ChunkLayers(126, 64, c);
  EXPECT_EQ(sum, 126);
  EXPECT_EQ(spec::ChunkLayers(126, 128, 0), -1);  // a chunk would be empty
  EXPECT_EQ(spec::ChunkLayers(81, 4, 0), -1);     // short by 3
  EXPECT_EQ(spec::ChunkLayers(79, 4, 3), 19);     // short by 1: the last chunk
  EXPECT_EQ(spec::ChunkLayers(79, 4, 0), 20);
}

TEST(Memory, OverCapacityNamesTheLargestComponent) {
  const spec::ModelSpec m = *spec::LoadModel("llama3-70b");
  const Estimate e = EstimateLayout(m, *spec::LoadCluster("h100-sxm", 8), testing::Train(8192, 8),
                                    Layout{.dp = 8});
  EXPECT_FALSE(e.fits);
  ASSERT_EQ(e.violations.size(), 1u);
  EXPECT_NE(e.violations[0].find("over by"), std::string::npos) << e.violations[0];
  EXPECT_NE(e.violations[0].find("largest component optimizer"), std::string::npos)
      << e.violations[0];
}

}  // namespace
}  // namespace pentamesh::cost

namespace pentamesh::cost {
namespace {

TEST(Pipeline, ValidateAcceptsTheLlama3SplitAndCostsTheFullStage) {
  const spec::ModelSpec m = *spec::LoadModel("llama3-405b");
  const spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 16384);
  const spec::TrainSpec t = *spec::LoadTrain("llama3-405b-8k");
  const spec::Layout l{.dp = 128, .tp = 8, .pp = 16, .zero = 1};
  EXPECT_TRUE(spec::Validate(m, c, t, l).empty());
  const Context ctx(m, c, t);
  // Stage 0 has 7 layers + embedding, stage 1 the full 8: the critical stage is a middle one.
  const Estimate e = EstimateLayout(ctx, l);
  EXPECT_EQ(e.critical_stage, 1);
  // A split short by 3 is rejected with the rule's name.
  spec::ModelSpec odd = m;
  odd.layers = 125;
  const auto v = spec::Validate(odd, c, t, l);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("layers=125 must be divisible by pp*virtual_stages=16"), std::string::npos);
}

TEST(Cluster, GemmEfficiencyKey) {
  const std::string base =
      "[cluster]\npeak_tflops = 989\nhbm_gb = 80\nhbm_gbps = 3350\ngpus_per_node = 8\n"
      "nodes = 2\nintra_node_gbps = 450\nnics_per_node = 8\ninter_node_gbps = 50\n";
  auto ok = spec::ClusterFromTomlText(base + "gemm_efficiency = 0.5\n", "test");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_DOUBLE_EQ(ok->gemm_efficiency, 0.5);
  auto bad = spec::ClusterFromTomlText(base + "gemm_efficiency = 1.5\n", "test");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cluster.gemm_efficiency: must be <= 1"), std::string::npos)
      << bad.status().message();
  // The preset values feed the GEMM rate: halving the efficiency doubles big-GEMM compute.
  const spec::ModelSpec m = *spec::LoadModel("llama3-8b");
  const spec::TrainSpec t = testing::Train(8192, 8);
  spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 8);
  const double base_s = EstimateLayout(m, c, t, spec::Layout{.tp = 8}).time.compute;
  c.gemm_efficiency = 0.325;
  EXPECT_GT(EstimateLayout(m, c, t, spec::Layout{.tp = 8}).time.compute, 1.6 * base_s);
}

// The micro-batches cost/ counts in flight on each pipeline rank (internal::Stage: `inflight`
// stashes held from F to B, in stage-equivalents; ZB-H1's `pending_w`, waiting from B to W
// while B walks the next one) equal what schedule/'s generated programs hold, read off the
// programs themselves: every schedule of schedule/'s table (table.h) with the virtual stages a
// layout gives it, pp 2-4, V 1-3, every valid m up to 12.
TEST(StageInflight, EqualsTheGeneratedPrograms) {
  std::map<spec::Schedule, int> checked_per_kind;
  spec::ModelSpec m = testing::GptTiny();
  m.layers =
      72;  // every chunk of pp x V (4, 6, 8, 9, 12) holds the same layers: chunks weigh alike
  for (int pp = 2; pp <= 4; ++pp) {
    for (int m_count = 1; m_count <= 12; ++m_count) {
      // Every row of schedule/'s table with the virtual stages a layout gives it (1, or 2 and 3).
      std::vector<std::pair<spec::Schedule, int>> kinds;
      for (const schedule::ScheduleRow& row : schedule::Schedules()) {
        const int v_min = row.layout_virtual_stages_min;
        for (int v = v_min; v <= (v_min == 1 ? 1 : v_min + 1); ++v) {
          if (schedule::ValidateSchedule({row.kind, pp, m_count, v}).ok()) {
            kinds.push_back({row.kind, v});
          }
        }
      }
      for (const auto& [kind, v] : kinds) {
        Layout l;
        l.pp = pp;
        l.schedule = kind;
        l.virtual_stages = v;
        const Context ctx(m, testing::H100Cluster(8), testing::Train(128, m_count));
        internal::Terms t;
        internal::ComputeTerms(ctx, l, t);
        ASSERT_EQ(t.m, m_count);
        t.act_head = 0;  // the last chunk's head stash aside, every chunk weighs the same
        for (int r = 0; r < pp; ++r) {
          internal::Stage s;
          internal::ComputeStage(ctx, l, t, r, s);
          const auto program = schedule::Make(kind, pp, r, m_count, v);
          ASSERT_TRUE(program.ok()) << program.status().message();
          // F..B: the program without its W passes (B frees the stash).
          schedule::Program fb;
          for (const schedule::Action& a : *program) {
            if (a.kind != schedule::ActionKind::kWeight) fb.push_back(a);
          }
          const std::string where =
              fmt::format("{} pp={} m={} V={} rank={}", spec::ToString(kind), pp, m_count, v, r);
          EXPECT_DOUBLE_EQ(s.inflight, schedule::PeakInFlight(fb, v, m_count) / double(v)) << where;
          // B..W: micro-batches whose B ran and whose W has not, counted as each B starts.
          int waiting = 0, peak_waiting = 0;
          for (const schedule::Action& a : *program) {
            if (a.kind == schedule::ActionKind::kBackward &&
                schedule::FindRow(kind)->weight_passes) {
              peak_waiting = std::max(peak_waiting, waiting);
              ++waiting;
            } else if (a.kind == schedule::ActionKind::kWeight) {
              --waiting;
            }
          }
          EXPECT_DOUBLE_EQ(s.pending_w, peak_waiting) << where;
          ++checked_per_kind[kind];
        }
      }
    }
  }
  // The published four: gpipe, 1f1b, zb (V = 1) and interleaved (V = 2, 3 where pp divides m).
  EXPECT_EQ(checked_per_kind[spec::Schedule::kGPipe] + checked_per_kind[spec::Schedule::kOneFOneB] +
                checked_per_kind[spec::Schedule::kZeroBubble] +
                checked_per_kind[spec::Schedule::kInterleaved],
            3 * 12 * 3 * 3 + 2 * (6 * 2 + 4 * 3 + 3 * 4));
  for (const schedule::ScheduleRow& row : schedule::Schedules()) {
    EXPECT_GT(checked_per_kind[row.kind], 0) << spec::ToString(row.kind);
  }
}

}  // namespace
}  // namespace pentamesh::cost

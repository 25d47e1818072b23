// Step-time terms and bytes per collective against hand derivations: bubble formulas (seed's
// 15/79), terms adding up to the step, ring collective byte counts per group, link placement on
// the rank order pp-dp-ep-cp-tp, and MFU/throughput/cost arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "cost/internal.h"
#include "schedule/estimate.h"
#include "spec/load_toml.h"
#include "spec/validate.h"
#include "testing/tiny_specs.h"

namespace pentamesh::cost {
namespace {

using spec::Layout;

TEST(Bubble, ClosedForms) {
  const double b = BubbleOverIdeal(spec::Schedule::kOneFOneB, 16, 64, 1);
  EXPECT_DOUBLE_EQ(b / (1 + b), 15.0 / 79.0);  // seed: (p-1)/(m+p-1)
  EXPECT_DOUBLE_EQ(BubbleOverIdeal(spec::Schedule::kGPipe, 16, 64, 1), b);
  EXPECT_DOUBLE_EQ(BubbleOverIdeal(spec::Schedule::kInterleaved, 16, 64, 4), b / 4);
  EXPECT_DOUBLE_EQ(BubbleOverIdeal(spec::Schedule::kZeroBubble, 16, 64, 1), b / 3);
  EXPECT_DOUBLE_EQ(BubbleOverIdeal(spec::Schedule::kOneFOneB, 1, 64, 1), 0.0);
}

// The cost model's bubble is schedule/'s: idle / busy of the simulated schedule (equal costs) for
// every layout schedule on a grid of (p, m, V), ZB-H1 below m = p included.
TEST(Bubble, EqualsTheSimulatedSchedule) {
  for (int p = 2; p <= 6; ++p) {
    for (int m = 1; m <= 2 * p + 1; ++m) {
      for (auto [kind, v] : {std::pair{spec::Schedule::kGPipe, 1},
                             {spec::Schedule::kOneFOneB, 1},
                             {spec::Schedule::kZeroBubble, 1},
                             {spec::Schedule::kInterleaved, 2},
                             {spec::Schedule::kInterleaved, 3}}) {
        if (kind == spec::Schedule::kInterleaved && m % p != 0) continue;
        const auto f = schedule::BubbleFractionSimulated({kind, p, m, v});
        ASSERT_TRUE(f.ok()) << f.status().message();
        EXPECT_NEAR(BubbleOverIdeal(kind, p, m, v), *f / (1 - *f), 1e-12)
            << spec::ToString(kind) << " p=" << p << " m=" << m << " v=" << v;
      }
    }
  }
}

// Unequal stages: the step the cost model prices, m x the slowest stage + PipelineBubble, against
// the simulated makespan of the generated program with per-stage costs (F = B = W = a third of a
// stage's micro-batch time, each chunk 1/V of it; `head` extra on the last stage, `embed` on the
// first). With a light first stage (the planner's case: the embedding is a lookup) it is exact for
// every schedule; with a heavy first stage too, interleaved is within 10%. The old price,
// m x slowest x (1 + BubbleOverIdeal), was off by up to 30%.
TEST(Bubble, UnequalStagesMatchTheSimulatedSchedule) {
  std::vector<double> errors_heavy_first;
  double worst_old = 0;
  for (int p = 2; p <= 8; p += 2) {
    for (int m : {p, 2 * p, 4 * p}) {
      for (auto [kind, v] : {std::pair{spec::Schedule::kGPipe, 1},
                             {spec::Schedule::kOneFOneB, 1},
                             {spec::Schedule::kZeroBubble, 1},
                             {spec::Schedule::kInterleaved, 2}}) {
        for (const double head : {0.0, 0.3, 1.0}) {
          for (const double embed : {0.0, 0.2}) {
            const int stages = p * v;
            schedule::Costs costs;
            costs.per_stage.assign(stages, {});
            for (int s = 0; s < stages; ++s) {
              const double t = 1.0 / v + (s == 0 ? embed : 0.0) + (s == stages - 1 ? head : 0.0);
              costs.per_stage[s] = {t / 3, t / 3, t / 3};
            }
            const auto sim = schedule::SimulateSchedule({kind, p, m, v}, costs);
            ASSERT_TRUE(sim.ok()) << sim.status().message();
            const double first = 1.0 + embed, last = 1.0 + head;
            const double slowest = std::max(first, last);
            const double priced = m * slowest + PipelineBubble(kind, p, m, v, first, 1.0, last);
            const double err = priced / sim->makespan_s - 1;
            const double old_price = m * slowest * (1 + BubbleOverIdeal(kind, p, m, v));
            worst_old = std::max(worst_old, std::abs(old_price / sim->makespan_s - 1));
            const std::string name = std::string(spec::ToString(kind)) + " p=" + std::to_string(p) +
                                     " m=" + std::to_string(m) + " head=" + std::to_string(head) +
                                     " embed=" + std::to_string(embed);
            if (embed == 0.0) {
              EXPECT_NEAR(err, 0.0, 1e-9) << name;
            } else {
              EXPECT_LE(std::abs(err), 0.10) << name;
              errors_heavy_first.push_back(std::abs(err));
            }
          }
        }
      }
    }
  }
  std::sort(errors_heavy_first.begin(), errors_heavy_first.end());
  EXPECT_LE(errors_heavy_first[errors_heavy_first.size() / 2], 0.005);
  EXPECT_GT(worst_old, 0.25);  // what the old price missed on the same grid
}

TEST(Bubble, ThroughEstimateLayout) {
  // 64 layers on p = 16 stages, m = 64 micro-batches. The estimate's bubble is PipelineBubble of
  // its stages' micro-batch times; the LM head makes the last stage the slowest, so the bubble's
  // share of the pipeline is below equal stages' 15/79, the more so the larger the vocabulary.
  const auto bubble_share = [](int64_t vocab) {
    spec::ModelSpec m = testing::GptTiny();
    m.layers = 64;
    m.vocab = vocab;
    const Layout l{.pp = 16};
    const Context ctx(m, testing::H100Cluster(16), testing::Train(128, 64));
    const Estimate e = EstimateLayout(ctx, l);
    EXPECT_TRUE(e.fits);
    internal::Terms t;
    internal::ComputeTerms(ctx, l, t);
    double stage_time[3];
    for (int i = 0; i < 3; ++i) {
      internal::Stage s;
      internal::ComputeStage(ctx, l, t, std::array<int64_t, 3>{0, 1, 15}[i], s);
      stage_time[i] = internal::StageMicrobatchTime(t, s).total();
    }
    EXPECT_NEAR(e.time.bubble,
                PipelineBubble(l.schedule, 16, 64, 1, stage_time[0], stage_time[1], stage_time[2]),
                1e-12 * e.time.step);
    if (vocab > 1000) {  // the head's stage is the slowest: the bubble is the 15 others'
      EXPECT_EQ(e.critical_stage, 15);
      EXPECT_NEAR(e.time.bubble, 15.0 / 64.0 * 64 * (stage_time[0] + 14 * stage_time[1]) / 15,
                  1e-12 * e.time.step);
    }
    const Time& time = e.time;
    return time.bubble / (time.compute + time.tp + time.cp + time.ep + time.pp + time.bubble);
  };
  const double small_head = bubble_share(2), large_head = bubble_share(32000);
  EXPECT_LT(small_head, 15.0 / 79.0);
  EXPECT_LT(large_head, small_head - 0.01);
}

TEST(StepTime, TermsAddUpAndRatesFollow) {
  const spec::ModelSpec m = *spec::LoadModel("meridianfin-72b");
  const spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 1024);
  const spec::TrainSpec tr = *spec::LoadTrain("meridian-128k");
  const Layout l{.dp = 1,
                 .tp = 8,
                 .pp = 4,
                 .cp = 4,
                 .ep = 8,
                 .zero = 1,
                 .recompute = spec::Recompute::kFull,
                 .schedule = spec::Schedule::kInterleaved,
                 .virtual_stages = 2};
  const Estimate e = EstimateLayout(m, c, tr, l);
  ASSERT_TRUE(e.microbatches > 0) << e.violations[0];
  const Time& t = e.time;
  // The step is the sum of the listed terms (a term added to kTimeTerms is in it; nothing else is).
  double sum = 0;
  for (const TimeTerm& term : kTimeTerms) sum += t.*term.field;
  EXPECT_DOUBLE_EQ(t.step, sum);
  for (double term : {t.compute, t.tp, t.ep, t.pp, t.bubble}) EXPECT_GT(term, 0.0);
  // 128K attention hides the ring KV exchange (cp_overlap), but the bytes are sent.
  EXPECT_GE(t.cp, 0.0);
  EXPECT_GT(e.comm_bytes.cp, 0.0);
  EXPECT_DOUBLE_EQ(e.tokens_per_s, tr.global_batch_tokens / t.step);
  const ParamCounts pc = CountParams(m);
  (void)pc;
  const double peak = 989e12 * 1024;
  EXPECT_DOUBLE_EQ(e.mfu,
                   Flops(m, tr.seq_len, spec::Recompute::kNone).model * e.tokens_per_s / peak);
  EXPECT_GT(e.hfu, e.mfu);  // full recomputation
  EXPECT_LT(e.mfu_causal, e.mfu);
  EXPECT_DOUBLE_EQ(e.days, tr.total_tokens / e.tokens_per_s / 86400);
  EXPECT_DOUBLE_EQ(e.cost_usd, e.days * 24 * 1024 * tr.usd_per_gpu_hour);
  EXPECT_GT(e.mfu, 0.05);
  EXPECT_LT(e.mfu, 0.70);
}

TEST(CommBytes, TensorParallelPerLayer) {
  // GPT-tiny (4 layers), tp = 4, 1 micro-batch of 128 tokens, n = T*h*2 bytes per activation.
  // With SP, per block (attention, FFN) an all-gather and a reduce-scatter forward and three
  // transfers backward (all-gather of dy, all-gather of the input again for the weight grad,
  // reduce-scatter of dx), each sending (t-1)/t * n; the first (= last) stage adds the
  // embedding's RS + AG, the LM head's AG + AG + RS, 3 fp32 CE all-reduces, and once per step the
  // all-reduce of the 2 * 4 + 1 norm weight grads (bf16 grads here).
  const spec::ModelSpec m = testing::GptTiny();
  const Layout l{.tp = 4};
  const Context ctx(m, testing::H100Cluster(4), testing::Train(128, 1));
  const CommBytes b = CommBytesForStage(ctx, l, 0);
  const double n = 128.0 * 64 * 2, g = 3.0 / 4;
  const double ce = 3 * 2 * g * 4 * 128;
  const double norms = 2 * g * (2 * 4 + 1) * 64 * 2;
  EXPECT_DOUBLE_EQ(b.tp, 5 * 8 * g * n + 2 * g * n + 3 * g * n + ce + norms);
  // Without SP: an all-reduce (2(t-1)/t n) forward and one backward per block, the embedding's
  // forward and the head's backward all-reduce.
  Layout no_sp = l;
  no_sp.sp = false;
  EXPECT_DOUBLE_EQ(CommBytesForStage(ctx, no_sp, 0).tp, 4 * 8 * g * n + 2 * g * n + 2 * g * n + ce);
  // Full recomputation repeats each block's forward collectives (SP: AG + RS; else one AR).
  Layout full = l;
  full.recompute = spec::Recompute::kFull;
  EXPECT_DOUBLE_EQ(CommBytesForStage(ctx, full, 0).tp, b.tp + 2 * 8 * g * n);
  no_sp.recompute = spec::Recompute::kFull;
  EXPECT_DOUBLE_EQ(CommBytesForStage(ctx, no_sp, 0).tp, 6 * 8 * g * n + 2 * g * n + 2 * g * n + ce);
  EXPECT_DOUBLE_EQ(b.dp + b.pp + b.cp + b.ep, 0.0);
}

TEST(CommBytes, DataParallelPerZeroStage) {
  const spec::ModelSpec m = testing::GptTiny();
  const double p = CountParams(m).total, g = 7.0 / 8;
  const auto dp_bytes = [&](int zero) {
    const Layout l{.dp = 8, .zero = zero};
    const Context ctx(m, testing::H100Cluster(8), testing::Train(128, 16));  // m = 2 micro-batches
    return CommBytesForStage(ctx, l, 0).dp;
  };
  EXPECT_DOUBLE_EQ(dp_bytes(0), 2 * g * 2 * p);                    // ring all-reduce of bf16 grads
  EXPECT_DOUBLE_EQ(dp_bytes(1), g * 2 * p + g * 2 * p);            // reduce-scatter + all-gather
  EXPECT_DOUBLE_EQ(dp_bytes(2), 2 * g * 2 * p + g * 2 * p);        // reduce-scatter per micro-batch
  EXPECT_DOUBLE_EQ(dp_bytes(3), 2 * (2 * g * 2 * p + g * 2 * p));  // per micro-batch
}

TEST(CommBytes, PipelineContextAndExpert) {
  const spec::ModelSpec m = testing::MoeTiny();
  // pp = 2, cp = 2 (ring), ep = 2 separate: 8 GPUs; 4 sequences -> dp*ep = 2 data ranks, m = 2.
  const Layout l{.pp = 2, .cp = 2, .ep = 2};
  const Context ctx(m, testing::H100Cluster(8), testing::Train(256, 4));
  const double T = 256.0 / 2;  // tokens per rank
  const CommBytes first = CommBytesForStage(ctx, l, 0);
  const CommBytes last = CommBytesForStage(ctx, l, 1);
  // One activation send forward (stage 0) or one gradient send backward (stage 1) per mb.
  EXPECT_DOUBLE_EQ(first.pp, 2 * T * 64 * 2);
  EXPECT_DOUBLE_EQ(last.pp, first.pp);
  // Ring CP: K and V chunk (2 * T * h_kv * 2 bytes) forward once per ring step, K, V, dK, dV
  // backward: 3 (cp-1) chunks per layer; 2 layers per stage, 2 micro-batches.
  // Plus the load-balancing statistics: per MoE layer and micro-batch an all-gather of 2E+1
  // doubles per rank over cp, (cp-1) (2E+1) 8 bytes sent (stage 0: one MoE layer, stage 1: two).
  const double ring = 2 * 2 * 3 * 1 * (2 * T * 32 * 2);
  const double balance = 1 * (2 * m.moe.experts + 1) * 8;
  EXPECT_DOUBLE_EQ(first.cp, ring + 2 * 1 * balance);
  EXPECT_DOUBLE_EQ(last.cp, ring + 2 * 2 * balance);
  // aux_loss_scope = global: the statistics go over every data rank instead (dp_cp: dp x ep x cp
  // = 4 ranks under the separate placement), counted in the dp group's bytes.
  spec::ModelSpec global = m;
  global.moe.aux_loss_scope = spec::AuxLossScope::kGlobal;
  const Context ctx_global(global, testing::H100Cluster(8), testing::Train(256, 4));
  const CommBytes first_global = CommBytesForStage(ctx_global, l, 0);
  EXPECT_DOUBLE_EQ(first_global.cp, ring);
  EXPECT_DOUBLE_EQ(first_global.dp - first.dp, 2 * 1 * 3 * (2 * m.moe.experts + 1) * 8);
  // EP: dispatch + combine, forward and backward: 4 (ep-1)/ep * T * top_k * h * 2 per MoE layer,
  // plus the forward's (ep-1)/ep * E int64 row counts; stage 0 has layers 0 (dense) and 1 (MoE),
  // stage 1 has two MoE layers.
  const double a2a = 4 * 0.5 * T * 2 * 64 * 2 + 0.5 * m.moe.experts * 8;
  EXPECT_DOUBLE_EQ(first.ep, 2 * 1 * a2a);
  EXPECT_DOUBLE_EQ(last.ep, 2 * 2 * a2a);
}

// Interleaved pipelines that overlap their sends (CostParams::pp_p2p_overlap, Megatron's
// overlap_p2p_comm): a send costs what outlasts half a chunk's forward + backward, by hand on one
// stage; other schedules keep every send on the critical path.
TEST(PipelineP2p, OverlappedSendsCostWhatOutlastsHalfAChunk) {
  internal::Terms t;
  t.V = 4;
  t.time_dense_layer_s = 2e-3;  // 8 layers: 16 ms a micro-batch, 4 ms a chunk
  t.pp_send_s = 3e-3;
  internal::Stage s;
  s.layers = 8;
  s.sends = 8;
  const internal::StageTime exposed = internal::StageMicrobatchTime(t, s);
  EXPECT_DOUBLE_EQ(exposed.pp, 8 * 3e-3);
  t.pp_overlap = true;
  EXPECT_DOUBLE_EQ(internal::StageMicrobatchTime(t, s).pp, 8 * (3e-3 - 16e-3 / (2 * 4)));
  t.pp_send_s = 1e-3;  // shorter than half a chunk: hidden
  EXPECT_DOUBLE_EQ(internal::StageMicrobatchTime(t, s).pp, 0.0);

  // Through the estimate: only interleaved schedules take it, and compute is unchanged.
  const spec::ModelSpec m = *spec::LoadModel("llama3-70b");
  const spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 64);
  const spec::TrainSpec tr = testing::Train(8192, 256);
  CostParams p;
  for (const Layout& l : {Layout{.dp = 2,
                         .tp = 4,
                         .pp = 8,
                         .schedule = spec::Schedule::kInterleaved,
                         .virtual_stages = 5},
                          Layout{.dp = 2, .tp = 4, .pp = 8}}) {
    p.pp_p2p_overlap = false;
    const Estimate base = EstimateLayout(m, c, tr, l, p);
    p.pp_p2p_overlap = true;
    const Estimate overlapped = EstimateLayout(m, c, tr, l, p);
    ASSERT_GT(base.time.pp, 0);
    EXPECT_DOUBLE_EQ(overlapped.time.compute, base.time.compute);
    EXPECT_DOUBLE_EQ(overlapped.comm_bytes.pp, base.comm_bytes.pp);
    if (l.schedule == spec::Schedule::kInterleaved) {
      EXPECT_LT(overlapped.time.pp, base.time.pp);
    } else {
      EXPECT_DOUBLE_EQ(overlapped.time.pp, base.time.pp);
    }
  }
}

TEST(Links, TensorParallelInsideANodeIsFasterThanAcross) {
  // Same bytes, same GPU count: TP = 8 in a node vs a TP-like CP group that crosses nodes.
  const spec::ModelSpec m = *spec::LoadModel("llama3-70b");
  const spec::TrainSpec tr = testing::Train(8192, 64);
  const spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 64);
  const Estimate inside = EstimateLayout(m, c, tr, Layout{.dp = 8, .tp = 8, .zero = 1});
  const Estimate across = EstimateLayout(m, c, tr, Layout{.dp = 8, .tp = 8, .zero = 3});
  EXPECT_GT(inside.time.tp, 0.0);
  EXPECT_GT(across.comm_bytes.dp, inside.comm_bytes.dp);  // ZeRO-3 gathers every micro-batch
  // DP over 8 ranks with stride tp = 8 lives on 8 nodes: 1 member per node -> the NIC.
  const Estimate dp_only = EstimateLayout(*spec::LoadModel("llama3-8b"), c, tr, Layout{.dp = 64});
  const Estimate dp_tp =
      EstimateLayout(*spec::LoadModel("llama3-8b"), c, tr, Layout{.dp = 8, .tp = 8});
  EXPECT_GT(dp_only.comm_bytes.dp, 0.0);
  EXPECT_GT(dp_tp.comm_bytes.tp, 0.0);
}

TEST(Imbalance, DrivesTheWorstEpRank) {
  const spec::ModelSpec m = *spec::LoadModel("mixtral-8x7b");
  const spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 64);
  const spec::TrainSpec tr = testing::Train(4096, 256);
  const Layout l{.dp = 4, .tp = 2, .pp = 1, .ep = 8};
  CostParams p;
  const Estimate base = EstimateLayout(m, c, tr, l, p);
  p.moe_imbalance = 1.5;
  const Estimate skew = EstimateLayout(m, c, tr, l, p);
  EXPECT_GT(skew.time.compute, base.time.compute);
  EXPECT_GT(skew.time.ep, base.time.ep);
  EXPECT_GT(skew.memory.activations, base.memory.activations);
  // The rows scale with the imbalance; the per-expert counts (E int64 per forward) do not.
  const double counts = 7.0 / 8 * m.moe.experts * 8 * static_cast<double>(m.MoeLayerCount()) *
                        static_cast<double>(spec::MicroBatches(tr, l));
  EXPECT_DOUBLE_EQ(skew.comm_bytes.ep - counts, 1.5 * (base.comm_bytes.ep - counts));
}

// The two fitted MoE terms by hand (calib's expert_gemm_us and ep_overlap): each local expert's
// two forward GEMMs pay expert_gemm_overhead_s, three times with backward (no recomputation), in
// every MoE layer and micro-batch; ep_overlap hides that share of the all-to-all's seconds and
// none of its bytes, where the layout lets the overlap run.
TEST(MoeTerms, PerExpertGemmCostAndEpOverlapByHand) {
  const spec::ModelSpec m = *spec::LoadModel("mixtral-8x7b");
  const spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 64);
  const spec::TrainSpec tr = testing::Train(4096, 256);
  const Layout l{.dp = 16, .tp = 2, .pp = 1, .ep = 2};
  CostParams p;
  const Estimate base = EstimateLayout(m, c, tr, l, p);
  p.expert_gemm_overhead_s = 1e-4;
  const Estimate slow = EstimateLayout(m, c, tr, l, p);
  const double local_experts = static_cast<double>(m.moe.experts) / 2;
  const double per_microbatch = static_cast<double>(m.MoeLayerCount()) * local_experts * 2 * 3;
  EXPECT_NEAR(slow.time.compute - base.time.compute,
              static_cast<double>(spec::MicroBatches(tr, l)) * per_microbatch * 1e-4, 1e-9);
  EXPECT_DOUBLE_EQ(slow.time.ep, base.time.ep);
  p.expert_gemm_overhead_s = 0;
  p.ep_overlap = 0.4;
  const Estimate hidden = EstimateLayout(m, c, tr, l, p);
  ASSERT_GT(base.time.ep, 0);
  EXPECT_NEAR(hidden.time.ep, 0.6 * base.time.ep, 1e-12 * base.time.ep);
  EXPECT_DOUBLE_EQ(hidden.comm_bytes.ep, base.comm_bytes.ep);
  EXPECT_DOUBLE_EQ(hidden.time.compute, base.time.compute);
  // Megatron-Core refuses the overlap with full recomputation, and with pp > 1 without virtual
  // stages (spec::EpOverlapRuns): there the share hides nothing.
  Layout full = l;
  full.recompute = spec::Recompute::kFull;
  p.ep_overlap = 0;
  const Estimate full_base = EstimateLayout(m, c, tr, full, p);
  p.ep_overlap = 0.4;
  EXPECT_DOUBLE_EQ(EstimateLayout(m, c, tr, full, p).time.ep, full_base.time.ep);
}

// DeepEP / HybridEP's dispatch: a token crosses to each remote node holding one of its experts
// once. The share of remote copies that cross is checked against every assignment of a token's 8
// experts to 4 nodes counted one by one (4^8 of them), not the closed form.
TEST(MoeTerms, PerNodeDispatchSendsATokenOnceANode) {
  internal::Link link;
  link.size = 32;
  link.per_node = 8;
  link.intra = false;
  link.nvlink_Bps = 360e9;
  link.nic_Bps = 42.5e9;
  link.alpha_s = 8e-6;
  double distinct_remote = 0;
  for (int code = 0; code < 65536; ++code) {
    std::array<bool, 4> hit{};
    for (int j = 0, c = code; j < 8; ++j, c /= 4) hit[static_cast<size_t>(c % 4)] = true;
    distinct_remote += static_cast<double>(hit[1] + hit[2] + hit[3]) / 65536.0;
  }
  const double n = 1e9, remote_copies = 8 * 0.75;  // per token: 8 copies, 3 of 4 nodes remote
  const internal::Comm c = internal::DispatchPerNode(link, n, 8);
  const double nic = 0.75 * n * distinct_remote / remote_copies;
  const double nvlink = 7.0 / 32 * n + 0.75 * n * 7.0 / 8;
  EXPECT_NEAR(c.wire_bytes, nic + nvlink, 1e-6 * n);
  EXPECT_NEAR(c.seconds, (3 + 7) * 8e-6 + std::max(nic / 42.5e9, nvlink / 360e9), 1e-12);
  // Fewer bytes leave the node than an all-to-all sends there; one node and top-1 are the
  // all-to-all itself.
  EXPECT_LT(c.seconds, internal::AllToAll(link, n).seconds);
  EXPECT_EQ(internal::DispatchPerNode(link, n, 1).seconds, internal::AllToAll(link, n).seconds);
  link.per_node = 32;
  link.intra = true;
  EXPECT_EQ(internal::DispatchPerNode(link, n, 8).seconds, internal::AllToAll(link, n).seconds);
}

// Through the estimate: the flag moves the ep term only, and only where ep spans nodes.
// What the recomputed modules cost: mlp reruns the dense FFN's GEMMs (the hardware FLOPs gain
// 2 x its parameters per token, Megatron's count), moe_act and layernorm only memory-bound kernels
// (under 3% of the compute), and a list without core_attn does not rerun the attention core.
TEST(Recompute, ModulesCostTheirForwardOnly) {
  const spec::ModelSpec m = *spec::LoadModel("llama3-8b");
  const spec::TrainSpec tr = testing::Train(8192, 64);
  auto est = [&](spec::Recompute r, uint32_t modules) {
    const Layout l{.dp = 8, .recompute = r, .recompute_modules = modules};
    return EstimateLayout(m, testing::H100Cluster(8), tr, l, CostParams{});
  };
  const Estimate none = est(spec::Recompute::kNone, 0);
  const Estimate mlp = est(spec::Recompute::kSelective, spec::kRecomputeMlp);
  const ParamCounts c = CountParams(m);
  const FlopsPerToken f = Flops(m, 8192, spec::Recompute::kNone);
  EXPECT_NEAR(mlp.hfu / mlp.mfu, (f.model + 2 * c.dense_mlp) / f.model, 1e-9);
  EXPECT_GT(mlp.time.compute, none.time.compute);
  EXPECT_NEAR(none.hfu, none.mfu, 1e-12);
  const spec::ModelSpec moe = *spec::LoadModel("mixtral-8x7b");
  auto moe_est = [&](spec::Recompute r, uint32_t modules) {
    const Layout l{.dp = 8,
                   .ep = 8,
                   .recompute = r,
                   .recompute_modules = modules,
                   .ep_placement = spec::EpPlacement::kFolded};
    return EstimateLayout(moe, testing::H100Cluster(8), testing::Train(4096, 64), l, CostParams{});
  };
  const Estimate plain = moe_est(spec::Recompute::kNone, 0);
  const Estimate cheap =
      moe_est(spec::Recompute::kSelective, spec::kRecomputeMoeAct | spec::kRecomputeLayerNorm);
  EXPECT_GT(cheap.time.compute, plain.time.compute);
  EXPECT_LT(cheap.time.compute, 1.03 * plain.time.compute);
  EXPECT_DOUBLE_EQ(cheap.hfu, cheap.mfu);
  EXPECT_LT(cheap.memory.activations, plain.memory.activations);
  const Estimate core = moe_est(spec::Recompute::kSelective, 0);
  EXPECT_GT(core.time.compute, cheap.time.compute);
}

TEST(MoeTerms, PerNodeDispatchActsAcrossNodesOnly) {
  const spec::ModelSpec m = *spec::LoadModel("deepseek-v3-like");
  const spec::TrainSpec tr = testing::Train(4096, 4096);
  auto ep = [&](int64_t gpus, const Layout& l, bool per_node) {
    CostParams p;
    p.ep_dispatch_per_node = per_node;
    return EstimateLayout(m, *spec::LoadCluster("b200", gpus), tr, l, p);
  };
  const Layout across{.dp = 32,
                      .pp = 8,
                      .ep = 32,
                      .schedule = spec::Schedule::kInterleaved,
                      .virtual_stages = 2,
                      .ep_placement = spec::EpPlacement::kFolded};
  const Estimate a2a = ep(256, across, false), per_node = ep(256, across, true);
  ASSERT_GT(a2a.time.ep, 0);
  EXPECT_LT(per_node.time.ep, 0.7 * a2a.time.ep);
  // Fewer bytes through the NICs (the time), more in all: the arrivals are forwarded over NVLink.
  EXPECT_GT(per_node.comm_bytes.ep, a2a.comm_bytes.ep);
  EXPECT_DOUBLE_EQ(per_node.time.compute, a2a.time.compute);
  Layout inside = across;
  inside.dp = 16;
  inside.pp = 16;
  inside.ep = 8;
  inside.schedule = spec::Schedule::kOneFOneB;
  inside.virtual_stages = 1;
  EXPECT_DOUBLE_EQ(ep(256, inside, true).time.ep, ep(256, inside, false).time.ep);
}

}  // namespace
}  // namespace pentamesh::cost

namespace pentamesh::cost {
namespace {

// Alpha-beta by hand: GPT-tiny, DP over 16 ranks on 2 nodes of 8 (tp = 1): the ring crosses the
// node boundary with 8 members per node -> min(NVLink 450 * 0.8, 8 NICs * 50 * 0.85) = 340 GB/s.
TEST(Links, DataParallelAllReduceAcrossTwoNodes) {
  const spec::ModelSpec m = testing::GptTiny();
  CostParams p;
  p.dp_overlap = 0;
  const Estimate e = EstimateLayout(m, testing::H100Cluster(16), testing::Train(128, 16),
                                    spec::Layout{.dp = 16}, p);
  const double g = 16, grads = CountParams(m).total * 2;
  const double expected = 2 * (g - 1) * 8e-6 + 2 * (g - 1) / g * grads / 340e9;
  EXPECT_NEAR(e.time.dp, expected, 1e-12);
  // DP with stride tp = 8 (one member per node): each rank's own NIC share, 50 * 0.85.
  const Estimate strided = EstimateLayout(m, testing::H100Cluster(16), testing::Train(128, 16),
                                          spec::Layout{.dp = 2, .tp = 8}, p);
  // Per-rank params: attention and FFN / 8, norms whole, embedding / 8, final norm.
  const double local =
      4 * (4.0 * 64 * 64 / 8 + 128) + 4 * (2.0 * 64 * 256 / 8) + 1000.0 * 64 / 8 + 64;
  EXPECT_NEAR(strided.time.dp, 2 * 1 * 8e-6 + 2 * 0.5 * local * 2 / (50e9 * 0.85), 1e-15);
}

// TP = 8 inside a node: per layer 8 all-gathers/reduce-scatters of T*h*2 bytes at NVLink speed.
TEST(Links, TensorParallelInsideANode) {
  spec::ModelSpec m = testing::GptTiny();
  CostParams p;
  const Context ctx(m, testing::H100Cluster(8), testing::Train(128, 1), p);
  const Estimate e = EstimateLayout(ctx, spec::Layout{.tp = 8});
  const double n = 128.0 * 64 * 2, ag = 7 * 3e-6 + 7.0 / 8 * n / (450e9 * 0.8);
  const double ce = 2 * 7 * 3e-6 + 2 * 7.0 / 8 * 4 * 128 / (450e9 * 0.8);
  // SP once per step: the all-reduce of the 2 * 4 + 1 norm weight grads (bf16 grads).
  const double norms = 2 * 7 * 3e-6 + 2 * 7.0 / 8 * 9 * 64 * 2 / (450e9 * 0.8);
  // 4 layers x 10 collectives, embedding 2, head 3 + 3 cross-entropy all-reduces; m = 1.
  EXPECT_NEAR(e.time.tp, 4 * 10 * ag + 2 * ag + 3 * ag + 3 * ce + norms, 1e-15);
}

// A reduction rate (intra_node_reduce_gbps: a CPU host's sum; 0 = free, the GPU default) adds
// (g-1)/g n / B_reduce to every reduce-scatter and all-reduce and nothing to the all-gathers.
// TP = 8 with SP: per layer 2 blocks x 2 reduce-scatters, the embedding's and the head's one, the
// 3 cross-entropy all-reduces and the norm-grad all-reduce. DP (nothing hidden): ZeRO-0's
// all-reduce and ZeRO-1's reduce-scatter sum the gradients once, ZeRO-3 once per micro-batch.
TEST(Links, ReductionRateChargesReductionsOnly) {
  const spec::ModelSpec m = testing::GptTiny();
  CostParams p;
  p.dp_overlap = 0;
  const spec::ClusterSpec free = testing::H100Cluster(8);
  spec::ClusterSpec summing = free;
  summing.intra_node_reduce_gbps = 100;
  const double f = 7.0 / 8, b_reduce = 100e9;
  const auto time = [&](const spec::ClusterSpec& c, const spec::Layout& l, int64_t seqs) {
    return EstimateLayout(m, c, testing::Train(128, seqs), l, p).time;
  };
  const spec::Layout tp{.tp = 8};
  const double n = 128.0 * 64 * 2, ce = 4.0 * 128, norms = 9.0 * 64 * 2;
  EXPECT_NEAR(time(summing, tp, 1).tp - time(free, tp, 1).tp,
              f * ((4 * 4 + 2) * n + 3 * ce + norms) / b_reduce, 1e-15);
  const double grads = CountParams(m).total * 2;
  for (int zero : {0, 1}) {
    const spec::Layout dp{.dp = 8, .zero = zero};
    EXPECT_NEAR(time(summing, dp, 16).dp - time(free, dp, 16).dp, f * grads / b_reduce, 1e-15)
        << "zero=" << zero;
  }
  // ZeRO-3: each micro-batch's gradients are reduce-scattered (16 / 8 = 2 micro-batches of 1).
  const spec::Layout fsdp{.dp = 8, .zero = 3};
  EXPECT_NEAR(time(summing, fsdp, 16).dp - time(free, fsdp, 16).dp, 2 * f * grads / b_reduce,
              1e-14);
}

// Overlap is bounded by what can hide: even with perfect overlap (dp_overlap = cp_overlap = 1)
// the first layer's gradients (reduced after the last backward), ZeRO-1's first weight gather,
// ZeRO-3's first gather and last reduce-scatter, and ring CP's last dK, dV stay exposed; and the
// exposed DP time does not shrink when a bubble appears (the bubble hides nothing).
TEST(Overlap, FirstAndLastBucketsStayExposed) {
  const spec::ModelSpec m = testing::GptTiny();
  CostParams p;
  p.dp_overlap = 1.0;
  p.cp_overlap = 1.0;
  for (int zero : {0, 1, 3}) {
    const Layout l{.dp = 4, .zero = zero};
    const Estimate e = EstimateLayout(m, testing::H100Cluster(4), testing::Train(128, 16), l, p);
    ASSERT_TRUE(e.fits);
    EXPECT_GT(e.time.dp, 0.0) << "zero=" << zero;
  }
  const Layout ring{.cp = 4};
  const Estimate e = EstimateLayout(m, testing::H100Cluster(4), testing::Train(128, 1), ring, p);
  ASSERT_TRUE(e.fits);
  EXPECT_GT(e.time.cp, 0.0);
  // dp = 2 x pp = 2 (bubble) against dp = 2 alone: the stage's DP time per layer is what counts.
  const Layout flat{.dp = 2, .zero = 1};
  const Layout piped{.dp = 2, .pp = 2, .zero = 1};
  const Estimate a = EstimateLayout(m, testing::H100Cluster(2), testing::Train(128, 8), flat);
  const Estimate b = EstimateLayout(m, testing::H100Cluster(4), testing::Train(128, 8), piped);
  ASSERT_TRUE(a.fits && b.fits);
  EXPECT_GT(b.time.bubble, 0.0);
  EXPECT_GT(b.time.dp, 0.0);
}

}  // namespace
}  // namespace pentamesh::cost

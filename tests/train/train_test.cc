// The training loop on a small slice of the real corpus (tests/data/fixtures.h): it learns
// (held-out loss below the unigram baseline), it is deterministic (bitwise-equal losses for the
// same seed), bf16 mixed precision tracks fp32, and bad configs fail with the field named. Also the
// LR schedule, clipping and the AdamW decay mask.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cmath>

#include "data/fixtures.h"
#include "spec/validate.h"
#include "train/engine_rules.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace pentamesh::train {
namespace {

std::string RunToml(const std::string& dataset, const std::string& extra_model = "") {
  return fmt::format(R"(
[model]
name = "t"
layers = 2
hidden = 64
heads = 4
kv_heads = 2
ffn_hidden = 160
vocab = 512
max_seq_len = 64
{}
[train]
seq_len = 64
global_batch_seqs = 8
precision = "fp32"
total_tokens = 61440
[optim]
lr = 1e-2
min_lr = 1e-3
warmup_steps = 10
[data]
dataset = "{}"
[run]
seed = 7
layout = "mbs=4"
eval_batches = 4
threads = 1
)",
                     extra_model, dataset);
}

RunConfig Load(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto c = RunConfigFromToml(text, "test.toml", sets);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

std::string Error(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto c = RunConfigFromToml(text, "test.toml", sets);
  if (c.ok()) {
    auto t = Trainer::Create(*c);
    return t.ok() ? "" : t.status().message();
  }
  return c.status().message();
}

TEST(LrSchedule, WarmupCosineFloor) {
  const LrSchedule s{.lr_max = 1.0, .lr_min = 0.1, .warmup_steps = 4, .total_steps = 14};
  EXPECT_DOUBLE_EQ(LearningRate(s, 0), 0.25);
  EXPECT_DOUBLE_EQ(LearningRate(s, 3), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(s, 4), 1.0);
  EXPECT_NEAR(LearningRate(s, 9), 0.55, 1e-12);  // half way: (max + min) / 2
  EXPECT_NEAR(LearningRate(s, 14), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(s, 100), 0.1, 1e-12);
}

TEST(Optimizer, ClipAndDecayMask) {
  EXPECT_DOUBLE_EQ(ClipScale(0.5, 1.0), 1.0);
  EXPECT_NEAR(ClipScale(4.0, 1.0), 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(ClipScale(4.0, 0.0), 1.0);
  core::Allocator alloc;
  model::ParamSet p(alloc, core::Dtype::kF32);
  p.Add("w", {2}, {}, {.kind = model::InitKind::kOnes}, /*weight_decay=*/true);
  p.Add("norm", {2}, {}, {.kind = model::InitKind::kOnes}, /*weight_decay=*/false);
  p.Finalize();
  p.Init(1);  // grads are zero: only the decay moves weights
  AdamWStep(p, {.weight_decay = 0.5}, /*lr=*/0.1, 1.0, 1);
  EXPECT_FLOAT_EQ(p.master(0).f32()[0], 0.95f);
  EXPECT_FLOAT_EQ(p.master(1).f32()[0], 1.0f);
  p.grad(0).f32()[0] = 3;
  p.grad(1).f32()[1] = 4;
  EXPECT_DOUBLE_EQ(GlobalGradNorm(p), 5.0);
}

TEST(RunConfig, OverridesAndErrorsNameTheField) {
  const std::string ds = data::testing::Corpus().dataset;
  const RunConfig c =
      Load(RunToml(ds), {"optim.lr=0.5", "run.layout=\"mbs=2 recompute=full\"", "model.layers=3"});
  EXPECT_EQ(c.optim.lr, 0.5);
  EXPECT_EQ(c.run.layout.mbs, 2);
  EXPECT_EQ(c.run.layout.recompute, spec::Recompute::kFull);
  EXPECT_EQ(c.model.layers, 3);
  EXPECT_EQ(c.total_steps(), 120);
  EXPECT_NE(Error(RunToml(ds), {"optim.lr_peak=1"}).find("optim.lr_peak: unknown key"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"train.seq_len=128"})
                .find("train.seq_len: 128 exceeds model.max_seq_len"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"model.heads=3", "model.kv_heads=3"})
                .find("model.heads: 3 does not divide hidden"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"run.layout=\"tp=2\""}).find("run.layout"), std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"run.layout=\"mbs=3\""}).find("mbs=3 must divide"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"optim.warmup_steps=500"}).find("optim.warmup_steps"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"train.precision=\"fp8\""}).find("train.precision"),
            std::string::npos);
  EXPECT_NE(
      Error(RunToml(ds), {"run.layout=\"mbs=4 recompute=selective recompute_modules=layernorm\""})
          .find("run.layout: recompute_modules=layernorm is not implemented by the CPU engine"),
      std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"bogus.key=1"}).find("bogus: unknown table"), std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"novalue"}).find("--set 'novalue'"), std::string::npos);
  EXPECT_NE(Error(RunToml("/nonexistent/dataset"))
                .find("data.dataset: /nonexistent/dataset has no manifest.json"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"model.vocab=1024"})
                .find("model.vocab: 1024 does not match the tokenizer's vocab 512"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"model.head_dim=15"}).find("model.head_dim: 15 must be even"),
            std::string::npos);
}

// Numbers a config type cannot hold are errors naming the field, never out-of-range conversions
// (found by the fuzzer: seq_len = 8E92).
TEST(RunConfig, OutOfRangeNumbersNameTheField) {
  const std::string ds = data::testing::Corpus().dataset;
  EXPECT_NE(Error(RunToml(ds), {"run.steps=8e92"}).find("run.steps: must be an integer"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"run.steps=nan"}).find("run.steps: must be finite"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"run.threads=1e12"}).find("run.threads: must be <= 2147483647"),
            std::string::npos);
  EXPECT_NE(Error(RunToml(ds), {"train.seq_len=8E92"}).find("train.seq_len: must be an integer"),
            std::string::npos);
}

std::vector<double> Losses(const RunConfig& c, int steps) {
  auto t = Trainer::Create(c);
  EXPECT_TRUE(t.ok()) << t.status().message();
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back((*t)->Step().loss);
  return losses;
}

// sp=on (the layout default) runs with tp > 1; it needs the sequence to split into tp shards.
TEST(Trainer, EngineLayoutSequenceParallel) {
  RunConfig c = Load(RunToml("unused-dataset"), {"run.layout=\"mbs=4 dp=2 tp=2\""});
  ASSERT_TRUE(c.run.layout.sp);
  EXPECT_TRUE(CheckEngineLayout(c).ok()) << CheckEngineLayout(c).message();
  c.train.seq_len = 63;
  const core::Status st = CheckEngineLayout(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("run.layout: seq_len=63 must be divisible by tp=2 (cp=1, tp=2)"),
            std::string::npos)
      << st.message();
  c.run.layout.sp = false;
  EXPECT_TRUE(CheckEngineLayout(c).ok()) << CheckEngineLayout(c).message();
}

// The engine's layout check is the planner's rule table (the same messages as spec::Validate, on
// the host as one node) followed by the engine's own rows, each of which names its field.
TEST(EngineRules, PlannerRulesThenTheEnginesOwnRows) {
  const std::string moe = "[model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 32\n";
  RunConfig c = Load(RunToml("unused-dataset", moe), {"run.layout=\"mbs=2 dp=2 ep=2\""});
  EXPECT_TRUE(CheckEngineLayout(c).ok()) << CheckEngineLayout(c).message();
  // A planner rule: its message, as the planner words it, prefixed with the run's table.
  RunConfig bad = c;
  bad.run.layout.ep = 3;
  spec::ClusterSpec host = HostCluster(bad);
  host.gpus_per_node = bad.run.layout.gpus();
  host.nodes = 1;
  const std::vector<std::string> planner =
      spec::Validate(bad.model, host, bad.train, bad.run.layout);
  ASSERT_FALSE(planner.empty());
  const std::vector<std::string> engine = EngineLayoutViolations(bad);
  ASSERT_EQ(engine.size(), planner.size());
  for (size_t i = 0; i < planner.size(); ++i) EXPECT_EQ(engine[i], "run." + planner[i]);
  // The engine's own rows.
  const struct {
    std::string layout;
    std::vector<std::string> sets;
    std::string want;
  } cases[] = {
      {"mbs=2 dp=2 ep=2 zero=3", {}, ""},  // ZeRO-3 with ep runs (experts over expert-dp)
      {"mbs=4 tp=2 ep=2", {}, ""},         // MoE with tp > 1 and sp = on runs
      {"mbs=2 dp=2 tp=2 ep=2 sp=off", {}, ""},
      {"mbs=4 dp=2 tp=2 ep=2 etp=1 ep_placement=folded", {}, ""},  // ep spans the tp ranks
      {"mbs=4 dp=2 tp=2 ep=4 etp=1 ep_placement=folded", {}, ""},
      {"mbs=4 tp=2 sp=off", {"model.vocab=511"}, "model.vocab: 511 must be divisible by tp=2"},
      {"mbs=2 pp=2", {"model.tied_embeddings=true"}, "pp=2 with model.tied_embeddings=true"},
  };
  for (const auto& k : cases) {
    std::vector<std::string> sets = k.sets;
    sets.push_back("run.layout=\"" + k.layout + "\"");
    const RunConfig r = Load(RunToml("unused-dataset", moe), sets);
    const std::vector<std::string> v = EngineLayoutViolations(r);
    const std::string all = fmt::format("{}", fmt::join(v, " | "));
    if (k.want.empty()) {
      EXPECT_TRUE(v.empty()) << k.layout << ": " << all;
      continue;
    }
    EXPECT_TRUE(std::any_of(v.begin(), v.end(),
                            [&](const std::string& m) {
                              return m.find(k.want) != std::string::npos &&
                                     m.find("run.layout: layout") == std::string::npos;
                            }))
        << k.layout << ": " << all;
  }
}

// Ranks on one host share its peak: the cost model's cluster of one device per rank has the
// host's peak in total (mpirun -np 4 on one host is not four hosts), and the prediction's MFU and
// the measurement's are the same function of tokens/s.
TEST(HostCluster, RanksShareTheHostPeak) {
  RunConfig c =
      Load(RunToml("unused-dataset"), {"run.layout=\"mbs=4 dp=4\"", "run.peak_gflops=80"});
  const auto total_tflops = [](const spec::ClusterSpec& h) {
    return h.peak_tflops * static_cast<double>(h.gpus());
  };
  EXPECT_EQ(HostCluster(c).gpus(), 4);
  EXPECT_NEAR(total_tflops(HostCluster(c)), 0.080, 1e-12);
  c.run.ranks_per_host = 2;  // two hosts of two ranks
  EXPECT_EQ(HostCluster(c).nodes, 2);
  EXPECT_NEAR(total_tflops(HostCluster(c)), 0.160, 1e-12);
  c.run.ranks_per_host = 0;
  const cost::Estimate e = PredictRun(c);
  const double flops = cost::Flops(c.model, c.train.seq_len, spec::Recompute::kNone).model;
  EXPECT_NEAR(e.mfu, flops * e.tokens_per_s / 80e9, 1e-9 * e.mfu);
  EXPECT_DOUBLE_EQ(cost::Mfu(flops, e.tokens_per_s, HostCluster(c)), e.mfu);
}

TEST(Trainer, DeterministicLosses) {
  const std::string ds = data::testing::Corpus().dataset;
  std::vector<double> fp32;
  for (const char* precision : {"\"fp32\"", "\"bf16\""}) {
    const RunConfig c = Load(RunToml(ds), {fmt::format("train.precision={}", precision)});
    const std::vector<double> a = Losses(c, 4), b = Losses(c, 4);
    EXPECT_EQ(a, b) << precision;  // bitwise
    if (fp32.empty()) {
      fp32 = a;
    } else {  // bf16 mixed precision tracks fp32 closely but not bitwise
      EXPECT_NE(a, fp32);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], fp32[i], 0.02 * fp32[i]);
    }
    const RunConfig other =
        Load(RunToml(ds), {fmt::format("train.precision={}", precision), "run.seed=8"});
    EXPECT_NE(Losses(other, 1)[0], a[0]);
  }
}

// ZeRO 1/2/3 on one process (a gradient group of 1) run the sharded code paths (units, gradient
// hooks, per-layer gathers, the optimizer-held bf16 masters) and must equal zero=0: the only
// difference is that ZeRO-2/3 sum each micro-batch's gradients into the accumulator instead of
// into the GEMM's output, so the bound is summation order (1e-6), not bitwise.
TEST(Trainer, ZeroStagesOnOneProcessMatchZero0) {
  const std::string ds = data::testing::Corpus().dataset;
  for (const char* precision : {"\"fp32\"", "\"bf16\""}) {
    const auto config = [&](int zero) {
      return Load(RunToml(ds), {fmt::format("train.precision={}", precision),
                                fmt::format("run.layout=\"mbs=4 zero={}\"", zero)});
    };
    const std::vector<double> base = Losses(config(0), 3);
    for (int zero = 1; zero <= 3; ++zero) {
      const std::vector<double> got = Losses(config(zero), 3);
      for (size_t i = 0; i < base.size(); ++i) {
        EXPECT_NEAR(got[i], base[i], 1e-6 * base[0]) << precision << " zero=" << zero;
      }
    }
  }
}

// A non-finite gradient skips the step at every stage (the injected NaN lands in the sharded
// accumulator at ZeRO-2/3), and training goes on.
TEST(Trainer, ZeroSkipsNonFiniteSteps) {
  const std::string ds = data::testing::Corpus().dataset;
  for (int zero : {2, 3}) {
    auto t = Trainer::Create(Load(
        RunToml(ds), {fmt::format("run.layout=\"mbs=4 zero={}\"", zero), "run.debug_nan_step=2"}));
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_FALSE((*t)->Step().skipped);
    const StepStats bad = (*t)->Step();
    EXPECT_TRUE(bad.skipped) << "zero=" << zero;
    EXPECT_EQ(bad.step, 1);
    const StepStats next = (*t)->Step();
    EXPECT_FALSE(next.skipped);
    EXPECT_TRUE(std::isfinite(next.loss));
  }
}

TEST(Trainer, MoeStepReportsRouting) {
  const std::string ds = data::testing::Corpus().dataset;
  const RunConfig c = Load(RunToml(
      ds, "[model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 64\ncapacity_factor = 1.0\n"));
  auto t = Trainer::Create(c);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const StepStats s = (*t)->Step();
  ASSERT_EQ(s.moe.routed.size(), 4u);
  int64_t routed = 0;
  for (int64_t r : s.moe.routed) routed += r;
  EXPECT_EQ(routed, 2 * 8 * 64 * 2);  // 2 MoE layers x tokens x top_k
  EXPECT_GE(s.moe.LoadImbalance(), 1.0);
  EXPECT_GT(s.moe.aux_loss, 0);
  const std::string json = StepStatsToJson(s);
  for (const char* key : {"\"expert_load_imbalance\"", "\"tokens_per_expert\"",
                          "\"dropped_tokens\"", "\"peak_bytes\"", "\"activations\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
}

// Measured peaks per tag against the cost model's prediction for the same model and layout, with
// the engine's stash policy stated in cost::CostParams (PredictRun: fp32 logits only, selective
// recomputation reruns the QKV projections, experts re-gather their input): model state exactly,
// activations and logits within 5% (measured: within 0.6%), for dense and MoE (dropless, a
// shared expert, a dense first layer), every recomputation policy, fp32 and bf16.
TEST(Trainer, MeasuredMemoryMatchesCostModel) {
  const std::string ds = data::testing::Corpus().dataset;
  const std::string moe =
      "[model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 64\nshared_experts = 1\n"
      "first_dense_layers = 1\ncapacity_factor = 0.0\n";
  for (const bool is_moe : {false, true}) {
    for (const char* recompute : {"none", "selective", "full"}) {
      for (const char* precision : {"fp32", "bf16"}) {
        const std::string name =
            fmt::format("{} {} {}", is_moe ? "moe" : "dense", recompute, precision);
        const RunConfig c =
            Load(RunToml(ds, is_moe ? moe : ""),
                 {fmt::format("run.layout=\"mbs=4 recompute={}\"", recompute), "model.layers=4",
                  fmt::format("train.precision=\"{}\"", precision)});
        auto t = Trainer::Create(c);
        ASSERT_TRUE(t.ok()) << t.status().message();
        const StepStats s = (*t)->Step();
        const cost::Memory& p = (*t)->predicted().memory;
        auto measured = [&](core::MemTag tag) {
          return static_cast<double>(s.peak_bytes[static_cast<size_t>(tag)]);
        };
        std::printf("%-20s activations %9.0f / %9.0f = %.3f  logits %8.0f / %8.0f = %.3f\n",
                    name.c_str(), measured(core::MemTag::kActivations), p.activations,
                    measured(core::MemTag::kActivations) / p.activations,
                    measured(core::MemTag::kLogits), p.logits,
                    measured(core::MemTag::kLogits) / p.logits);
        EXPECT_EQ(measured(core::MemTag::kWeights), p.weights) << name;
        EXPECT_EQ(measured(core::MemTag::kGrads), p.grads) << name;
        EXPECT_EQ(measured(core::MemTag::kOptimizer), p.optimizer) << name;
        EXPECT_NEAR(measured(core::MemTag::kLogits) / p.logits, 1.0, 0.05) << name;
        EXPECT_NEAR(measured(core::MemTag::kActivations) / p.activations, 1.0, 0.05) << name;
      }
    }
  }
}

// The acceptance test of the engine: a short run on real text beats the context-free baseline,
// for the dense model and for an MoE variant.
void ExpectLearns(const RunConfig& c) {
  auto t = Trainer::Create(c);
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto baseline = (*t)->Baseline();
  ASSERT_TRUE(baseline.ok());
  const double before = (*t)->Evaluate();
  StepStats last;
  for (int64_t i = 0; i < (*t)->total_steps(); ++i) last = (*t)->Step();
  const double after = (*t)->Evaluate();
  std::printf("%s: held-out loss %.4f -> %.4f, unigram baseline %.4f (train entropy %.4f)\n",
              c.model.name.c_str(), before, after, baseline->heldout_xent, baseline->train_entropy);
  EXPECT_NEAR(before, std::log(512.0), 0.1);  // uniform at init
  EXPECT_LT(after, baseline->heldout_xent - 0.2);
  EXPECT_GT(last.peak_bytes[static_cast<size_t>(core::MemTag::kActivations)], 0);
  EXPECT_EQ((*t)->allocator().live_bytes(core::MemTag::kActivations), 0);
}

TEST(Trainer, DenseLearnsBelowUnigramBaseline) {
  ExpectLearns(Load(RunToml(data::testing::Corpus().dataset)));
}

TEST(Trainer, MoeLearnsBelowUnigramBaseline) {
  ExpectLearns(Load(RunToml(data::testing::Corpus().dataset,
                            "[model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 64\n"
                            "capacity_factor = 1.25\nfirst_dense_layers = 1\n"),
                    {"model.name=\"t-moe\"", "optim.z_loss_coef=0.001",
                     "run.layout=\"mbs=4 recompute=selective\""}));
}

}  // namespace
}  // namespace pentamesh::train

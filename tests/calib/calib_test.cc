// The calibration against published runs (bench/data/published_runs.json): every row maps to an
// estimate, the rows' words map to the layouts their sources describe, the shipped presets are
// exactly what the fit gives (nobody edits them by hand), the cross-validated accuracy holds, and
// the fit recovers known parameters from runs generated with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "calib/fit.h"
#include "calib/profile.h"
#include "calib/runs.h"
#include "calib/validate.h"
#include "spec/load_toml.h"

namespace pentamesh::calib {
namespace {

const std::string kRuns = std::string(PM_SOURCE_DIR) + "/bench/data/published_runs.json";

const std::vector<calib::Run>& Runs() {
  static const std::vector<calib::Run> runs = [] {
    auto r = LoadRuns(kRuns);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<calib::Run>{};
  }();
  return runs;
}

const calib::Run& ById(const std::string& id) {
  for (const calib::Run& r : Runs()) {
    if (r.id == id) return r;
  }
  ADD_FAILURE() << "no run " << id;
  static const calib::Run none;
  return none;
}

TEST(PublishedRuns, EveryRowIsEstimated) {
  ASSERT_EQ(Runs().size(), 118u);
  for (const calib::Run& r : Runs()) {
    EXPECT_TRUE(r.usable()) << r.id << ": " << r.unusable;
    EXPECT_GT(r.tokens_per_s_gpu, 0) << r.id;
    EXPECT_EQ(r.layout.gpus(), r.cluster.gpus()) << r.id;
  }
}

// The mapping of the sources' words, checked against what each source says (hand-read).
TEST(PublishedRuns, RowsMapToTheLayoutsTheirSourcesDescribe) {
  const calib::Run& m21 =
      ById("megatron2021-t1-18B");  // Table 1: TP 8, 256 GPUs, torch DDP, full AC
  EXPECT_EQ(spec::FormatLayout(m21.layout),
            "dp=32 tp=8 pp=1 cp=1 ep=1 zero=0 mbs=8 recompute=full schedule=1f1b cp_kind=ring "
            "ep_placement=folded sp=off");
  EXPECT_EQ(m21.model.activation, spec::Activation::kGeLU);
  EXPECT_EQ(m21.model.ffn_hidden, 4 * 6144);
  EXPECT_FALSE(m21.facts.flash_attention);  // 2021: no FlashAttention
  EXPECT_TRUE(m21.facts.fp32_grads);
  // Eq. 3: 135 TFLOP/s / (96 l h^2 (1 + s/6h + V/16lh)) per token.
  const double eq3 =
      96.0 * 40 * 6144.0 * 6144 * (1 + 2048 / (6 * 6144.0) + 51200 / (16 * 40 * 6144.0));
  EXPECT_NEAR(m21.tokens_per_s_gpu, 135e12 / eq3, 1e-6 * m21.tokens_per_s_gpu);

  const calib::Run& grok = ById("dgxc-v24.11.1-grok1-bf16-8gpu");  // GPUs = TP PP CP EP DP
  EXPECT_EQ(grok.layout.ep_placement, spec::EpPlacement::kSeparate);
  EXPECT_EQ(grok.layout.ep, 2);
  EXPECT_EQ(grok.layout.zero, 1);  // mcore distributed optimizer
  EXPECT_EQ(grok.model.vocab, 131072);
  EXPECT_TRUE(grok.facts.tp_comm_overlap);  // NeMo recipe with SP
  EXPECT_NEAR(grok.tokens_per_s_gpu, 174544.0 / 8, 1e-9);

  const calib::Run& l3 = ById("llama3-paper-405b-8192gpu-cp1-seq8192");
  EXPECT_EQ(l3.layout.schedule, spec::Schedule::kInterleaved);
  EXPECT_EQ(l3.layout.zero, 2);  // "parameters not resharded after forward"
  EXPECT_TRUE(l3.facts.fp32_grads);

  const calib::Run& tt = ById("torchtitan-202412-llama3.1_405b-512gpu-fsdp8-tp8-pp8-1f1b");
  EXPECT_EQ(tt.sku, "h100-hbm2e");
  EXPECT_EQ(tt.layout.zero, 3);
  EXPECT_EQ(tt.layout.mbs, 4);  // local batch 32 split into pp = 8 micro-batches
  EXPECT_TRUE(tt.facts.fp8);
  EXPECT_TRUE(tt.facts.tp_comm_overlap);  // "torch.compile + async TP"

  const calib::Run& mpt = ById("mpt-llmfoundry-h100_80gb-1b-seq2048-512gpu-mbs12-amp_bf16");
  EXPECT_EQ(mpt.stack, "llm-foundry");
  EXPECT_EQ(mpt.layout.zero, 2);  // SHARD_GRAD_OP
  EXPECT_FALSE(mpt.facts.compiled);

  const calib::Run& maxtext = ById("dgxc-v24.11.1-maxtext-llama2_70b-bf16-2048gpu");
  EXPECT_EQ(maxtext.stack, "maxtext");
  EXPECT_EQ(maxtext.facts.fsdp_shard_group, 128);
}

// The presets are the fit's output (`pentamesh validate --write-presets`), never edited by hand.
// GPUs and stacks outside the calibration set still map to a preset (their GPU parameters stay
// at the start values), so runs on them are estimated rather than refused.
TEST(PublishedRuns, GpusAndStacksBeyondTheSet) {
  EXPECT_EQ(SkuForGpu("B200", "HGX B200 180GB"), "b200");
  EXPECT_EQ(SkuForGpu("GB200", "GB200 NVL72"), "gb200-nvl72");
  EXPECT_EQ(SkuForGpu("MI300X", "AMD Instinct MI300X"), "mi300x");
  EXPECT_EQ(SkuForGpu("H100", "H100 SXM5 80GB"), "h100-sxm");
  EXPECT_EQ(SkuForGpu("V100", "V100 32GB"), "");
  for (const char* sku : {"b200", "gb200-nvl72", "mi300x"}) {
    auto c = spec::LoadCluster(sku);
    ASSERT_TRUE(c.ok()) << sku << ": " << c.status().message();
    EXPECT_GT(c->peak_fp8_tflops, c->peak_tflops) << sku;
  }
  EXPECT_EQ(StackForSoftware("Paxml / Praxis (JAX)", ""), "maxtext");
  EXPECT_EQ(StackForSoftware("Hugging Face Accelerate + PyTorch FSDP", ""), "llm-foundry");
  EXPECT_EQ(StackForSoftware("Nanotron", ""), "deepspeed");
  EXPECT_EQ(StackForSoftware("Megatron-DeepSpeed", ""), "deepspeed");
  EXPECT_EQ(StackForSoftware("NeMo 24.07", ""), "megatron");
  EXPECT_EQ(StackForSoftware("my own trainer", ""), "");
}

TEST(PublishedRuns, ShippedPresetsAreTheFit) {
  const ShippedFit fit = FitShipped(Runs(), kRuns, 5, 1);
  for (const Profile& p : fit.stacks) {
    auto preset = LoadProfile(p.name);
    ASSERT_TRUE(preset.ok()) << preset.status().message();
    for (const auto& [name, value] : p.params) {
      ASSERT_TRUE(preset->params.count(name)) << p.name << "." << name;
      EXPECT_NEAR(preset->params.at(name), value, 1e-4 * std::max(1.0, std::fabs(value)))
          << p.name << "." << name << ": rerun bash bench/calibration.sh";
    }
    EXPECT_EQ(preset->intervals.size(), p.intervals.size()) << p.name;
  }
  for (const std::string& name : spec::PresetNames("clusters")) {
    const auto it = fit.gpu.find(GpuClass(name));
    if (it == fit.gpu.end()) continue;
    auto cluster = spec::LoadCluster(name);
    ASSERT_TRUE(cluster.ok());
    EXPECT_NEAR(cluster->gemm_efficiency, it->second.at("gemm_efficiency"), 1e-4) << name;
    if (it->second.count("fp8_gemm_speedup")) {
      EXPECT_NEAR(cluster->fp8_gemm_speedup, it->second.at("fp8_gemm_speedup"), 1e-4) << name;
    }
  }
}

// The bar, on runs each prediction did not see: 5-fold median |error| <= 7%, p90 <= 20%.
TEST(PublishedRuns, CrossValidatedAccuracy) {
  std::vector<const calib::Run*> usable;
  for (const calib::Run& r : Runs()) usable.push_back(&r);
  const ErrorStats kfold = Stats(KFoldErrors(usable, FitOptions{}, 5, 1));
  std::printf("5-fold: median |error| %.1f%%, p90 %.1f%% over %d runs\n", 100 * kfold.median_abs,
              100 * kfold.p90_abs, kfold.n);
  EXPECT_GE(kfold.n, 95);
  EXPECT_LE(kfold.median_abs, 0.07);
  EXPECT_LE(kfold.p90_abs, 0.20);
}

// torchtitan publishes the allocator's max reserved memory per GPU (an upper bound of what is
// allocated). The bar is 15% on every row; 8 of the 10 meet it today. The two 405B
// pipeline rows (tp8 pp8 with cp1 and cp8) are predicted 20-22% low: what torchtitan holds there
// beyond the gathered stage weights, the unsharded gradients and 8 micro-batches of layer inputs
// is not modelled yet (docs/COST_MODEL.md, "Accuracy"). This test keeps both facts honest.
TEST(PublishedRuns, TorchtitanMemory) {
  auto shipped = ShippedCalibration();
  ASSERT_TRUE(shipped.ok());
  std::vector<double> errors;
  int within = 0;
  for (const calib::Run& r : Runs()) {
    if (!r.memory_gib) continue;
    const Prediction p = Predict(r, *shipped);
    const double error = p.memory_gib / *r.memory_gib - 1.0;
    errors.push_back(error);
    within += std::fabs(error) <= 0.15;
    std::printf("%-62s predicted %5.1f GiB, published %5.1f (%+.1f%%)\n", r.id.c_str(),
                p.memory_gib, *r.memory_gib, 100 * error);
    EXPECT_LE(std::fabs(error), 0.15) << r.id;
  }
  ASSERT_EQ(errors.size(), 10u);
  EXPECT_EQ(within, 10);
  EXPECT_LE(Stats(errors).median_abs, 0.10);
}

// Runs generated with known parameters: the fit finds them again.
TEST(Calibrate, RecoversKnownParameters) {
  std::vector<calib::Run> runs;
  for (const calib::Run& r : Runs()) {
    if (r.group == "dgxc_v24.11.1" && r.stack == "megatron") runs.push_back(r);
  }
  ASSERT_GE(runs.size(), 20u);
  Calibration truth;
  truth.gpu["h100"] = {{"gemm_efficiency", 0.55}, {"fp8_gemm_speedup", 1.5}};
  truth.stack["megatron"] = {
      {"layer_overhead_us", 150.0}, {"tp_overlap", 0.4}, {"attention_relative", 0.6}};
  for (calib::Run& r : runs) r.tokens_per_s_gpu = Predict(r, truth).tokens_per_s_gpu;
  std::vector<const calib::Run*> ptrs;
  for (const calib::Run& r : runs) ptrs.push_back(&r);
  FitOptions options;
  options.prior_weight = 1e-6;
  const FitResult fit = Fit(ptrs, options);
  ASSERT_EQ(fit.free.size(), 5u);
  EXPECT_NEAR(fit.cal.gpu.at("h100").at("gemm_efficiency"), 0.55, 0.01);
  EXPECT_NEAR(fit.cal.gpu.at("h100").at("fp8_gemm_speedup"), 1.5, 0.03);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("layer_overhead_us"), 150.0, 15.0);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("tp_overlap"), 0.4, 0.04);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("attention_relative"), 0.6, 0.03);
  EXPECT_LT(fit.rms_log, 1e-3);
}

// A profile selects the 2022 Megatron generation (no flash attention, dropout, fp32 main grads)
// in [defaults]; the shipped megatron profile keeps flash, no dropout masks and bf16 grads.
TEST(Profile, GenerationFactsReachCostParams) {
  auto old = ProfileFromToml(
      "[stack]\nname = \"megatron-2022\"\nstack = \"megatron\"\n[defaults]\n"
      "flash_attention = false\ndropout = true\nfp32_grads = true\ntp_comm_overlap = false\n",
      "megatron-2022.toml");
  ASSERT_TRUE(old.ok()) << old.status().message();
  spec::ClusterSpec cluster = spec::LoadCluster("a100-80gb").value();
  cost::CostParams params;
  ApplyProfile(*old, cluster, params);
  EXPECT_TRUE(params.materialize_scores);
  EXPECT_TRUE(params.dropout);
  EXPECT_TRUE(params.fp32_main_grads);
  EXPECT_EQ(params.tp_overlap, 0.0);
  auto back = ProfileFromToml(ProfileToml(*old), "back");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->defaults.flash_attention);
  EXPECT_TRUE(back->defaults.dropout && back->defaults.fp32_grads);
  cost::CostParams now;
  ApplyProfile(LoadProfile("megatron").value(), cluster, now);
  EXPECT_FALSE(now.materialize_scores || now.dropout || now.fp32_main_grads);
}

TEST(Profile, TomlRoundTrip) {
  Profile p;
  p.name = "mine";
  p.stack = "torchtitan";
  p.params = {{"layer_overhead_us", 42.5}, {"tp_overlap", 0.25}};
  p.gpu["h100"] = {{"gemm_efficiency", 0.61}};
  p.intervals["h100"] = {0.9, 1.08, 12};
  p.defaults.selective_op_sac = true;
  auto back = ProfileFromToml(ProfileToml(p), "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->params, p.params);
  EXPECT_EQ(back->gpu, p.gpu);
  EXPECT_EQ(back->intervals.at("h100").runs, 12);
  EXPECT_TRUE(back->defaults.selective_op_sac);
  auto bad = ProfileFromToml("[stack]\nname = \"x\"\n[params]\ntp_overlap = 7\n", "bad.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("params.tp_overlap"), std::string::npos);
}

}  // namespace
}  // namespace pentamesh::calib

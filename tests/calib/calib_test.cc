// The calibration against published runs (bench/data/published_runs.json): every row maps to an
// estimate, the rows' words map to the layouts their sources describe, the shipped presets are
// exactly what the fit gives (nobody edits them by hand), the cross-validated accuracy holds, and
// the fit recovers known parameters from runs generated with them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "calib/fit.h"
#include "calib/profile.h"
#include "calib/regime_interval.h"
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

bool Assumed(const calib::Run& run, const std::string& words) {
  return std::any_of(run.assumptions.begin(), run.assumptions.end(),
                     [&](const std::string& a) { return a.find(words) != std::string::npos; });
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
  // "parameters not resharded after forward" (ZeRO-2's sharding) with "FP32 grad accumulation"
  // over the micro-batches before one reduce-scatter a step: ZeRO-1's traffic, said so.
  EXPECT_EQ(l3.layout.zero, 1);
  EXPECT_TRUE(Assumed(l3, "accumulated over micro-batches before the reduce-scatter"));
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

const std::string kCollected = std::string(PM_SOURCE_DIR) + "/bench/data/collected_runs.json";

const std::vector<calib::Run>& Collected() {
  static const std::vector<calib::Run> runs = [] {
    auto r = LoadRuns(kCollected);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<calib::Run>{};
  }();
  return runs;
}

// ... fitted on both files as one set (bench/calibration.sh --write), and so is the regime
// intervals' table (configs/presets/calibration/runs.toml): every run with its 5-fold error.
TEST(PublishedRuns, ShippedPresetsAreTheFit) {
  std::vector<calib::Run> both = Runs();
  both.insert(both.end(), Collected().begin(), Collected().end());
  const ShippedFit fit = FitShipped(both, kRuns + " + " + kCollected, 5, 1, {});
  auto points = ShippedPoints();
  ASSERT_TRUE(points.ok()) << points.status().message();
  ASSERT_EQ(points->size(), fit.points.size()) << "rerun bash bench/calibration.sh --write";
  for (size_t i = 0; i < fit.points.size(); ++i) {
    const CalibrationPoint& want = fit.points[i];
    const CalibrationPoint& got = (*points)[i];
    EXPECT_EQ(got.id, want.id);
    EXPECT_EQ(got.error_from, want.error_from) << want.id;
    EXPECT_DOUBLE_EQ(RegimeDistance(got.regime, want.regime), 0) << want.id;
    EXPECT_NEAR(got.error, want.error, 1e-4)
        << want.id << ": rerun bash bench/calibration.sh --write";
  }
  EXPECT_EQ(fit.points.size(), Runs().size() + Collected().size());
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
    if (it->second.count("attention_factor")) {
      EXPECT_NEAR(cluster->attention_factor, it->second.at("attention_factor"), 1e-4) << name;
    }
  }
}

// The issue's bar, on runs each prediction did not see: 5-fold median |error| <= 7%, p90 <= 20%.
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

// The regime breakdown (bench/calibration.sh): each regime holds exactly the rows the published
// file puts in it, counted here from the file's own fields, and its statistics are those rows'.
TEST(PublishedRuns, ByRegime) {
  std::ifstream in(kRuns);
  const nlohmann::json rows = nlohmann::json::parse(in);
  std::map<std::string, int> want;
  for (const auto& r : rows) {
    const auto& m = r["model"];
    const std::string precision = r["parallelism"]["precision"].is_string()
                                      ? r["parallelism"]["precision"].get<std::string>()
                                      : "";
    want["MoE"] += m["num_experts"].is_number() && m["num_experts"].get<int>() > 1;
    want["seq >= 32K"] += m["seq_length"].get<int>() >= 32768;
    want["FP8"] +=
        precision.find("fp8") != std::string::npos || precision.find("float8") != std::string::npos;
    want[">= 1,024 GPUs"] += r["hardware"]["num_gpus"].get<int>() >= 1024;
  }
  auto shipped = ShippedCalibration();
  ASSERT_TRUE(shipped.ok());
  const Validation v = ValidateRuns(Runs(), *shipped, {});
  ASSERT_EQ(v.regimes.size(), 4u);
  for (const GroupSummary& g : v.regimes) {
    EXPECT_EQ(g.shipped.n, want[g.group]) << g.group;
    std::vector<double> errors;
    for (const RowResult& r : v.rows) {
      if (InRegime(*r.run, g.group)) errors.push_back(r.shipped.error);
    }
    EXPECT_DOUBLE_EQ(g.shipped.p90_abs, Stats(errors).p90_abs) << g.group;
    // The runs that ran and are predicted over capacity, counted per regime.
    int64_t over = 0;
    for (const RowResult& r : v.rows) over += InRegime(*r.run, g.group) && !r.shipped.fits;
    EXPECT_EQ(g.over_capacity, over) << g.group;
  }
  int64_t over = 0;
  for (const RowResult& r : v.rows) {
    over += r.shipped.estimate.memory.total > r.shipped.estimate.memory.capacity;
  }
  EXPECT_EQ(v.all.over_capacity, over);
  EXPECT_EQ(want["MoE"], 4);  // the Grok-1 proxies (bench/data/README.md)
}

// The collected runs (bench/data/README.md): every row is estimated, pinned to a commit, copies no
// row of published_runs.json, and its throughput is the published cell it names (checked here
// against published_values, and the dgxc rows' tokens/s against their own step time and batch).
TEST(CollectedRuns, EveryRowIsEstimatedPinnedAndItsCells) {
  std::ifstream in(kCollected);
  const nlohmann::json rows = nlohmann::json::parse(in);
  ASSERT_EQ(rows.size(), Collected().size());
  ASSERT_EQ(rows.size(), 81u);
  std::set<std::string> published;
  for (const calib::Run& r : Runs()) published.insert(r.id);
  const std::regex commit("/blob/[0-9a-f]{40}/");
  for (size_t i = 0; i < rows.size(); ++i) {
    const calib::Run& run = Collected()[i];
    const auto& row = rows[i];
    EXPECT_TRUE(run.usable()) << run.id << ": " << run.unusable;
    EXPECT_EQ(published.count(run.id), 0u) << run.id;
    EXPECT_TRUE(std::regex_search(row["source"]["url"].get<std::string>(), commit)) << run.id;
    const auto& pv = row["published_values"];
    ASSERT_TRUE(pv.is_object() && !pv.empty()) << run.id;
    const auto& m = row["measured"];
    if (pv.contains("Tokens / sec / GPU")) {  // Megatron-Bridge
      EXPECT_EQ(m["tokens_per_sec_per_gpu"], pv["Tokens / sec / GPU"]) << run.id;
      EXPECT_DOUBLE_EQ(run.tokens_per_s_gpu, pv["Tokens / sec / GPU"].get<double>()) << run.id;
      EXPECT_EQ(run.layout.tp, pv["TP"].get<int>()) << run.id;
      EXPECT_EQ(run.layout.pp, pv["PP"].get<int>()) << run.id;
      EXPECT_EQ(run.layout.cp, pv["CP"].get<int>()) << run.id;
    } else if (pv.contains("With CP TFLOPS / GPU")) {  // NeMo long sequence: TFLOP/s only
      EXPECT_EQ(m["tflops_per_gpu"], pv["With CP TFLOPS / GPU"]) << run.id;
      EXPECT_EQ(run.layout.tp * run.layout.pp * run.layout.dp * run.layout.cp,
                pv["# of GPUs"].get<int64_t>())
          << run.id;
      EXPECT_GE(run.train.seq_len, 32768) << run.id;
    } else if (pv.contains("TFLOPS / GPU")) {  // NeMo long sequence, B200 table: "1,588" etc.
      std::string tf = pv["TFLOPS / GPU"].get<std::string>();
      std::erase(tf, ',');
      EXPECT_EQ(m["tflops_per_gpu"].get<double>(), std::stod(tf)) << run.id;
      EXPECT_EQ(run.layout.tp * run.layout.pp * run.layout.dp * run.layout.cp,
                pv["# of GPUs"].get<int64_t>())
          << run.id;
      EXPECT_EQ(run.layout.cp, pv["CP"].get<int>()) << run.id;
      EXPECT_EQ(run.train.seq_len, pv["SeqLen (K)"].get<int64_t>() * 1024) << run.id;
    } else {  // dgxc Grok-1: tokens/s = seq x GBS / step time, as the README defines it
      const double tps = std::stod(pv["Throughput in tokens per second"].get<std::string>());
      const double step = std::stod(pv["Training step time (seconds per step)"].get<std::string>());
      const auto& cfg = pv["config_row"];
      const double tokens =
          std::stod(cfg["SeqLen"].get<std::string>()) * std::stod(cfg["GBS"].get<std::string>());
      EXPECT_NEAR(tokens / step / tps, 1.0, 0.01)
          << run.id;  // the README's own cells: 0.5% apart at most
      EXPECT_NEAR(run.tokens_per_s_gpu * static_cast<double>(run.cluster.gpus()), tps, 1.0)
          << run.id;
    }
  }
}

// Several files read as one set: an id an earlier file used is a bad row naming that file's row.
TEST(RunFiles, AnIdRepeatedAcrossFilesIsABadRow) {
  auto both = LoadRunFiles({kRuns, kCollected, kRuns});
  ASSERT_TRUE(both.ok()) << both.status().message();
  const size_t first_two = 118u + 81u;
  ASSERT_EQ(both->size(), first_two + 118u);
  for (size_t i = 0; i < both->size(); ++i) {
    const calib::Run& r = (*both)[i];
    if (i < first_two) {
      EXPECT_FALSE(r.unreadable) << r.id;
      EXPECT_EQ(r.file, i < 118 ? kRuns : kCollected);
    } else {
      EXPECT_TRUE(r.unreadable) << r.id;
      EXPECT_EQ(r.index, i - first_two);
      EXPECT_NE(r.unusable.find(fmt::format("first by {} row {}", kRuns, i - first_two)),
                std::string::npos)
          << r.unusable;
    }
  }
  EXPECT_FALSE(LoadRunFiles({kRuns, "/nonexistent/runs.json"}).ok());
}

// The held-out check fits on one file only: the held-out rows' predictions do not move when their
// measured throughputs do (the fit never saw them), and the fit is the one ValidateRuns gives.
TEST(HeldOut, TheFitNeverSeesTheHeldOutRows) {
  auto shipped = ShippedCalibration();
  ASSERT_TRUE(shipped.ok());
  const Validation a = ValidateHeldOut(Runs(), Collected(), *shipped);
  std::vector<calib::Run> doubled = Collected();
  for (calib::Run& r : doubled) r.tokens_per_s_gpu *= 2;
  const Validation b = ValidateHeldOut(Runs(), doubled, *shipped);
  EXPECT_TRUE(a.held_out);
  EXPECT_EQ(a.fitted_on, 118);
  ASSERT_EQ(a.rows.size(), 81u);
  ASSERT_EQ(b.rows.size(), a.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const double pa = (1 + a.rows[i].fit_error) * a.rows[i].run->tokens_per_s_gpu;
    const double pb = (1 + b.rows[i].fit_error) * b.rows[i].run->tokens_per_s_gpu;
    EXPECT_NEAR(pb / pa, 1.0, 1e-9) << a.rows[i].run->id;
  }
  const Validation cv = ValidateRuns(Runs(), *shipped, {true, 5, 1});
  EXPECT_EQ(cv.fitted, a.fitted);
  ASSERT_EQ(a.regimes.size(), 4u);
  EXPECT_EQ(a.regimes[0].fit.n, a.regimes[0].shipped.n);
  EXPECT_EQ(a.regimes[0].kfold.n, 0);  // no k-fold on a held-out check
}

// torchtitan publishes the allocator's max reserved memory per GPU (an upper bound of what is
// allocated). The issue's bar is 15% on every row; 8 of the 10 meet it today. The two 405B
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
  // The Grok-1 rows (NeMo 24.11, before Megatron-Core's EP overlap) run these synthetic steps
  // with it, so the share it hides is one of the parameters to find.
  for (calib::Run& r : runs) r.facts.ep_a2a_overlap = r.model.is_moe();
  Calibration truth;
  truth.gpu["h100"] = {
      {"gemm_efficiency", 0.55}, {"fp8_gemm_speedup", 1.5}, {"attention_factor", 1}};
  truth.stack["megatron"] = {{"layer_overhead_us", 150.0},
                             {"tp_overlap", 0.4},
                             {"attention_relative", 0.6},
                             {"expert_gemm_us", 40.0},
                             {"ep_overlap", 0.3}};
  for (calib::Run& r : runs) r.tokens_per_s_gpu = Predict(r, truth).tokens_per_s_gpu;
  std::vector<const calib::Run*> ptrs;
  for (const calib::Run& r : runs) ptrs.push_back(&r);
  FitOptions options;
  options.prior_weight = 1e-6;
  // One stack on one GPU determines only the product of the GPU's attention factor and the
  // stack's attention_relative: the factor is held at the truth's.
  options.fixed = {"attention_factor"};
  options.prior.gpu["h100"]["attention_factor"] = 1;
  const FitResult fit = Fit(ptrs, options);
  ASSERT_EQ(fit.free.size(), 7u);  // the four Grok-1 rows (MoE, ep > 1) inform the MoE two
  EXPECT_NEAR(fit.cal.gpu.at("h100").at("gemm_efficiency"), 0.55, 0.01);
  EXPECT_NEAR(fit.cal.gpu.at("h100").at("fp8_gemm_speedup"), 1.5, 0.03);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("layer_overhead_us"), 150.0, 15.0);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("tp_overlap"), 0.4, 0.04);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("attention_relative"), 0.6, 0.03);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("expert_gemm_us"), 40.0, 8.0);
  EXPECT_NEAR(fit.cal.stack.at("megatron").at("ep_overlap"), 0.3, 0.06);
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
  // The dispatcher the same way: DeepEP's per-node dispatch where a profile says so, the
  // all-to-all in the shipped one.
  EXPECT_FALSE(now.ep_dispatch_per_node);
  auto deepep = ProfileFromToml(
      "[stack]\nname = \"deepep\"\nstack = \"megatron\"\n[defaults]\nep_dispatch_per_node = true\n",
      "deepep.toml");
  ASSERT_TRUE(deepep.ok()) << deepep.status().message();
  cost::CostParams flex;
  ApplyProfile(*deepep, cluster, flex);
  EXPECT_TRUE(flex.ep_dispatch_per_node);
  EXPECT_TRUE(ProfileFromToml(ProfileToml(*deepep), "back")->defaults.ep_dispatch_per_node);
  // The EP overlap likewise: the stack's fitted share hidden only where the run overlaps the
  // all-to-alls (Megatron-Core's --overlap-moe-expert-parallel-comm); the shipped profile does not.
  EXPECT_EQ(now.ep_overlap, 0.0);
  auto a2a = ProfileFromToml(
      "[stack]\nname = \"a2a\"\nstack = \"megatron\"\n[defaults]\nep_a2a_overlap = true\n"
      "[params]\nep_overlap = 0.6\n",
      "a2a.toml");
  ASSERT_TRUE(a2a.ok()) << a2a.status().message();
  cost::CostParams hidden;
  ApplyProfile(*a2a, cluster, hidden);
  EXPECT_EQ(hidden.ep_overlap, 0.6);
  EXPECT_TRUE(ProfileFromToml(ProfileToml(*a2a), "back")->defaults.ep_a2a_overlap);
}

// ---- Rows read as their sources meant them (issue 29): small rows written here, one fact each.

// A Megatron MoE row in the published format (Qwen3-235B-A22B's shape: 94 layers, 128 experts of
// FFN 1,536, top-8, no shared expert) on 256 H100s at tp 2, pp 8, ep 32 with whole experts.
nlohmann::json MoeRow() {
  return nlohmann::json::parse(R"({
    "id": "qwen3-like",
    "source": {"group": "g", "software": "Megatron-Core 0.13", "date": "2025-06"},
    "model": {"family": "Qwen3", "arch": "moe", "num_layers": 94, "hidden_size": 4096,
              "ffn_hidden_size": 12288, "moe_ffn_hidden_size": 1536, "num_attention_heads": 64,
              "num_kv_heads": 4, "head_dim": 128, "vocab_size": 151936, "seq_length": 4096,
              "num_experts": 128, "top_k": 8, "shared_experts": 0, "activation": null},
    "hardware": {"gpu_model": "H100", "gpu_type": "H100 SXM5 80GB", "num_gpus": 256,
                 "gpus_per_node": 8},
    "parallelism": {"tp": 2, "pp": 8, "dp": 16, "cp": 1, "ep": 32, "etp": 1, "vpp": null,
                    "data_parallel_sharding": "distributed optimizer", "sequence_parallel": true,
                    "activation_recompute": "selective", "micro_batch_size": 1,
                    "global_batch_size": 1024, "precision": "bf16"},
    "measured": {"tokens_per_sec_per_gpu": 1000}
  })");
}

// A dense row (Llama 3 8B's shape) on 8 H100s, data parallel only.
nlohmann::json DenseRow() {
  return nlohmann::json::parse(R"({
    "id": "dense",
    "source": {"group": "g", "software": "Megatron-Core", "date": "2025-01"},
    "model": {"family": "Llama 3", "num_layers": 32, "hidden_size": 4096,
              "ffn_hidden_size": 14336, "num_attention_heads": 32, "num_kv_heads": 8,
              "vocab_size": 128256, "seq_length": 8192, "activation": "swiglu"},
    "hardware": {"gpu_model": "H100", "gpu_type": "H100 SXM5 80GB", "num_gpus": 8},
    "parallelism": {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "micro_batch_size": 1,
                    "global_batch_size": 128, "precision": "bf16",
                    "data_parallel_sharding": "distributed optimizer",
                    "activation_recompute": "none"},
    "measured": {"tokens_per_sec_per_gpu": 9000}
  })");
}

calib::Run ReadOne(const nlohmann::json& row) {
  auto runs = RunsFromJson(nlohmann::json::array({row}), "test.json");
  EXPECT_TRUE(runs.ok()) << runs.status().message();
  EXPECT_EQ(runs->size(), 1u);
  return runs->front();
}

TEST(RowReading, EtpPublishedOrInferred) {
  const calib::Run published = ReadOne(MoeRow());
  ASSERT_TRUE(published.usable()) << published.unusable;
  EXPECT_EQ(published.layout.etp, 1);
  EXPECT_FALSE(Assumed(published, "etp not published"));
  nlohmann::json row = MoeRow();
  row["parallelism"]["etp"] = nullptr;  // ep 32 > dp*cp 16: only whole experts fit
  const calib::Run inferred = ReadOne(row);
  ASSERT_TRUE(inferred.usable()) << inferred.unusable;
  EXPECT_EQ(inferred.layout.etp, 1);
  EXPECT_TRUE(Assumed(inferred, "etp not published: 1"));
  row["parallelism"]["ep"] = 8;  // divides dp*cp: experts split over tp as published by default
  const calib::Run split = ReadOne(row);
  ASSERT_TRUE(split.usable()) << split.unusable;
  EXPECT_EQ(split.layout.expert_tp(), 2);
  row["parallelism"]["etp"] = 2;  // = tp: the default, written as such
  EXPECT_EQ(ReadOne(row).layout.etp, 0);
}

TEST(RowReading, FamilyDefaults) {
  const calib::Run moe = ReadOne(MoeRow());  // activation null
  EXPECT_EQ(moe.model.activation, spec::Activation::kSwiGLU);
  EXPECT_TRUE(Assumed(moe, "SwiGLU (the MoE families"));
  EXPECT_EQ(moe.model.moe.shared_experts, 0);  // shared_experts 0 = none, not an error
  nlohmann::json row = MoeRow();
  row["model"]["top_k"] = nullptr;
  EXPECT_EQ(ReadOne(row).model.moe.top_k, 8);  // Qwen3's config
  for (const char* family : {"GPT-3", "OPT-175B", "MT-NLG 530B"}) {
    nlohmann::json d = DenseRow();
    d["model"]["family"] = family;
    d["model"]["vocab_size"] = nullptr;
    d["model"]["activation"] = nullptr;
    const calib::Run r = ReadOne(d);
    ASSERT_TRUE(r.usable()) << family << ": " << r.unusable;
    EXPECT_EQ(r.model.vocab, 50257) << family;  // GPT-2's BPE
    EXPECT_TRUE(Assumed(r, "GPT-2 BPE")) << family;
    EXPECT_EQ(r.model.activation, spec::Activation::kGeLU) << family;
  }
  nlohmann::json llama = DenseRow();
  llama["model"]["activation"] = "silu";  // a Hugging Face config's word for Llama's gated FFN
  EXPECT_EQ(ReadOne(llama).model.activation, spec::Activation::kSwiGLU);
  nlohmann::json unknown = DenseRow();
  unknown["model"]["family"] = "Mystery";
  unknown["model"]["vocab_size"] = nullptr;
  EXPECT_NE(ReadOne(unknown).unusable.find("tokenizer is not known"), std::string::npos);
  // Llama 4 Maverick (its config.json: 48 layers, interleave_moe_layer_step 2, 128 experts of
  // 8,192, dense FFN 16,384): 24 MoE layers, the odd ones; Scout (16 experts) MoE in all 48.
  nlohmann::json maverick = MoeRow();
  maverick["model"].update(nlohmann::json::parse(R"({
    "family": "Llama 4", "name": "Llama 4 Maverick", "num_layers": 48, "hidden_size": 5120,
    "ffn_hidden_size": 16384, "moe_ffn_hidden_size": 8192, "num_attention_heads": 40,
    "num_kv_heads": 8, "vocab_size": 202048, "num_experts": 128, "top_k": 1,
    "shared_experts": 1})"));
  maverick["parallelism"].update(nlohmann::json::parse(R"({"tp": 1, "pp": 2, "dp": 128,
    "ep": 64, "etp": null})"));
  const calib::Run mav = ReadOne(maverick);
  ASSERT_TRUE(mav.usable()) << mav.unusable;
  EXPECT_EQ(mav.model.MoeLayerCount(), 24);
  EXPECT_FALSE(mav.model.IsMoeLayer(0));
  EXPECT_TRUE(mav.model.IsMoeLayer(1) && mav.model.IsMoeLayer(47));
  EXPECT_TRUE(Assumed(mav, "interleave_moe_layer_step 2"));
  nlohmann::json scout = maverick;
  scout["model"]["name"] = "Llama 4 Scout";
  scout["model"]["num_experts"] = 16;
  scout["parallelism"]["ep"] = 16;
  const calib::Run sc = ReadOne(scout);
  ASSERT_TRUE(sc.usable()) << sc.unusable;
  EXPECT_EQ(sc.model.MoeLayerCount(), 48);
  EXPECT_FALSE(Assumed(sc, "interleave_moe_layer_step"));
}

// The dispatcher and EP overlap words of a row (Megatron-Bridge's recipe flags) are read and
// stated: DeepEP / HybridEP (flex) is costed as its per-node dispatch (RunFacts::
// ep_dispatch_per_node), the others as an all-to-all; the overlap sets RunFacts::ep_a2a_overlap
// (the stack's fitted ep_overlap share hidden; docs/COST_MODEL.md "EP overlap as the recipe runs
// it").
// A recipe's module list (recompute_detail) reaches the layout; a selective row without one keeps
// the default (core attention); the list is read only where the words name one.
TEST(RowReading, RecomputeModuleLists) {
  const std::vector<std::tuple<const char*, const char*, uint32_t>> cases = {
      {"selective", "recompute_modules layernorm, moe_act (Megatron-Bridge v0.4.0 gpt_oss config)",
       spec::kRecomputeLayerNorm | spec::kRecomputeMoeAct},
      {"selective", "--recompute-modules mla_up_proj mlp",
       spec::kRecomputeMlaUpProj | spec::kRecomputeMlp},
      {"selective", "--recompute-modules core_attn", 0},
      {"selective", "attention QK^T/softmax/dropout recomputed; gated MLP", 0},
      {"", "recompute_modules core_attn, moe_act",
       spec::kRecomputeCoreAttn | spec::kRecomputeMoeAct},
  };
  for (const auto& [kind, detail, modules] : cases) {
    nlohmann::json row = MoeRow();
    row["parallelism"]["activation_recompute"] = kind;
    row["parallelism"]["recompute_detail"] = detail;
    const calib::Run run = ReadOne(row);
    ASSERT_TRUE(run.usable()) << detail << ": " << run.unusable;
    EXPECT_EQ(run.layout.recompute, spec::Recompute::kSelective) << detail;
    EXPECT_EQ(run.layout.recompute_modules, modules) << detail;
    EXPECT_EQ(Assumed(run, "recompute modules"), modules != 0) << detail;
  }
  nlohmann::json full = MoeRow();
  full["parallelism"]["activation_recompute"] = "full";
  full["parallelism"]["recompute_detail"] = "recompute_modules moe_act";
  EXPECT_EQ(ReadOne(full).layout.recompute_modules, 0u);
}

TEST(RowReading, DispatcherAndEpOverlapWords) {
  const calib::Run plain = ReadOne(MoeRow());
  EXPECT_TRUE(Assumed(plain, "token dispatcher not published"));
  EXPECT_FALSE(Assumed(plain, "EP all-to-all overlap"));
  EXPECT_FALSE(plain.facts.ep_dispatch_per_node);
  const std::vector<std::tuple<const char*, const char*, bool, bool>> cases = {
      {"moe_token_dispatcher_type alltoall, moe_a2a_overlap=True", "dispatcher all-to-all", true,
       false},
      {"moe_token_dispatcher_type flex with moe_flex_dispatcher_backend hybridep, "
       "moe_a2a_overlap=False",
       "dispatcher DeepEP / HybridEP (flex)", false, true},
      {"--moe-enable-deepep --overlap-moe-expert-parallel-comm", "dispatcher DeepEP", true, true},
      {"allgather dispatcher", "dispatcher all-gather", false, false},
  };
  for (const auto& [words, kind, overlap, per_node] : cases) {
    nlohmann::json row = MoeRow();
    row["parallelism"]["notes"] = words;
    const calib::Run run = ReadOne(row);
    ASSERT_TRUE(run.usable()) << words << ": " << run.unusable;
    EXPECT_TRUE(Assumed(run, kind)) << words;
    EXPECT_EQ(run.facts.ep_dispatch_per_node, per_node) << words;
    EXPECT_EQ(Assumed(run, "sent once to each remote node"), per_node) << words;
    EXPECT_EQ(Assumed(run, "EP all-to-all overlap"), overlap) << words;
    EXPECT_EQ(run.facts.ep_a2a_overlap, overlap) << words;
    EXPECT_EQ(Assumed(run, "fitted ep_overlap share of the all-to-alls hidden"), overlap) << words;
    EXPECT_EQ(Assumed(run, "the all-to-alls charged in full"), !overlap) << words;
  }
  EXPECT_TRUE(Assumed(plain, "the row names no overlap_moe_expert_parallel_comm"));
  EXPECT_FALSE(plain.facts.ep_a2a_overlap);
  nlohmann::json no_ep = MoeRow();  // no expert parallelism: nothing to overlap
  no_ep["parallelism"]["ep"] = 1;
  no_ep["parallelism"]["notes"] = "moe_a2a_overlap=True";
  const calib::Run single = ReadOne(no_ep);
  ASSERT_TRUE(single.usable()) << single.unusable;
  EXPECT_FALSE(Assumed(single, "EP all-to-all"));
}

TEST(RowReading, ShardingWords) {
  const std::vector<std::pair<const char*, int>> cases = {
      {"DDP + distributed optimizer (FSDP=0, overlap-grad-reduce)", 1},
      {"distributed optimizer, FSDP off", 1},
      {"fsdp: false; distributed_fused_adam", 1},
      {"DDP, no FSDP", 0},
      {"DDP", 0},
      {"mcore distributed optimizer", 1},
      {"DeepSpeed ZeRO-1", 1},
      {"ZeRO stage 2", 2},
      {"zero_stage=3", 3},
      {"FSDP FULL_SHARD (ZeRO-3-like)", 3},
      {"FSDP SHARD_GRAD_OP (ZeRO-2-like)", 2},
      {"HYBRID_SHARD", 3},
      {"_HYBRID_SHARD_ZERO2", 2},
      {"FSDP2", 3},
      {"Megatron-FSDP optim_grads_params", 3},
      {"Megatron-FSDP optim_grads", 2},
  };
  for (const auto& [words, stage] : cases) {
    nlohmann::json row = DenseRow();
    row["parallelism"]["data_parallel_sharding"] = words;
    EXPECT_EQ(ReadOne(row).layout.zero, stage) << words;
  }
  nlohmann::json row = DenseRow();
  row["parallelism"]["data_parallel_sharding"] = "HSDP, dp_shard=4";
  EXPECT_EQ(ReadOne(row).layout.zero, 3);
  row["parallelism"]["data_parallel_sharding"] = "something else";
  EXPECT_TRUE(Assumed(ReadOne(row), "names no sharding stage"));
}

// Precision words: FP8 in any recipe's words; FP4 training (NVFP4, MXFP4) costed as FP8 and
// said so, never silently as BF16; TF32 costed as BF16, said so.
TEST(RowReading, PrecisionWords) {
  const std::vector<std::tuple<const char*, bool, const char*>> cases = {
      {"bf16", false, nullptr},
      {"amp_bf16", false, nullptr},
      {"fp16", false, nullptr},
      {"fp8 (delayed scaling)", true, nullptr},
      {"mxfp8", true, nullptr},
      {"FP8 hybrid, current scaling", true, nullptr},
      {"nvfp4", true, "FP4 training costed as FP8"},
      {"MXFP4 (experts)", true, "FP4 training costed as FP8"},
      {"tf32", false, "no TF32 training rate"},
  };
  for (const auto& [words, fp8, assumed] : cases) {
    nlohmann::json row = DenseRow();
    row["parallelism"]["precision"] = words;
    const calib::Run run = ReadOne(row);
    ASSERT_TRUE(run.usable()) << words << ": " << run.unusable;
    EXPECT_EQ(run.facts.fp8, fp8) << words;
    EXPECT_EQ(run.train.precision == spec::Precision::kFp8, fp8) << words;
    EXPECT_EQ(Assumed(run, assumed ? assumed : "precision '"), assumed != nullptr) << words;
  }
}

// A row's stack policies are its stack profile's defaults (calib::Stacks(), the one place they
// are written) except what the row itself says: torchtitan compiles only when the row says so,
// Megatron-LM 2021-22 predates FlashAttention, TP overlap is read from the row's words.
TEST(RowReading, StackPoliciesAreTheProfileDefaults) {
  const std::vector<std::pair<const char*, const char*>> stacks = {{"Megatron-Core", "megatron"},
                                                                   {"torchtitan", "torchtitan"},
                                                                   {"MaxText", "maxtext"},
                                                                   {"llm-foundry", "llm-foundry"},
                                                                   {"DeepSpeed", "deepspeed"}};
  for (const auto& [software, stack] : stacks) {
    nlohmann::json row = DenseRow();
    row["source"]["software"] = software;
    const calib::Run run = ReadOne(row);
    ASSERT_TRUE(run.usable()) << software << ": " << run.unusable;
    ASSERT_EQ(run.stack, stack);
    const calib::StackInfo* info = calib::FindStack(stack);
    ASSERT_NE(info, nullptr) << stack;
    const calib::RunFacts& d = info->defaults;
    const calib::RunFacts& f = run.facts;
    EXPECT_EQ(f.fp8_weight_cache, d.fp8_weight_cache) << stack;
    EXPECT_EQ(f.fp8_stash_gemm_inputs, d.fp8_stash_gemm_inputs) << stack;
    EXPECT_EQ(f.pp_p2p_overlap, d.pp_p2p_overlap) << stack;
    EXPECT_EQ(f.fsdp_unsharded_with_pp, d.fsdp_unsharded_with_pp) << stack;
    EXPECT_EQ(f.tp_saves_gathered_input, d.tp_saves_gathered_input) << stack;
    EXPECT_EQ(f.pp_buffers_per_microbatch, d.pp_buffers_per_microbatch) << stack;
    EXPECT_EQ(f.selective_op_sac, d.selective_op_sac) << stack;
    EXPECT_EQ(f.selective_forward_share, d.selective_forward_share) << stack;
    EXPECT_EQ(f.flash_attention, d.flash_attention) << stack;
    EXPECT_FALSE(f.tp_comm_overlap) << stack;  // the row does not say so
    // torchtitan: compiled (and its loss with it, from 2025) only when the row says so.
    EXPECT_EQ(f.compiled, std::string(stack) != "torchtitan" && d.compiled) << stack;
    EXPECT_EQ(f.unfused_cross_entropy, d.unfused_cross_entropy) << stack;
  }
  EXPECT_EQ(calib::FindStack("no-such-stack"), nullptr);
  nlohmann::json titan = DenseRow();
  titan["source"]["software"] = "torchtitan";
  titan["parallelism"]["notes"] = "torch.compile, async TP";
  const calib::Run compiled = ReadOne(titan);
  EXPECT_TRUE(compiled.facts.compiled);
  EXPECT_FALSE(compiled.facts.unfused_cross_entropy);  // 2025: the loss compiles with the model
  EXPECT_TRUE(compiled.facts.tp_comm_overlap);
  nlohmann::json old = DenseRow();
  old["source"]["date"] = "2021-04";
  const calib::Run megatron2021 = ReadOne(old);
  EXPECT_FALSE(megatron2021.facts.flash_attention);
  EXPECT_TRUE(megatron2021.facts.dropout);
  EXPECT_TRUE(megatron2021.facts.fp32_grads);
}

// Megatron-Bridge's Llama 3 recipes run TP communication overlap with sequence parallelism
// (recipes/llama/llama3.py: tp_comm_overlap=True); its other recipes and rows of other software
// do not unless the row says so. The recipe's overlap is stated per row.
TEST(RowReading, BridgeLlamaRecipeOverlapsTp) {
  nlohmann::json row = DenseRow();
  row["source"]["software"] = "Megatron-Bridge / Megatron-Core (NeMo 26.04 container)";
  row["parallelism"]["tp"] = 4;
  row["parallelism"]["dp"] = 2;
  row["parallelism"]["sequence_parallel"] = true;
  const calib::Run llama = ReadOne(row);
  ASSERT_TRUE(llama.usable()) << llama.unusable;
  EXPECT_TRUE(llama.facts.tp_comm_overlap);
  EXPECT_TRUE(Assumed(llama, "Megatron-Bridge's Llama 3 recipe runs it"));
  row["parallelism"]["sequence_parallel"] = false;  // the recipe overlaps TP under SP only
  EXPECT_FALSE(ReadOne(row).facts.tp_comm_overlap);
  row["parallelism"]["sequence_parallel"] = true;
  row["model"]["family"] = "Qwen3";  // Bridge's Qwen3 H100 recipe: tp_comm_overlap=False
  row["model"]["name"] = "Qwen3-32B";
  const calib::Run qwen = ReadOne(row);
  EXPECT_FALSE(qwen.facts.tp_comm_overlap);
  EXPECT_FALSE(Assumed(qwen, "TP communication overlap"));
  row["parallelism"]["notes"] = "tp-comm-overlap";  // said by the row: taken, no assumption
  const calib::Run said = ReadOne(row);
  EXPECT_TRUE(said.facts.tp_comm_overlap);
  EXPECT_FALSE(Assumed(said, "TP communication overlap"));
}

// pipeline_schedule is read with the layout's own schedule words (spec::LayoutFields), so the
// row format says every schedule the layout has, and a row written by RunRowJson reads back.
TEST(RowReading, ScheduleWords) {
  const std::vector<std::tuple<const char*, std::optional<int>, spec::Schedule, int>> cases = {
      {"1F1B", std::nullopt, spec::Schedule::kOneFOneB, 1},
      {"interleaved 1F1B", 3, spec::Schedule::kInterleaved, 3},
      {"1F1B, interleaved", std::nullopt, spec::Schedule::kInterleaved, 4},  // V = 4 assumed
      {"interleaved-1f1b", std::nullopt, spec::Schedule::kInterleaved, 4},
      {"interleaved", 1, spec::Schedule::kOneFOneB, 1},  // V = 1 published: plain 1F1B
      {"GPipe (all forwards first)", std::nullopt, spec::Schedule::kGPipe, 1},
      {"zb", std::nullopt, spec::Schedule::kZeroBubble, 1},
      {"zero-bubble", std::nullopt, spec::Schedule::kZeroBubble, 1},
      {"dualpipe", std::nullopt, spec::Schedule::kOneFOneB, 1},  // unknown: 1F1B, said
  };
  for (const auto& [words, vpp, schedule, v] : cases) {
    SCOPED_TRACE(words);
    nlohmann::json row = DenseRow();
    row["parallelism"]["pp"] = 4;
    row["parallelism"]["dp"] = 2;
    row["parallelism"]["micro_batch_size"] = 1;
    row["parallelism"]["pipeline_schedule"] = words;
    row["parallelism"]["vpp"] = vpp ? nlohmann::json(*vpp) : nlohmann::json(nullptr);
    const calib::Run r = ReadOne(row);
    ASSERT_TRUE(r.usable()) << r.unusable;
    EXPECT_EQ(r.layout.schedule, schedule);
    EXPECT_EQ(r.layout.virtual_stages, v);
    EXPECT_EQ(Assumed(r, "names no known schedule: read as 1F1B"),
              std::string(words) == "dualpipe");
    // Written and read back: the same schedule, and nothing said lost.
    std::vector<std::string> dropped;
    const nlohmann::json written = calib::RunRowJson(r, &dropped);
    const calib::Run back = ReadOne(written);
    EXPECT_EQ(back.layout.schedule, r.layout.schedule);
    EXPECT_EQ(back.layout.virtual_stages, r.layout.virtual_stages);
    EXPECT_TRUE(written["source"]["notes"].is_null()) << written["source"]["notes"];
  }
}

TEST(RowReading, RecomputeDetail) {
  const std::vector<std::tuple<const char*, const char*, spec::Recompute>> cases = {
      {nullptr, "--recompute-granularity full --recompute-method uniform", spec::Recompute::kFull},
      {nullptr, "--recompute-modules core_attn moe_act", spec::Recompute::kSelective},
      {nullptr, "trained without activation checkpointing", spec::Recompute::kNone},
      {"true", nullptr, spec::Recompute::kFull},
      {"yes", "selective (core attention)", spec::Recompute::kSelective},
      {"no", nullptr, spec::Recompute::kNone},
      {"selective op", nullptr, spec::Recompute::kSelective},
      {"full", "--recompute-method block --recompute-num-layers 2", spec::Recompute::kFull},
  };
  for (const auto& [words, detail, want] : cases) {
    nlohmann::json row = DenseRow();
    row["parallelism"]["activation_recompute"] =
        words ? nlohmann::json(words) : nlohmann::json(nullptr);
    row["parallelism"]["recompute_detail"] =
        detail ? nlohmann::json(detail) : nlohmann::json(nullptr);
    const calib::Run r = ReadOne(row);
    EXPECT_EQ(r.layout.recompute, want)
        << (words ? words : "null") << " / " << (detail ? detail : "null");
    if (detail != nullptr && std::string(detail).find("block") != std::string::npos) {
      EXPECT_TRUE(Assumed(r, "costed as full on all"));
    }
  }
}

TEST(RowReading, UnknownSkuEstimatedWithTheAssumptionStated) {
  nlohmann::json row = DenseRow();
  row["hardware"]["gpu_model"] = "Ampere";
  row["hardware"]["gpu_type"] = nullptr;
  const calib::Run r = ReadOne(row);
  ASSERT_TRUE(r.usable()) << r.unusable;
  EXPECT_EQ(r.sku, "a100-80gb");
  EXPECT_TRUE(Assumed(r, "'Ampere' names no SKU: estimated as an A100 80GB"));
  row["hardware"]["gpu_memory_gb"] = 40;
  EXPECT_EQ(ReadOne(row).sku, "a100-40gb");
  row["hardware"]["gpu_model"] = "V100";  // no preset and no generation word: not estimated
  const calib::Run v100 = ReadOne(row);
  EXPECT_FALSE(v100.usable());
  EXPECT_FALSE(v100.unreadable);
}

// Megatron's uneven first/last stages: costed with the layers rounded up to the split the
// heaviest stage has (ceil(layers / chunks) a chunk).
TEST(RowReading, UnevenPipelineStages) {
  nlohmann::json row = MoeRow();  // 94 layers on pp 32 x vpp 3 = 96 chunks: one layer a chunk
  row["parallelism"]["tp"] = 2;
  row["parallelism"]["pp"] = 32;
  row["parallelism"]["vpp"] = 3;
  row["parallelism"]["dp"] = 4;
  row["parallelism"]["ep"] = 8;
  const calib::Run r = ReadOne(row);
  ASSERT_TRUE(r.usable()) << r.unusable;
  EXPECT_EQ(r.model.layers, 96);
  EXPECT_EQ(r.layout.virtual_stages, 3);
  EXPECT_TRUE(Assumed(r, "94 layers on pp 32 x vpp 3 = 96 chunks"));
  // Its estimate is the 96-layer model's (the same row published with 96 layers).
  auto cal = ShippedCalibration();
  ASSERT_TRUE(cal.ok());
  nlohmann::json even = row;
  even["model"]["num_layers"] = 96;
  const Prediction p = Predict(r, *cal), q = Predict(ReadOne(even), *cal);
  EXPECT_GT(p.tokens_per_s_gpu, 0);
  EXPECT_DOUBLE_EQ(p.tokens_per_s_gpu, q.tokens_per_s_gpu);

  // DeepSeek-V3 (61 layers) at pp 16 and at pp 8 x vpp 4: estimated, with its MLA and dense
  // first layers from the published config.
  nlohmann::json ds = nlohmann::json::parse(R"({
    "id": "dsv3",
    "source": {"group": "g", "software": "Megatron-Core", "date": "2025-06"},
    "model": {"family": "DeepSeek-V3", "arch": "moe", "num_layers": 61, "hidden_size": 7168,
              "ffn_hidden_size": 18432, "moe_ffn_hidden_size": 2048, "num_attention_heads": 128,
              "vocab_size": 129280, "seq_length": 4096, "num_experts": 256, "top_k": 8,
              "shared_experts": 1},
    "hardware": {"gpu_model": "H100", "gpu_type": "H100 SXM5 80GB", "num_gpus": 1024},
    "parallelism": {"tp": 2, "pp": 16, "dp": 32, "cp": 1, "ep": 64, "etp": 1,
                    "data_parallel_sharding": "distributed optimizer", "sequence_parallel": true,
                    "activation_recompute": "full", "micro_batch_size": 1,
                    "global_batch_size": 8192, "precision": "fp8"},
    "measured": {"tokens_per_sec_per_gpu": 1000}
  })");
  const calib::Run pp16 = ReadOne(ds);
  ASSERT_TRUE(pp16.usable()) << pp16.unusable;
  EXPECT_EQ(pp16.model.layers, 62);
  EXPECT_TRUE(pp16.model.is_mla());
  EXPECT_EQ(pp16.model.moe.first_dense_layers, 3);
  EXPECT_EQ(pp16.model.activation, spec::Activation::kSwiGLU);
  ds["parallelism"]["pp"] = 8;
  ds["parallelism"]["vpp"] = 4;
  ds["parallelism"]["dp"] = 64;
  const calib::Run pp8 = ReadOne(ds);
  ASSERT_TRUE(pp8.usable()) << pp8.unusable;
  EXPECT_EQ(pp8.model.layers, 62);
  EXPECT_GT(Predict(pp8, *cal).tokens_per_s_gpu, 0);
  // Further than one layer a stage from a split: not estimated (not guessed).
  ds["model"]["num_layers"] = 40;  // 40 on 32 chunks: 2 a chunk would need 22 more
  EXPECT_FALSE(ReadOne(ds).usable());
}

// One bad row never sinks the file: it comes back unreadable, by index and reason, and the
// others are read as if it were not there.
TEST(RowReading, BadRowsAmongGoodRows) {
  nlohmann::json rows = nlohmann::json::array();
  rows.push_back(DenseRow());
  nlohmann::json bad_type = DenseRow();
  bad_type["id"] = "bad-type";
  bad_type["parallelism"]["tp"] = "eight";
  rows.push_back(bad_type);
  rows.push_back(42);
  nlohmann::json no_id = DenseRow();
  no_id.erase("id");
  rows.push_back(no_id);
  rows.push_back(DenseRow());  // "dense" again
  nlohmann::json negative = MoeRow();
  negative["id"] = "negative";
  negative["model"]["shared_experts"] = -1;
  rows.push_back(negative);
  rows.push_back(MoeRow());
  auto runs = RunsFromJson(rows, "mixed.json");
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 7u);
  const std::vector<std::pair<bool, const char*>> want = {
      {false, ""},
      {true, "parallelism.tp must be a number, not string"},
      {true, "is not an object"},
      {true, "id must be a non-empty string"},
      {true, "id is used twice (first by row 0)"},
      {true, "model.shared_experts must be a whole number from 0"},
      {false, ""},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    const calib::Run& r = (*runs)[i];
    EXPECT_EQ(r.index, i);
    EXPECT_EQ(r.unreadable, want[i].first) << i << ": " << r.unusable;
    EXPECT_NE(r.unusable.find(want[i].second), std::string::npos) << i << ": " << r.unusable;
    if (!want[i].first) {
      EXPECT_TRUE(r.usable()) << i << ": " << r.unusable;
    }
  }
  EXPECT_EQ((*runs)[2].id, "#2");
  EXPECT_FALSE(RunsFromJson(nlohmann::json::object(), "x.json").ok());  // not an array at all
}

TEST(RowReading, BatchFromAccumulationSteps) {
  nlohmann::json row = DenseRow();
  row["parallelism"]["global_batch_size"] = nullptr;
  row["parallelism"]["grad_accum_steps"] = 4;
  const calib::Run r = ReadOne(row);
  ASSERT_TRUE(r.usable()) << r.unusable;
  EXPECT_EQ(r.train.global_batch_tokens, 8 * 1 * 4 * 8192);  // dp x mbs x steps x seq
  row["parallelism"]["global_batch_tokens"] = 1048576;       // the token count wins when published
  EXPECT_EQ(ReadOne(row).train.global_batch_tokens, 1048576);
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
  // Unknown keys and tables that would never apply (issue 31): named, not ignored.
  auto typo = ProfileFromToml(
      "[stack]\nname = \"x\"\nstack = \"megatron\"\n[interval.h100]\nlo = 0.9\nhi = 1.1\n"
      "runs = 3\nhigh = 2\n",
      "typo.toml");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("interval.h100.high: unknown key (known: lo, hi, runs)"),
            std::string::npos)
      << typo.status().message();
  auto preset_name = ProfileFromToml(
      "[stack]\nname = \"x\"\nstack = \"megatron\"\n[gpu.h100-sxm]\ngemm_efficiency = 0.6\n",
      "gpu.toml");
  ASSERT_FALSE(preset_name.ok());
  EXPECT_NE(preset_name.status().message().find(
                "gpu.h100-sxm: never applies: cluster h100-sxm has the GPU class 'h100'"),
            std::string::npos)
      << preset_name.status().message();
  // calibrate --name with a quote, a backslash and a newline: the written TOML reads back.
  p.name = "my \"fit\" \\ v2\nline";
  auto quoted = ProfileFromToml(ProfileToml(p), "quoted");
  ASSERT_TRUE(quoted.ok()) << quoted.status().message();
  EXPECT_EQ(quoted->name, p.name);
}

}  // namespace
}  // namespace pentamesh::calib

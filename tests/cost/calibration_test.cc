// Predicted vs published MFU for runs published with their full layouts. The CALIBRATION runs
// chose the defaults of CostParams (docs/COST_MODEL.md); the HOLDOUT runs were not used and show
// the model's error on unseen runs. Prints the table that docs/COST_MODEL.md quotes.
// PM_COST_PARAMS="gemm_efficiency_max=0.7,tp_overlap=0.3" overrides defaults (for calibrating).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "cost/cost.h"
#include "spec/layout.h"
#include "spec/load_toml.h"

namespace pentamesh::cost {
namespace {

// GPT-3-style model of the Megatron papers: MHA, GELU, FFN 4h, vocab 51,200, tied embeddings.
spec::ModelSpec Gpt(int64_t heads, int64_t hidden, int64_t layers) {
  spec::ModelSpec m;
  m.name = "gpt-" + std::to_string(hidden);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = 51200;
  m.max_seq_len = 2048;
  m.activation = spec::Activation::kGeLU;
  m.tied_embeddings = true;
  return m;
}

// kMfu: attention counted as the full square (Megatron's 12 L h s); kMfuCausal: the causal half
// (the only reading of Llama 3's 128K row consistent with the 8K rows, see docs/COST_MODEL.md);
// kHfu: with the recomputed forward (Narayanan et al. 2021 count 96 B s l h^2 (...)).
enum class Reported { kMfu, kMfuCausal, kHfu };

struct PublishedRun {
  const char* name;
  spec::ModelSpec model;
  const char* cluster;
  int64_t gpus;
  int64_t seq, batch_seqs;
  const char* layout;
  double published;   // as the source reports it
  Reported reported;  // MFU, or HFU (Megatron 2021 counts the recomputed forward)
  bool calibration;   // used to choose the defaults
  bool flash = true;  // flash attention; the 2021-22 Megatron runs materialized the scores
  // Megatron-LM of 2021: fp32 gradient all-reduce, not overlapped with backward.
  bool megatron_2021 = false;
};

std::vector<PublishedRun> Runs() {
  std::vector<PublishedRun> r;
  const spec::ModelSpec l405 = *spec::LoadModel("llama3-405b");
  // Llama 3 (Dubey et al. 2024, Table 4): BF16 MFU on H100; TFLOP/s 430, 400, 380 of 989.
  // The 128K row prints DP 4, but 16,384 GPUs and 16M tokens need DP 8 (used here).
  r.push_back({"Llama3-405B 8K 16k GPU", l405, "h100-sxm", 16384, 8192, 2048,
               "dp=128 tp=8 pp=16 zero=1 schedule=interleaved:4", 0.404, Reported::kMfuCausal,
               true});
  r.push_back({"Llama3-405B 8K 8k GPU", l405, "h100-sxm", 8192, 8192, 2048,
               "dp=64 tp=8 pp=16 zero=1 schedule=interleaved:4", 0.435, Reported::kMfuCausal,
               false});
  r.push_back({"Llama3-405B 128K", l405, "h100-sxm", 16384, 131072, 128,
               "dp=8 tp=8 pp=16 cp=16 zero=1 schedule=interleaved:4", 0.384, Reported::kMfuCausal,
               false});
  // Korthikanti et al. 2022 (Megatron-LM README): A100 80GB, seq 2048, DP 1, SP + selective.
  r.push_back({"GPT-175B TP8 PP8", Gpt(96, 12288, 96), "a100-80gb", 64, 2048, 64,
               "dp=1 tp=8 pp=8 recompute=selective", 0.514, Reported::kMfu, true, false});
  r.push_back({"GPT-22B TP8", Gpt(64, 6144, 48), "a100-80gb", 8, 2048, 4,
               "dp=1 tp=8 pp=1 mbs=1 recompute=selective", 0.415, Reported::kMfu, false, false});
  r.push_back({"GPT-530B TP8 PP35", Gpt(128, 20480, 105), "a100-80gb", 280, 2048, 280,
               "dp=1 tp=8 pp=35 recompute=selective", 0.560, Reported::kMfu, false, false});
  r.push_back({"GPT-1T TP8 PP64", Gpt(160, 25600, 128), "a100-80gb", 512, 2048, 512,
               "dp=1 tp=8 pp=64 recompute=selective", 0.563, Reported::kMfu, false, false});
  // Narayanan et al. 2021, Table 1 (A100, seq 2048, full recomputation; TFLOP/s of 312 counted
  // with the recomputed forward = HFU).
  r.push_back({"GPT-18B TP8 DP32", Gpt(48, 6144, 40), "a100-80gb", 256, 2048, 1024,
               "dp=32 tp=8 recompute=full sp=off", 135.0 / 312, Reported::kHfu, false, false,
               true});
  r.push_back({"GPT-145B TP8 PP8 DP24", Gpt(96, 12288, 80), "a100-80gb", 1536, 2048, 2304,
               "dp=24 tp=8 pp=8 recompute=full schedule=interleaved:2 sp=off", 148.0 / 312,
               Reported::kHfu, false, false, true});
  r.push_back({"GPT-1T TP8 PP64 DP6", Gpt(160, 25600, 128), "a100-80gb", 3072, 2048, 3072,
               "dp=6 tp=8 pp=64 recompute=full schedule=interleaved:2 sp=off", 163.0 / 312,
               Reported::kHfu, false, false, true});
  return r;
}

CostParams ParamsFromEnv() {
  CostParams p;
  const char* env = std::getenv("PM_COST_PARAMS");
  if (env == nullptr) return p;
  std::stringstream in(env);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = item.substr(0, eq);
    const double v = std::stod(item.substr(eq + 1));
    if (key == "gemm_efficiency_max") p.gemm_efficiency_max = v;
    if (key == "gemm_dim_overhead") p.gemm_dim_overhead = v;
    if (key == "attention_relative") p.attention_relative = v;
    if (key == "tp_overlap") p.tp_overlap = v;
    if (key == "dp_overlap") p.dp_overlap = v;
    if (key == "cp_overlap") p.cp_overlap = v;
    if (key == "bus_efficiency_intra") p.bus_efficiency_intra = v;
    if (key == "bus_efficiency_inter") p.bus_efficiency_inter = v;
  }
  return p;
}

TEST(Calibration, PredictedVsPublished) {
  const CostParams env_params = ParamsFromEnv();
  std::printf(
      "| run | layout | GPUs | set | published | predicted | error | MFU full-square "
      "| fits |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  double sum_abs_cal = 0, sum_abs_hold = 0;
  int n_cal = 0, n_hold = 0;
  for (const PublishedRun& run : Runs()) {
    spec::TrainSpec train;
    train.name = "published";
    train.seq_len = run.seq;
    train.global_batch_tokens = run.seq * run.batch_seqs;
    train.total_tokens = 1e12;
    train.usd_per_gpu_hour = 2;
    spec::ModelSpec model = run.model;
    model.max_seq_len = std::max(model.max_seq_len, run.seq);
    const spec::ClusterSpec cluster = *spec::LoadCluster(run.cluster, run.gpus);
    const spec::Layout layout = *spec::ParseLayout(run.layout);
    CostParams params = env_params;
    params.materialize_scores = !run.flash;
    if (run.megatron_2021) {
      params.grad_bytes = 4;
      params.dp_overlap = 0;
    }
    const Estimate e = EstimateLayout(model, cluster, train, layout, params);
    ASSERT_GT(e.microbatches, 0) << run.name << ": " << e.violations[0];
    const double predicted = run.reported == Reported::kMfu         ? e.mfu
                             : run.reported == Reported::kMfuCausal ? e.mfu_causal
                                                                    : e.hfu;
    const double err = predicted / run.published - 1.0;
    (run.calibration ? sum_abs_cal : sum_abs_hold) += std::abs(err);
    (run.calibration ? n_cal : n_hold)++;
    const char* kind = run.reported == Reported::kMfu         ? "MFU"
                       : run.reported == Reported::kMfuCausal ? "MFU (causal)"
                                                              : "HFU";
    std::printf("| %s | %s | %lld | %s | %.1f%% %s | %.1f%% | %+.0f%% | %.1f%% | %s |\n", run.name,
                spec::ShortLayout(layout).c_str(), static_cast<long long>(run.gpus),
                run.calibration ? "calibration" : "holdout", 100 * run.published, kind,
                100 * predicted, 100 * err, 100 * e.mfu, e.fits ? "yes" : "no");
    // Every run, calibration or not, within 20% of the published number.
    EXPECT_LT(std::abs(err), 0.20) << run.name;
  }
  std::printf("mean |error|: calibration %.1f%% (%d runs), holdout %.1f%% (%d runs)\n",
              100 * sum_abs_cal / n_cal, n_cal, 100 * sum_abs_hold / n_hold, n_hold);
}

}  // namespace
}  // namespace pentamesh::cost

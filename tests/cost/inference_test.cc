// cost/inference.h and plan/serve.h: KV-cache bytes against hand counts (GQA, MLA, sliding
// window), weight-only INT8/INT4 bytes against their closed form, experts touched against linearity
// of expectation, the published serving measurements of bench/data/published_serving.json within
// 25%, the rules that name their flag, and the search against brute force over the same layouts.
#include "cost/inference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "calib/profile.h"
#include "cost/attention.h"
#include "plan/serve.h"
#include "spec/load_toml.h"

namespace pentamesh::cost {
namespace {

struct Specs {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  CostParams params;
};

// The specs as `pentamesh serve` loads them (--stack megatron, the default).
Specs Load(const std::string& model, const std::string& cluster) {
  Specs s;
  s.model = spec::LoadModel(model).value();
  s.cluster = spec::LoadCluster(cluster, std::nullopt).value();
  const calib::Profile stack = calib::LoadProfile("megatron").value();
  calib::ApplyProfile(stack, s.cluster, s.params);
  return s;
}

Context MakeContext(const Specs& s) { return ServeContext(s.model, s.cluster, s.params); }

ServeWorkload Workload(int64_t input, int64_t output, int64_t requests = 1) {
  ServeWorkload w;
  w.input_tokens = input;
  w.output_tokens = output;
  w.requests = requests;
  return w;
}

ServeLayout Layout(int64_t tp, int64_t ep = 1, int64_t pp = 1) {
  return {.tp = tp, .ep = ep, .pp = pp, .replicas = 1};
}

TEST(Inference, KvBytesPerTokenGqa) {
  const Context ctx = MakeContext(Load("llama3-70b", "h100-sxm"));
  // Llama 3 70B: 80 layers x (k + v) x 8 kv heads x 128 x 2 bytes = 327,680 bytes a token.
  const ServeEstimate e = EstimateServe(ctx, Layout(4), Workload(1000, 24));
  ASSERT_TRUE(e.fits) << e.violations.front();
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_token, 80.0 * 2 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_token_gpu, 80.0 * 2 * 8 * 128 * 2 / 4);
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_request_gpu, 1024 * 80.0 * 2 * 8 * 128 * 2 / 4);
  // tp 8 = kv_heads: one head a rank; replicas beyond that are tested on tp 8 of a 4-head model.
  spec::ModelSpec four = ctx.model();
  four.kv_heads = 4;
  const Context ctx4(four, ctx.cluster(), spec::TrainSpec{}, ctx.params());
  const ServeEstimate e8 = EstimateServe(ctx4, Layout(8), Workload(1000, 24));
  EXPECT_DOUBLE_EQ(e8.kv_bytes_per_token_gpu, 80.0 * 2 * 128 * 2);  // one of 4 heads per rank
}

// The engines' memory policies: vLLM's gpu_memory_utilization is a share of the device (the
// weights, the step and the framework come out of it), TensorRT-LLM's free_gpu_memory_fraction a
// share of what they leave. DeepSeek-R1 FP8 at TP 4 on B200 (InferenceX's launch) fits only the
// second way at 0.8 (0.8 x 192.27 GB is less than its 170.6 GB of weights a GPU).
TEST(Inference, MemoryFractionOfTheDeviceOrOfWhatIsFree) {
  const Context ctx = MakeContext(Load("deepseek-v3-like", "b200"));
  ServeWorkload w = Workload(1024, 1024);
  ASSERT_TRUE(ParseServeWeights("fp8", w));
  w.kv_fp8 = true;
  w.engine.gpu_memory_utilization = 0.8;
  const ServeEstimate device = EstimateServe(ctx, Layout(4), w);
  EXPECT_FALSE(device.fits);
  EXPECT_NEAR(device.memory.capacity, 0.8 * 192.27e9, 1e3);
  w.engine.profile.memory_fraction_of_free = true;
  const ServeEstimate free = EstimateServe(ctx, Layout(4), w);
  ASSERT_TRUE(free.fits) << free.violations.front();
  const ServeMemory& m = free.memory;
  EXPECT_NEAR(m.capacity, 192.27e9, 1e3);
  const double left =
      m.capacity - m.weights - std::max(m.activations, m.activation_reserve) - m.framework;
  EXPECT_NEAR(free.tokens_fit * free.kv_bytes_per_token_gpu, 0.8 * left, 1e-6 * left);
  // Where both fit, a share u of what is left holds (1 - u) x (weights + step + framework) more
  // KV than the share u of the device.
  const Context small = MakeContext(Load("llama3-8b", "b200"));
  ServeWorkload v = Workload(1024, 1024);
  v.engine.gpu_memory_utilization = 0.8;
  const ServeEstimate a = EstimateServe(small, Layout(1), v);
  v.engine.profile.memory_fraction_of_free = true;
  const ServeEstimate b = EstimateServe(small, Layout(1), v);
  const ServeMemory& n = a.memory;
  const double taken = n.weights + std::max(n.activations, n.activation_reserve) + n.framework;
  EXPECT_NEAR((b.tokens_fit - a.tokens_fit) * a.kv_bytes_per_token_gpu, 0.2 * taken, 1e-6 * taken);
}

TEST(Inference, KvCacheElementBytesFollowThePrecision) {
  // BF16 KV beside BF16 and FP8 weights, 1 byte with --kv-fp8, FP32 beside FP32 weights (the
  // engine's generation, train::PredictGeneration).
  const Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const double elements = 32.0 * 2 * 8 * 128;  // Llama 3 8B: layers x (k + v) x kv heads x 128
  ServeWorkload w = Workload(1000, 24);
  EXPECT_DOUBLE_EQ(EstimateServe(ctx, Layout(1), w).kv_bytes_per_token, elements * 2);
  w.kv_fp8 = true;
  EXPECT_DOUBLE_EQ(EstimateServe(ctx, Layout(1), w).kv_bytes_per_token, elements * 1);
  w.kv_fp8 = false;
  w.precision = spec::Precision::kFp32;
  const ServeEstimate fp32 = EstimateServe(ctx, Layout(1), w);
  EXPECT_DOUBLE_EQ(fp32.kv_bytes_per_token, elements * 4);
  EXPECT_DOUBLE_EQ(fp32.memory.weights,
                   4.0 / 2.0 * EstimateServe(ctx, Layout(1), Workload(1000, 24)).memory.weights);
}

TEST(Inference, WeightOnlyIntegerWeightsAreReadAtTheirSizeAndMultipliedAtTheBf16Rate) {
  // W8A16 / W4A16 (AWQ, GPTQ): bits / 8 bytes a weight plus a BF16 scale per group of 128, so
  // the weights' memory and a decode step's weight read shrink by (bits / 8 + 2 / 128) / 2 of
  // BF16's; a long prompt's prefill is compute-bound at the BF16 rate; the KV cache stays BF16.
  const Context ctx = MakeContext(Load("llama3-8b", "h100-sxm"));
  const ServeWorkload bf16 = Workload(4096, 64);
  const ServeEstimate b = EstimateServe(ctx, Layout(1), bf16);
  ASSERT_TRUE(b.fits);
  for (const char* name : {"int8", "int4"}) {
    ServeWorkload w = bf16;
    ASSERT_TRUE(ParseServeWeights(name, w));
    const double bytes = w.weight_only_bits / 8.0 + 2.0 / 128.0;
    const ServeEstimate e = EstimateServe(ctx, Layout(1), w);
    ASSERT_TRUE(e.fits) << name;
    EXPECT_EQ(ServeWeightsName(w.precision, w.weight_only_bits, w.fp4), name);
    EXPECT_NEAR(e.memory.weights, b.memory.weights * bytes / 2.0, 1e-6 * b.memory.weights);
    EXPECT_NEAR(e.decode_weights_s, b.decode_weights_s * bytes / 2.0, 1e-9 * b.decode_weights_s);
    // Only the GEMMs' row tile differs (kWeightOnlyRowTile 16 for 128): each GEMM's time falls
    // by less than (m + 16) / (m + 128) of it, the other kernels' not at all.
    EXPECT_LT(e.prefill_compute_s, b.prefill_compute_s) << name;
    EXPECT_GT(e.prefill_compute_s, b.prefill_compute_s * (4096.0 + 16) / (4096.0 + 128)) << name;
    EXPECT_DOUBLE_EQ(e.kv_bytes_per_token, b.kv_bytes_per_token) << name;
  }
  // Weight-only quantization beside FP8 GEMMs, or another bit count, is refused by name.
  ServeWorkload bad = bf16;
  bad.weight_only_bits = 4;
  bad.precision = spec::Precision::kFp8;
  const ServeEstimate e = EstimateServe(ctx, Layout(1), bad);
  ASSERT_FALSE(e.fits);
  EXPECT_NE(e.violations.front().find("--precision"), std::string::npos) << e.violations.front();
  bad.precision = spec::Precision::kBf16;
  bad.weight_only_bits = 3;
  EXPECT_FALSE(EstimateServe(ctx, Layout(1), bad).fits);
  ServeWorkload unknown;
  EXPECT_FALSE(ParseServeWeights("int3", unknown));
}

TEST(Inference, Nvfp4WeightsAreReadAtTheirSizeAndMultipliedAtTheFp4Rate) {
  // NVFP4: half a byte an element plus an FP8 scale per 16 (0.5625 bytes), weights and GEMM inputs
  // alike; the GEMMs at ServeGemmSpeedup: the FP4 / BF16 peaks (4 on a B200), twice the FP8 one
  // (the FP8 / BF16 peaks, not the training fit's Fp8GemmSpeedup).
  const Context ctx = MakeContext(Load("llama3-70b", "b200"));
  ServeWorkload fp8 = Workload(8192, 64), fp4 = fp8;
  ASSERT_TRUE(ParseServeWeights("fp8", fp8));
  ASSERT_TRUE(ParseServeWeights("fp4", fp4));
  EXPECT_EQ(ServeWeightsName(fp4.precision, fp4.weight_only_bits, fp4.fp4), "fp4");
  EXPECT_DOUBLE_EQ(kNvfp4Bytes, 0.5625);
  EXPECT_DOUBLE_EQ(ServeGemmSpeedup(ctx, /*fp4=*/true), 9000.0 / 2250.0);
  EXPECT_DOUBLE_EQ(ServeGemmSpeedup(ctx, /*fp4=*/false), 4500.0 / 2250.0);
  EXPECT_LT(Fp8GemmSpeedup(ctx), ServeGemmSpeedup(ctx, false));
  const ServeEstimate e8 = EstimateServe(ctx, Layout(1), fp8);
  const ServeEstimate e4 = EstimateServe(ctx, Layout(1), fp4);
  ASSERT_TRUE(e8.fits && e4.fits);
  EXPECT_NEAR(e4.memory.weights, e8.memory.weights * kNvfp4Bytes, 1e-6 * e8.memory.weights);
  EXPECT_NEAR(e4.decode_weights_s, e8.decode_weights_s * kNvfp4Bytes, 1e-9 * e8.decode_weights_s);
  // A long prompt's GEMMs run at twice the FP8 rate, its attention at the same: the prefill
  // falls, by less than half.
  EXPECT_LT(e4.prefill_compute_s, 0.9 * e8.prefill_compute_s);
  EXPECT_GT(e4.prefill_compute_s, 0.5 * e8.prefill_compute_s);
  EXPECT_DOUBLE_EQ(e4.kv_bytes_per_token, e8.kv_bytes_per_token);
  // A one-request decode step of the simulation is the estimate's inter-token latency.
  const ServeStepCost c = MakeServeStepCost(ctx, Layout(1), fp4);
  const double step = ServeStepTime(c, {.tokens = 1, .sequences = 1, .kv_tokens_global = 8200});
  EXPECT_NEAR(step / e4.itl_s, 1.0, 0.03);
  // Hopper has no FP4 tensor cores: refused by name.
  const Context h100 = MakeContext(Load("llama3-70b", "h100-sxm"));
  const ServeEstimate refused = EstimateServe(h100, Layout(4), fp4);
  ASSERT_FALSE(refused.fits);
  EXPECT_NE(refused.violations.front().find("--precision: fp4 needs a GPU with FP4"),
            std::string::npos)
      << refused.violations.front();
}

// A one-request decode step of the simulation's step cost is the estimate's inter-token latency
// (both bound by the weight read) for every weight format, FP8 on an A100 included: without FP8
// tensor cores its FP8 weights run weight-only (W8A16), read as FP8 at the BF16 rate.
TEST(Inference, OneDecodeStepIsTheEstimatesItlForEveryWeightFormat) {
  const Context ctx = MakeContext(Load("llama3-70b", "a100-80gb"));
  for (const char* name : {"bf16", "fp8", "int8", "int4"}) {
    ServeWorkload w = Workload(100, 1000);
    ASSERT_TRUE(ParseServeWeights(name, w));
    const ServeEstimate e = EstimateServe(ctx, Layout(2), w);
    ASSERT_TRUE(e.fits) << name;
    const ServeStepCost c = MakeServeStepCost(ctx, Layout(2), w);
    const double step = ServeStepTime(c, {.tokens = 1, .sequences = 1, .kv_tokens_global = 600});
    EXPECT_NEAR(step / e.itl_s, 1.0, 0.03) << name << ": step " << step << " s, itl " << e.itl_s;
  }
}

TEST(Inference, KvBytesPerTokenMlaIsTheLatent) {
  const Context ctx = MakeContext(Load("deepseek-v3-like", "h100-sxm"));
  // DeepSeek-V2 section 2.1.2: (d_c + d_h^R) = 512 + 64 elements a layer, held whole per tp rank.
  const ServeEstimate e = EstimateServe(ctx, Layout(8, 16), Workload(1000, 24));
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_token, 62.0 * (512 + 64) * 2);
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_token_gpu, 62.0 * (512 + 64) * 2);
}

TEST(Inference, SlidingWindowLayersKeepTheirWindow) {
  const Context ctx = MakeContext(Load("mistral-7b", "h100-sxm"));
  const spec::ModelSpec& m = ctx.model();
  ASSERT_GT(m.sliding_window, 0);
  const int64_t len = 2 * m.sliding_window;
  const ServeEstimate e = EstimateServe(ctx, Layout(1), Workload(len - 1, 1));
  const double per_layer_token = 2.0 * static_cast<double>(m.kv_heads * m.head_dim) * 2;
  EXPECT_DOUBLE_EQ(
      e.kv_bytes_per_request_gpu,
      static_cast<double>(m.layers) * static_cast<double>(m.sliding_window) * per_layer_token);
}

TEST(Inference, ExpertsTouchedByLinearityOfExpectation) {
  EXPECT_DOUBLE_EQ(ExpertsTouched(128, 4, 1), 4);
  // Two tokens: 4 + 4 x P(an expert of the second is not among the first's 4) = 4 + 4 x 124/128.
  EXPECT_NEAR(ExpertsTouched(128, 4, 2), 4 + 4 * 124.0 / 128, 1e-12);
  EXPECT_NEAR(ExpertsTouched(128, 4, 1e6), 128, 1e-9);
  EXPECT_DOUBLE_EQ(ExpertsTouched(0, 0, 10), 0);
}

TEST(Inference, MoeExpertsPerGpuAndOffloading) {
  const Context ctx = MakeContext(Load("meridianfin-72b", "h100-sxm"));
  ServeWorkload w = Workload(8000, 500);
  const ServeEstimate all = EstimateServe(ctx, Layout(8, 16), w);
  ASSERT_TRUE(all.fits);
  EXPECT_DOUBLE_EQ(all.experts_per_gpu, 8);
  EXPECT_DOUBLE_EQ(all.decode_offload_s, 0);
  w.experts_in_hbm = 16;
  w.expert_hit_rate = 0.9;
  const ServeEstimate off = EstimateServe(ctx, Layout(8), w);
  ASSERT_TRUE(off.fits) << off.violations.front();
  EXPECT_DOUBLE_EQ(off.experts_per_gpu, 16);
  // Decode touches 4 experts a MoE layer (one request); 10% of them cross PCIe.
  const double bytes = 79.0 * 4 * 0.1 * ctx.expert_params_one * 2 / 8;
  EXPECT_NEAR(off.decode_offload_s, bytes / (w.pcie_gbps * 1e9), 1e-12);
  const ServeEstimate resident = EstimateServe(ctx, Layout(8), Workload(8000, 500));
  EXPECT_LT(off.memory.weights, resident.memory.weights);
}

// Prefill is the forward pass of the request (the training model's forward layer time): without
// the GEMM form's size overhead and elementwise kernels it is the closed form 2 T N / (tp rate)
// over the layers' matmul parameters N plus causal attention at its rate; the LM head runs on the
// last token only. FP8 pays the activations' casts, not the weights' (stored in FP8). A MoE
// request's routed work spreads over the ep groups: ep 2 halves it.
TEST(Inference, PrefillIsTheForwardPassOfTheRequest) {
  Specs dense = Load("llama3-70b", "h100-sxm");
  dense.params.gemm_dim_overhead = 0;
  dense.params.elementwise_traffic = 0;
  const Context ctx = MakeContext(dense);
  // Serving's attention runs at the parameter's physical prior (0.75 of a GEMM's rate), not at the
  // training fit the stack's calibration gives attention_relative (cost::ServeContext).
  const double attention = 0.75;
  EXPECT_EQ(dense.params.inference_attention_relative, attention);
  const double T = 16384, tp = 2;  // every GEMM compute-bound
  const double rate = dense.cluster.peak_tflops * 1e12 * GemmEfficiency(ctx);
  const ParamCounts& n = ctx.counts();
  const double want = 2.0 * T * (n.attention + n.dense_mlp) / (tp * rate) +
                      T * AttentionForwardFlops(dense.model, T, true) / (tp * rate * attention);
  const ServeEstimate e = EstimateServe(ctx, Layout(2), Workload(16384, 16));
  EXPECT_NEAR(e.prefill_compute_s / want, 1.0, 1e-9);

  // FP8: the GEMMs at the FP8 rate (the BF16 one times the FP8 / BF16 peaks: a served checkpoint's
  // GEMMs, not the training fit's) plus a cast of each GEMM's input (3 bytes an element): the
  // fused QKV and the gate/up projections read h, the out-projection o / tp, the down f / tp.
  ServeWorkload fp8 = Workload(16384, 16);
  fp8.precision = spec::Precision::kFp8;
  const ServeEstimate e8 = EstimateServe(ctx, Layout(2), fp8);
  const double h = static_cast<double>(dense.model.hidden),
               f = static_cast<double>(dense.model.ffn_hidden);
  const double o = AttentionShapeOf(dense.model).o;  // the out-projection's input width
  const double cast_elems = T * dense.model.layers * (h + o / tp + h + f / tp);
  const double cast =
      3.0 * cast_elems / (dense.cluster.hbm_gbps * 1e9 * dense.params.hbm_efficiency);
  const double speedup = dense.cluster.peak_fp8_tflops / dense.cluster.peak_tflops;
  const double want8 = 2.0 * T * (n.attention + n.dense_mlp) / (tp * rate * speedup) +
                       T * AttentionForwardFlops(dense.model, T, true) / (tp * rate * attention) +
                       cast;
  EXPECT_NEAR(e8.prefill_compute_s / want8, 1.0, 1e-9);

  Specs moe = Load("mixtral-8x7b", "h100-sxm");
  moe.params.gemm_dim_overhead = 0;
  moe.params.elementwise_traffic = 0;
  moe.params.moe_imbalance = 1;
  const Context mctx = MakeContext(moe);
  const double routed = 2.0 * T * moe.model.moe.top_k * mctx.expert_params_one *
                        mctx.MoeLayers(0, moe.model.layers) / (2.0 * rate);
  const double ep1 = EstimateServe(mctx, Layout(2, 1), Workload(16384, 16)).prefill_compute_s;
  const double ep2 = EstimateServe(mctx, Layout(2, 2), Workload(16384, 16)).prefill_compute_s;
  EXPECT_NEAR((ep1 - ep2) / (0.5 * routed), 1.0, 1e-9);
}

// Published serving measurements (bench/data/published_serving.json): each within 25%.
TEST(Inference, PublishedServing) {
  std::ifstream in(std::string(PM_SOURCE_DIR) + "/bench/data/published_serving.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json data = nlohmann::json::parse(in);
  ASSERT_GE(data["rows"].size(), 4u);
  for (const auto& row : data["rows"]) {
    const Context ctx = MakeContext(Load(row["model"], row["cluster"]));
    ServeWorkload w = Workload(row["input_tokens"], row["output_tokens"], row["requests"]);
    w.precision = row["precision"] == "fp8" ? spec::Precision::kFp8 : spec::Precision::kBf16;
    const ServeEstimate e = EstimateServe(ctx, Layout(row["tp"].get<int64_t>()), w);
    ASSERT_TRUE(e.fits) << row["name"];
    for (const auto& key : row["compare"]) {
      const double predicted = key == "ttft_ms"  ? e.ttft_mean_s * 1e3
                               : key == "itl_ms" ? e.itl_s * 1e3
                                                 : e.request_s * 1e3;
      const double measured = row[key.get<std::string>()];
      EXPECT_NEAR(predicted / measured, 1.0, 0.25)
          << row["name"] << " " << key << ": predicted " << predicted << " measured " << measured;
    }
  }
}

TEST(Inference, RulesNameTheirFlag) {
  const Context ctx = MakeContext(Load("llama3-70b", "h100-sxm"));
  auto first = [&](const ServeLayout& l, const ServeWorkload& w) {
    const ServeEstimate e = EstimateServe(ctx, l, w);
    EXPECT_FALSE(e.fits);
    return e.violations.empty() ? std::string() : e.violations.front();
  };
  EXPECT_NE(first(Layout(8), Workload(130000, 2000)).find("--output-tokens"), std::string::npos);
  EXPECT_NE(first(Layout(8, 2), Workload(100, 10)).find("--ep"), std::string::npos);
  EXPECT_NE(first(Layout(8, 1, 3), Workload(100, 10)).find("--pp"), std::string::npos);
  EXPECT_NE(first(Layout(1), Workload(100, 10)).find("memory"), std::string::npos);
  EXPECT_NE(first(Layout(0), Workload(100, 10)).find("--tp/--ep/--pp/--replicas"),
            std::string::npos);
  EXPECT_NE(first(Layout(8), Workload(100, 0)).find("--output-tokens"), std::string::npos);
  // 48 heads and 8 kv heads at tp 6: 6 divides the heads, neither kv_heads nor tp the other.
  spec::ModelSpec odd = ctx.model();
  odd.heads = 48;
  const Context odd_ctx(odd, ctx.cluster(), spec::TrainSpec{}, ctx.params());
  const ServeEstimate e = EstimateServe(odd_ctx, Layout(6), Workload(100, 10));
  ASSERT_EQ(e.violations.size(), 1u);
  EXPECT_NE(e.violations.front().find("--tp: 6 and kv_heads = 8"), std::string::npos);
  // A KV cache that cannot hold one request beside the weights.
  const Context moe = MakeContext(Load("meridianfin-72b", "h100-sxm"));
  const ServeEstimate kv = EstimateServe(moe, Layout(2, 2), Workload(120000, 8000));
  ASSERT_EQ(kv.violations.size(), 1u);
  EXPECT_NE(kv.violations.front().find("--input-tokens/--output-tokens: the KV cache of one"),
            std::string::npos);
}

// The search's best is the cheapest fitting layout that meets the targets among all candidates.
TEST(Inference, SearchMatchesBruteForce) {
  const Context ctx = MakeContext(Load("meridianfin-72b", "h100-sxm"));
  const ServeWorkload w = Workload(50000, 2000, 4);
  const plan::ServeTargets targets{.ttft_p95_s = 5.0, .itl_s = 0.05};
  const plan::ServeSearchResult r = plan::SearchServe(ctx, w, targets, 3);
  ASSERT_FALSE(r.top.empty());
  double cheapest = INFINITY;
  int64_t met = 0;
  for (const ServeLayout& l : plan::ServeLayouts(ctx, w)) {
    const ServeEstimate e = EstimateServe(ctx, l, w);
    if (!e.fits || e.ttft_p95_s > targets.ttft_p95_s || e.itl_s > targets.itl_s) continue;
    ++met;
    cheapest = std::min(cheapest, e.usd_per_request);
  }
  EXPECT_EQ(r.met, met);
  EXPECT_DOUBLE_EQ(r.top.front().usd_per_request, cheapest);
  for (const ServeEstimate& e : r.top) EXPECT_LE(e.ttft_p95_s, targets.ttft_p95_s);
  for (size_t i = 1; i < r.top.size(); ++i) {
    EXPECT_LE(r.top[i - 1].usd_per_request, r.top[i].usd_per_request);
  }
}

}  // namespace
}  // namespace pentamesh::cost

// `pentamesh serve` end to end: the built binary's exit codes, the bad-input errors that name
// their flag (exit 2), the JSON keys, the search's best meeting its target, and the HTML page
// (self-contained; its charts render in headless Chromium when it is installed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "testing/cli_run.h"
#include "testing/html_page.h"

namespace {

namespace pt = pentamesh::testing;

const std::string kMeridian = "serve --model meridianfin-72b --input-tokens 50000 ";

TEST(ServeCli, BadInputExitsTwoNamingTheField) {
  struct Case {
    std::string args, field;
  };
  const Case cases[] = {
      // Output longer than the context.
      {"serve --model llama3-70b --input-tokens 100000 --output-tokens 40000 --tp 8",
       "--output-tokens: input 100000 + output 40000 = 140000 tokens exceed the context"},
      // A KV cache that cannot hold even one request beside the weights.
      {"serve --model meridianfin-72b --input-tokens 120000 --output-tokens 8000 --tp 2 --ep 2",
       "--input-tokens/--output-tokens: the KV cache of one request (128000 tokens) needs"},
      // TP that neither divides the 16 KV heads nor is a multiple of them (every violation is
      // printed; tp 3 breaks the heads rule too).
      {"serve --model meridianfin-72b --input-tokens 100 --output-tokens 10 --tp 3",
       "--tp: 3 and kv_heads = 16"},
      {"serve --model llama3-70b --input-tokens 100 --output-tokens 10 --tp 8 --ep 2",
       "--ep: llama3-70b is dense"},
      {"serve --model meridianfin-72b --input-tokens 100 --output-tokens 10 --tp 8 "
       "--experts-in-hbm 200",
       "--experts-in-hbm: 200 exceeds"},
      {"serve --model llama3-70b --input-tokens 0 --output-tokens 10", "--input-tokens"},
      {"serve --model llama3-70b --input-tokens 10 --output-tokens 10 --expert-hit-rate 1.5",
       "--expert-hit-rate"},
      {kMeridian + "--output-tokens 2000 --ttft-p95 1", "no serving layout meets --ttft-p95 1 ms"},
      // The simulation: one layout, one kind of arrivals; the engine policy's bounds.
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --concurrency 4",
       "--concurrency: simulate one layout: give --tp"},
      // The capacity search (--rate without --tp): an SLO no deployment meets; no such profile.
      {"serve --model llama3-8b --input-tokens 2000 --output-tokens 200 --rate 5 --slo-ttft 1",
       "--slo-ttft/--slo-itl: no deployment serves 5 requests/s"},
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 --engine nope",
       "--engine"},
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 --concurrency 4 "
       "--rate 2",
       "--concurrency/--rate: give one of them"},
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 "
       "--gpu-memory-utilization 1.5",
       "--gpu-memory-utilization"},
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 --block-size 0",
       "--block-size"},
      // Weight formats: the search's list only with --rate, fp8 only where the GPU has it.
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 --weight-formats "
       "int4",
       "--weight-formats: only the capacity search"},
      {"serve --model llama3-8b --cluster a100-80gb --input-tokens 100 --output-tokens 10 --rate "
       "2 --weight-formats bf16,fp8",
       "--weight-formats: fp8 needs a GPU with an FP8 peak"},
      {"serve --model llama3-8b --cluster h100-sxm --input-tokens 100 --output-tokens 10 --rate "
       "2 --weight-formats fp4",
       "--weight-formats: fp4 needs a GPU with an FP4 peak; h100-sxm has none"},
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 --precision int3",
       "--precision"},
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 --prefix-hit-rate 1",
       "--prefix-hit-rate: 1 must be in [0, 1)"},
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --rate 5 --slo-ttft 1000 "
       "--slo-itl 50 --prefix-hit-rate 1",
       "--prefix-hit-rate: 1 must be in [0, 1)"},
      // A vLLM script with TensorRT-LLM's scheduler budget.
      {"serve --model llama3-8b --input-tokens 100 --output-tokens 10 --tp 1 --engine trtllm "
       "--emit vllm /tmp/pm-serve-emit-refused",
       "--emit vllm/--engine trtllm: the script launches vllm"},
  };
  for (const Case& c : cases) {
    const pt::CliRun r = pt::Pentamesh(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(c.field), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST(ServeCli, JsonOfOneLayout) {
  const pt::CliRun r = pt::Pentamesh(
      "serve --model llama3-70b --precision fp8 --tp 2 --input-tokens 5000 --output-tokens 500 "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"layout", "gpus", "fits", "memory_bytes", "kv_bytes_per_token", "kv_bytes_per_request_gpu",
        "requests_fit", "tokens_fit", "prefill_ms", "decode_ms", "ttft_mean_ms", "ttft_p95_ms",
        "itl_ms", "output_tokens_per_s_gpu", "usd_per_request", "usd_per_million_output_tokens"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["layout"], "tp=2 ep=1 pp=1 replicas=1");
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"].get<double>(), 80.0 * 2 * 8 * 128 * 2);
}

// --concurrency: the estimate plus the simulation of a closed loop; at one client its TTFT is
// the estimate's prefill and its TPOT the estimate's ITL (tests/plan/serve_sim_test.cc proves
// the closed form; here the flags reach it).
TEST(ServeCli, SimulationJson) {
  const std::string base =
      "serve --model llama3-70b --precision fp8 --tp 2 --input-tokens 2000 --output-tokens 100 "
      "--json --sim-requests 20 ";
  const pt::CliRun one = pt::Pentamesh(base + "--concurrency 1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto j = nlohmann::json::parse(one.out);
  ASSERT_TRUE(j.contains("simulation"));
  const auto& sim = j["simulation"];
  for (const char* key :
       {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "requests_per_s", "output_tokens_per_s",
        "goodput_requests_per_s", "preemptions", "kv_blocks", "steps"}) {
    EXPECT_TRUE(sim.contains(key)) << key;
  }
  EXPECT_NEAR(sim["ttft_ms"]["p99"].get<double>() / j["prefill_ms"]["total"].get<double>(), 1.0,
              1e-9);
  EXPECT_NEAR(sim["tpot_ms"]["mean"].get<double>() / j["itl_ms"].get<double>(), 1.0, 1e-9);
  EXPECT_EQ(sim["steps"].get<int64_t>(), 20 * 100);
  // Poisson arrivals with a goodput target: goodput never exceeds throughput.
  const pt::CliRun rate = pt::Pentamesh(base + "--rate 2 --slo-ttft 1000 --slo-itl 30");
  ASSERT_EQ(rate.exit_code, 0) << rate.err;
  const auto r = nlohmann::json::parse(rate.out)["simulation"];
  EXPECT_LE(r["goodput_requests_per_s"].get<double>(), r["requests_per_s"].get<double>());
  EXPECT_GT(r["requests_per_s"].get<double>(), 0.0);
  // Drawn lengths: recorded, and one client's requests decode fewer steps than 20 x 100.
  const pt::CliRun drawn = pt::Pentamesh(base + "--concurrency 1 --length-range-ratio 0.5");
  ASSERT_EQ(drawn.exit_code, 0) << drawn.err;
  const auto d = nlohmann::json::parse(drawn.out)["simulation"];
  EXPECT_EQ(d["length_range_ratio"].get<double>(), 0.5);
  EXPECT_LT(d["steps"].get<int64_t>(), 20 * 100);
  EXPECT_GE(d["steps"].get<int64_t>(), 20 * 50);
  for (const char* bad : {"--length-range-ratio 1.5", "--length-range-ratio -0.1"}) {
    const pt::CliRun b = pt::Pentamesh(base + "--concurrency 1 " + bad);
    EXPECT_EQ(b.exit_code, 2) << bad;
    EXPECT_NE(b.err.find("--length-range-ratio"), std::string::npos) << b.err;
  }
}

// --request-trace: the trace's requests simulated (the example trace of configs/), its count,
// mean lengths and duration printed; a trace of one request is the single-request estimate of
// its lengths (the estimate's workload is the trace's longest prompt and request).
TEST(ServeCli, RequestTrace) {
  const std::string trace = std::string(PM_SOURCE_DIR) + "/configs/example-trace.jsonl";
  const pt::CliRun r =
      pt::Pentamesh("serve --model llama3-8b --tp 1 --json --request-trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sim = nlohmann::json::parse(r.out)["simulation"];
  EXPECT_EQ(sim["requests"].get<int64_t>(), 12);
  EXPECT_EQ(sim["trace"]["requests"].get<int64_t>(), 12);
  EXPECT_DOUBLE_EQ(sim["trace"]["mean_input_tokens"].get<double>(), 23590.0 / 12);
  EXPECT_DOUBLE_EQ(sim["trace"]["mean_output_tokens"].get<double>(), 2340.0 / 12);
  EXPECT_DOUBLE_EQ(sim["trace"]["duration_ms"].get<double>(), 6000);
  EXPECT_FALSE(sim.contains("rate_per_s"));
  const pt::CliRun text = pt::Pentamesh("serve --model llama3-8b --tp 1 --request-trace " + trace);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("12 requests, mean 1965.8 input + 195.0 output tokens, arrivals over "
                          "6.000 s"),
            std::string::npos)
      << text.out;

  // Dealt over two replicas (plan::SimulateServeTrace): every request still simulated, its
  // overlapping arrivals wait less, the throughput is the arrivals' either way.
  const pt::CliRun two =
      pt::Pentamesh("serve --model llama3-8b --tp 1 --replicas 2 --json --request-trace " + trace);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const auto sim2 = nlohmann::json::parse(two.out)["simulation"];
  EXPECT_EQ(sim2["engines"].get<int64_t>(), 2);
  EXPECT_LT(sim2["ttft_ms"]["mean"].get<double>(), sim["ttft_ms"]["mean"].get<double>());
  EXPECT_NEAR(sim2["requests_per_s"].get<double>() / sim["requests_per_s"].get<double>(), 1.0,
              0.05);

  const std::string one = std::string(PM_TEST_TMP) + "/one-request.jsonl";
  std::ofstream(one) << "{\"timestamp\": 250, \"input_length\": 2000, \"output_length\": 100}\n";
  const pt::CliRun t = pt::Pentamesh(
      "serve --model llama3-70b --precision fp8 --tp 2 --json --request-trace " + one);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto j = nlohmann::json::parse(t.out);
  const pt::CliRun fixed = pt::Pentamesh(
      "serve --model llama3-70b --precision fp8 --tp 2 --input-tokens 2000 --output-tokens 100 "
      "--json");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  const auto f = nlohmann::json::parse(fixed.out);
  EXPECT_NEAR(
      j["simulation"]["ttft_ms"]["max"].get<double>() / f["prefill_ms"]["total"].get<double>(), 1.0,
      1e-9);
  EXPECT_NEAR(j["simulation"]["tpot_ms"]["mean"].get<double>() / f["itl_ms"].get<double>(), 1.0,
              1e-9);
  EXPECT_EQ(j["simulation"]["steps"].get<int64_t>(), 100);
}

// --request-trace's errors: exit 2 naming the flags that clash, or the file, line and field.
TEST(ServeCli, RequestTraceBadInputExitsTwo) {
  const std::string dir = PM_TEST_TMP;
  const std::string good = dir + "/good.jsonl", bad = dir + "/bad.jsonl";
  std::ofstream(good) << "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 10}\n";
  std::ofstream(bad) << "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 10}\n"
                     << "{\"timestamp\": 5, \"input_length\": 130000, \"output_length\": 2000}\n";
  const std::string base = "serve --model llama3-8b --tp 1 --request-trace ";
  struct Case {
    std::string args, error;
  };
  const Case cases[] = {
      {base + good + " --input-tokens 100",
       "--request-trace and --input-tokens/--output-tokens: give one of them"},
      {base + good + " --output-tokens 10",
       "--request-trace and --input-tokens/--output-tokens: give one of them"},
      {base + good + " --rate 2", "--request-trace and --rate: give one of them"},
      {base + good + " --concurrency 2", "--request-trace and --concurrency: give one of them"},
      {base + good + " --sim-requests 5", "--request-trace and --sim-requests: give one of them"},
      {base + good + " --length-range-ratio 0.8",
       "--request-trace and --length-range-ratio: give one of them"},
      {"serve --model llama3-8b --request-trace " + good, "--request-trace: simulate one layout"},
      {base + bad, "--request-trace: " + bad +
                       " line 2: \"input_length\" 130000 + \"output_length\" 2000 = 132000 tokens "
                       "exceed the model's context of 131072"},
      {base + dir, "--request-trace: " + dir + ": is a directory"},
      {base + "/dev/zero", "is a character device"},
      {"serve --model llama3-8b --tp 1 --output-tokens 10",
       "--input-tokens and --output-tokens are required (or --request-trace FILE)"},
  };
  for (const Case& c : cases) {
    const pt::CliRun r = pt::Pentamesh(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << c.args << "\n" << r.err;
  }
}

// --rate without --tp: the capacity search's cheapest deployment meets the p95 SLOs.
TEST(ServeCli, CapacitySearchJson) {
  const pt::CliRun r = pt::Pentamesh(
      "serve --model llama3-8b --input-tokens 2000 --output-tokens 200 --rate 20 --slo-ttft 1000 "
      "--slo-itl 60 --engine trtllm --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["top"].empty());
  const auto& best = j["top"][0];
  EXPECT_TRUE(best["meets"].get<bool>());
  EXPECT_LE(best["ttft_p95_ms"].get<double>(), 1000.0);
  EXPECT_LE(best["itl_p95_ms"].get<double>(), 60.0);
  EXPECT_NEAR(best["usd_per_hour"].get<double>(), best["gpus"].get<double>() * 2.5, 1e-9);
  // The disaggregated deployment: both pools, its GPUs their sum, its p95s within the targets.
  ASSERT_TRUE(j.contains("disaggregated"));
  const auto& d = j["disaggregated"];
  EXPECT_EQ(d["gpus"].get<int>(), d["prefill"]["gpus"].get<int>() + d["decode"]["gpus"].get<int>());
  EXPECT_LE(d["ttft_p95_ms"].get<double>(), 1000.0);
  EXPECT_LE(d["itl_p95_ms"].get<double>(), 60.0);
  EXPECT_NEAR(d["ttft_p95_ms"].get<double>(),
              d["prefill"]["ttft_p95_ms"].get<double>() + d["kv_transfer_ms"].get<double>(), 1e-9);
}

TEST(ServeCli, SearchMeetsTheTargetAndWritesHtml) {
  const std::string dir = ::testing::TempDir() + "/pm_serve_cli_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string html = dir + "/serve.html";
  const pt::CliRun r = pt::Pentamesh(kMeridian + "--output-tokens 2000 --ttft-p95 5000 --json " +
                                     "--top 3 --html " + html);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["top"].empty());
  for (const auto& e : j["top"]) EXPECT_LE(e["ttft_p95_ms"].get<double>(), 5000.0);
  const std::string page = pt::ReadFile(html);
  pt::ExpectSelfContained(page);
  const std::string chromium = pt::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  auto charts = pt::RenderedCharts(chromium, dir, html);
  for (const char* id : {"ttft", "itl"}) {
    ASSERT_TRUE(charts.contains(id)) << id;
    EXPECT_TRUE(charts[id].rendered) << id << ": " << charts[id].error;
    EXPECT_EQ(charts[id].x_ticks.size(), j["top"].size()) << id;
  }
}

// --emit of a capacity search whose disaggregated deployment is cheaper than #1 (the case study's
// 1K-token messages, docs/results.md): a script for each pool, each with its pool's layout and
// mode.
TEST(ServeCli, EmitsBothPoolsWhenDisaggregatedIsCheaper) {
  const std::string dir = ::testing::TempDir() + "/pm_serve_cli_disagg";
  std::filesystem::remove_all(dir);
  const pt::CliRun r = pt::Pentamesh(
      "serve --model meridianfin-72b --input-tokens 1000 --output-tokens 100 --rate 20 --slo-ttft "
      "500 --slo-itl 15 --sim-requests 200 --top 1 --json --emit sglang " +
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("disaggregated"));
  ASSERT_LT(j["disaggregated"]["usd_per_hour"].get<double>(),
            j["top"][0]["usd_per_hour"].get<double>());
  EXPECT_FALSE(std::filesystem::exists(dir + "/launch_sglang.sh"));
  for (const char* pool : {"prefill", "decode"}) {
    const std::string script = pt::ReadFile(dir + "/launch_sglang_" + std::string(pool) + ".sh");
    EXPECT_NE(script.find("--disaggregation-mode " + std::string(pool)), std::string::npos)
        << script;
    const std::string layout = j["disaggregated"][pool]["layout"].get<std::string>();
    EXPECT_NE(script.find(layout.substr(0, layout.find(" replicas"))), std::string::npos)
        << layout << "\n"
        << script;
  }
}

}  // namespace

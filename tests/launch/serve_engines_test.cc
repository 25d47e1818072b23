// launch/serve_engines against the engines' own flag tables (src/launch/data/vllm_flags_0.19.1.tsv,
// sglang_flags_0.5.23.tsv, read from the released packages by scripts/serving_engine_flags.py):
// every emitted flag is one the engine's parser registers, a value flag gets a value of its type
// (int, float, or one of its choices), a switch none; the script quotes every value and passes
// bash -n; `serve --emit` writes it.
#include "launch/serve_engines.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/quote.h"

namespace pentamesh::launch {
namespace {

struct FlagRow {
  std::string kind, type, choices;
};

std::map<std::string, FlagRow> LoadTable(const std::string& name) {
  std::ifstream in(std::string(PM_SOURCE_DIR) + "/src/launch/data/" + name);
  std::map<std::string, FlagRow> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string col;
    while (std::getline(ss, col, '\t')) cols.push_back(col);
    cols.resize(5);
    out[cols[0]] = {cols[1], cols[2], cols[4]};
  }
  return out;
}

bool HasType(const std::string& value, const std::string& type) {
  char* end = nullptr;
  if (type == "int") {
    std::strtoll(value.c_str(), &end, 10);
    return !value.empty() && *end == '\0';
  }
  if (type == "float") {
    std::strtod(value.c_str(), &end);
    return !value.empty() && *end == '\0';
  }
  return type == "str";
}

void CheckAgainstTable(ServeEngine engine, const std::map<std::string, FlagRow>& table,
                       const cost::ServeLayout& l, const cost::ServeWorkload& w, ServeRole role) {
  for (const auto& [flag, value] : ServeEngineFlags(engine, l, w, role)) {
    const auto it = table.find(flag);
    ASSERT_NE(it, table.end()) << ToString(engine) << " has no flag " << flag;
    const FlagRow& row = it->second;
    if (row.kind == "value") {
      EXPECT_FALSE(value.empty()) << flag << " takes a value";
      EXPECT_TRUE(HasType(value, row.type)) << flag << " " << value << " is not " << row.type;
      if (!row.choices.empty()) {
        EXPECT_NE(("|" + row.choices + "|").find("|" + value + "|"), std::string::npos)
            << flag << " " << value << " not in " << row.choices;
      }
    } else {
      EXPECT_TRUE(value.empty()) << flag << " is a switch";
    }
  }
}

TEST(ServeEngines, EveryFlagIsInTheEnginesTableWithItsType) {
  const auto vllm = LoadTable("vllm_flags_0.19.1.tsv");
  const auto sglang = LoadTable("sglang_flags_0.5.23.tsv");
  ASSERT_GT(vllm.size(), 150u);
  ASSERT_GT(sglang.size(), 300u);
  cost::ServeWorkload w;
  w.input_tokens = 1000;
  w.output_tokens = 500;
  for (const char* weights : {"bf16", "fp8", "fp4", "int8", "int4"}) {
    ASSERT_TRUE(cost::ParseServeWeights(weights, w));
    w.kv_fp8 = w.precision == spec::Precision::kFp8;
    w.prefix_hit_rate = w.kv_fp8 ? 0.5 : 0.0;
    for (const cost::ServeLayout& l :
         {cost::ServeLayout{.tp = 4},
          cost::ServeLayout{.tp = 8, .ep = 2, .pp = 2, .replicas = 3}}) {
      for (ServeRole role : {ServeRole::kColocated, ServeRole::kPrefill, ServeRole::kDecode}) {
        CheckAgainstTable(ServeEngine::kVllm, vllm, l, w, role);
        CheckAgainstTable(ServeEngine::kSglang, sglang, l, w, role);
      }
    }
  }
}

// A disaggregated deployment's pools: SGLang's mode and transfer backend, vLLM's NIXL connector on
// both; the header names the router; a colocated replica has none of them.
TEST(ServeEngines, DisaggregatedPools) {
  cost::ServeWorkload w;
  w.input_tokens = 1000;
  w.output_tokens = 500;
  const auto prefill = ServeEngineFlags(ServeEngine::kSglang, {.tp = 2}, w, ServeRole::kPrefill);
  const std::map<std::string, std::string> p(prefill.begin(), prefill.end());
  EXPECT_EQ(p.at("--disaggregation-mode"), "prefill");
  EXPECT_EQ(p.at("--disaggregation-transfer-backend"), "mooncake");
  const auto decode = ServeEngineFlags(ServeEngine::kSglang, {.tp = 2}, w, ServeRole::kDecode);
  const std::map<std::string, std::string> d(decode.begin(), decode.end());
  EXPECT_EQ(d.at("--disaggregation-mode"), "decode");
  const auto v = ServeEngineFlags(ServeEngine::kVllm, {.tp = 2}, w, ServeRole::kDecode);
  const std::map<std::string, std::string> m(v.begin(), v.end());
  EXPECT_NE(m.at("--kv-transfer-config").find("\"NixlConnector\""), std::string::npos);
  const std::string script =
      ServeLaunchScript(ServeEngine::kSglang, {.tp = 2}, w, {"t"}, ServeRole::kPrefill);
  EXPECT_NE(script.find("# The prefill pool of a prefill/decode disaggregated deployment"),
            std::string::npos);
  EXPECT_NE(script.find("sglang_router.launch_router --pd-disaggregation"), std::string::npos);
  const std::string colocated = ServeLaunchScript(ServeEngine::kSglang, {.tp = 2}, w, {"t"});
  EXPECT_EQ(colocated.find("disaggregat"), std::string::npos);
}

TEST(ServeEngines, ValuesOfTheLayout) {
  cost::ServeWorkload w;
  w.input_tokens = 1000;
  w.output_tokens = 500;
  w.engine.gpu_memory_utilization = 0.85;
  w.kv_fp8 = true;
  const auto f = ServeEngineFlags(ServeEngine::kVllm, {.tp = 2, .ep = 4}, w);
  const std::map<std::string, std::string> m(f.begin(), f.end());
  EXPECT_EQ(m.at("--tensor-parallel-size"), "2");
  EXPECT_EQ(m.at("--data-parallel-size"), "4");
  EXPECT_EQ(m.at("--max-model-len"), "1500");
  EXPECT_EQ(m.at("--gpu-memory-utilization"), "0.85");
  EXPECT_EQ(m.at("--kv-cache-dtype"), "fp8");
  const auto g = ServeEngineFlags(ServeEngine::kSglang, {.tp = 2, .ep = 4}, w);
  const std::map<std::string, std::string> n(g.begin(), g.end());
  EXPECT_EQ(n.at("--tp-size"), "8");
  EXPECT_EQ(n.at("--ep-size"), "8");
  EXPECT_EQ(n.at("--context-length"), "1500");
}

TEST(ServeEngines, ScriptQuotesEveryValueAndParses) {
  cost::ServeWorkload w;
  w.input_tokens = 100;
  w.output_tokens = 10;
  const std::string script =
      ServeLaunchScript(ServeEngine::kVllm, {.tp = 1}, w, {"title with $(rm -rf /) and\nnewline"});
  for (const auto& [flag, value] : ServeEngineFlags(ServeEngine::kVllm, {.tp = 1}, w)) {
    const std::string expect = value.empty() ? flag : flag + " " + core::ShellQuote(value);
    EXPECT_NE(script.find(expect), std::string::npos) << expect;
  }
  EXPECT_EQ(script.find("\nnewline"), std::string::npos);  // the header stays one comment line
  const std::string path = ::testing::TempDir() + "/pm_serve_engines_test.sh";
  std::ofstream(path) << script;
  EXPECT_EQ(std::system(("bash -n " + path).c_str()), 0);
  EXPECT_FALSE(ParseServeEngine("trtllm").ok());
  EXPECT_NE(ParseServeEngine("x").status().message().find("--emit"), std::string::npos);
}

// Weight-only int8 / int4: neither engine quantizes so at load time, so the script asks for no
// --quantization (the engine reads the checkpoint's) and says what MODEL must be.
TEST(ServeEngines, WeightOnlyScriptsNeedAQuantizedCheckpoint) {
  cost::ServeWorkload w;
  w.input_tokens = 100;
  w.output_tokens = 10;
  ASSERT_TRUE(cost::ParseServeWeights("int4", w));
  for (ServeEngine engine : {ServeEngine::kVllm, ServeEngine::kSglang}) {
    const std::string script = ServeLaunchScript(engine, {.tp = 2}, w, {"t"});
    EXPECT_EQ(script.find("--quantization"), std::string::npos) << ToString(engine);
    EXPECT_NE(script.find("# Weights int4 weight-only (W4A16): MODEL must be a checkpoint"),
              std::string::npos)
        << script;
  }
  // Prefix caching: vLLM's flag when a hit rate is planned; SGLang's radix cache is on by default.
  cost::ServeWorkload cached = w;
  cached.prefix_hit_rate = 0.5;
  EXPECT_NE(ServeLaunchScript(ServeEngine::kVllm, {.tp = 2}, cached, {"t"})
                .find("--enable-prefix-caching"),
            std::string::npos);
  EXPECT_EQ(ServeLaunchScript(ServeEngine::kVllm, {.tp = 2}, w, {"t"}).find("prefix-caching"),
            std::string::npos);
  EXPECT_EQ(ServeLaunchScript(ServeEngine::kSglang, {.tp = 2}, cached, {"t"}).find("radix"),
            std::string::npos);
  // NVFP4: from a ModelOpt checkpoint too, no flag.
  ASSERT_TRUE(cost::ParseServeWeights("fp4", w));
  for (ServeEngine engine : {ServeEngine::kVllm, ServeEngine::kSglang}) {
    const std::string script = ServeLaunchScript(engine, {.tp = 2}, w, {"t"});
    EXPECT_EQ(script.find("--quantization"), std::string::npos) << ToString(engine);
    EXPECT_NE(script.find("# Weights fp4 (NVFP4, FP4 GEMMs): MODEL must be an NVFP4 checkpoint"),
              std::string::npos)
        << script;
  }
  ASSERT_TRUE(cost::ParseServeWeights("fp8", w));
  EXPECT_NE(ServeLaunchScript(ServeEngine::kVllm, {.tp = 2}, w, {"t"})
                .find("--quantization " + core::ShellQuote("fp8")),
            std::string::npos);
}

}  // namespace
}  // namespace pentamesh::launch

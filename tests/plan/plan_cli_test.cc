// `pentamesh plan / scale / sweep` end to end: exit codes, JSON, and the messages of impossible
// requests. Runs the real binary (PENTAMESH_BIN).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "spec/layout.h"

namespace {

namespace spec = pentamesh::spec;

struct CliRun {
  int code = -1;
  std::string out;  // stdout + stderr
};

CliRun Pentamesh(const std::string& args, bool merge_stderr = true) {
  const std::string cmd =
      std::string(PENTAMESH_BIN) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) run.out.append(buf.data(), n);
  const int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PlanCli, JsonTopAndCounts) {
  const CliRun r = Pentamesh(
      "plan --model llama3-8b --cluster h100-sxm --gpus 64 --train pretrain-4k --top 3 --json "
      "--pareto --baseline fsdp",
      /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["top"].size(), 3u);
  EXPECT_TRUE(j["top"][0]["fits"].get<bool>());
  EXPECT_EQ(j["gpus"], 64);
  for (const char* key : {"layout", "fits", "violations", "memory", "time", "mfu", "hfu",
                          "tokens_per_s", "days", "cost_usd"}) {
    EXPECT_TRUE(j["top"][0].contains(key)) << key;
  }
  const auto& c = j["counts"];
  EXPECT_EQ(c["space"].get<int64_t>(), c["evaluated"].get<int64_t>() + c["pruned"].get<int64_t>());
  EXPECT_GE(j["top"][0]["tokens_per_s"].get<double>(), j["top"][1]["tokens_per_s"].get<double>());
  EXPECT_FALSE(j["pareto"].empty());
  EXPECT_EQ(j["baseline"]["fsdp"]["layout"]["dp"], 64);
}

// The JSON layout has every field of spec::LayoutFields() (etp as the expert TP degree in effect),
// and its values are the layout its text parses to.
TEST(PlanCli, JsonLayoutHasEveryField) {
  const CliRun r = Pentamesh(
      "estimate --model mixtral-8x7b --cluster h100-sxm --train pretrain-4k --gpus 16 --layout "
      "'dp=8 tp=2 ep=8 etp=1 ep_placement=folded zero=1' --json",
      /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto layout = nlohmann::json::parse(r.out)["layout"];
  auto parsed = spec::ParseLayout(layout["text"].get<std::string>());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  for (const spec::LayoutFieldInfo& f : spec::LayoutFields()) {
    ASSERT_TRUE(layout.contains(f.key)) << f.key << " missing from " << layout.dump();
    const int64_t want = spec::FieldValue(*parsed, f.field);
    if (f.field == spec::LayoutField::kSp) {
      EXPECT_EQ(layout[f.key].get<bool>(), want != 0);
    } else if (f.field == spec::LayoutField::kRecomputeModules) {
      EXPECT_EQ(layout[f.key].get<std::string>(),
                spec::RecomputeModulesText(static_cast<uint32_t>(want)));
    } else if (!f.words.empty()) {
      EXPECT_EQ(layout[f.key].get<std::string>(), spec::FieldWordFor(f.field, want)) << f.key;
    } else {
      EXPECT_EQ(layout[f.key].get<int64_t>(), want) << f.key;
    }
  }
  EXPECT_EQ(layout["etp"].get<int64_t>(), 1);
  EXPECT_EQ(layout.size(), spec::LayoutFields().size() + 1);  // + "text"
}

TEST(PlanCli, TextOutput) {
  const CliRun r = Pentamesh(
      "plan --model llama3-8b --cluster h100-sxm --gpus 16 --train pretrain-4k --top 2 "
      "--allow 'tp<=4'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "best: dp=")) << r.out;
  EXPECT_TRUE(Has(r.out, "tokens/s")) << r.out;
  EXPECT_FALSE(Has(r.out, "tp=8 ")) << r.out;
}

TEST(PlanCli, ZeroGpusIsAnError) {
  const CliRun r = Pentamesh("plan --model llama3-8b --gpus 0 --train pretrain-4k");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "--gpus: must be >= 1 (got 0)")) << r.out;
}

TEST(PlanCli, ModelThatCannotFitNamesTheNearestMiss) {
  const CliRun r =
      Pentamesh("plan --model llama3-405b --cluster a100-80gb --gpus 8 --train pretrain-4k");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.out, "no layout fits")) << r.out;
  EXPECT_TRUE(Has(r.out, "nearest miss")) << r.out;
  EXPECT_TRUE(Has(r.out, "GB over")) << r.out;
  const CliRun j = Pentamesh(
      "plan --model llama3-405b --cluster a100-80gb --gpus 8 --train pretrain-4k --json", false);
  EXPECT_NE(j.code, 0);
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_FALSE(json["fits"].get<bool>());
  EXPECT_GT(json["nearest_miss"]["memory"]["total"].get<double>(),
            json["nearest_miss"]["memory"]["capacity"].get<double>());
}

TEST(PlanCli, BatchNoLayoutMeetsNamesTheRule) {
  const std::string path = ::testing::TempDir() + "/odd_batch.toml";
  std::ofstream(path) << "[train]\nname = \"odd\"\nseq_len = 100\nglobal_batch_tokens = 100\n"
                         "total_tokens = 1e9\nusd_per_gpu_hour = 2\n";
  const CliRun r = Pentamesh("plan --model llama3-8b --gpus 1024 --train " + path + " --json");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.out, "structural rules")) << r.out;
  EXPECT_TRUE(Has(r.out, "nearest miss")) << r.out;
  EXPECT_TRUE(Has(r.out, "global batch of 1 sequences must be divisible")) << r.out;
  EXPECT_TRUE(Has(r.out, "rules broken most often")) << r.out;
}

TEST(PlanCli, BadOptions) {
  CliRun r = Pentamesh("plan --model llama3-8b --gpus 8 --train pretrain-4k --allow 'tq<=2'");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.out, "--allow: clause 'tq<=2': unknown key")) << r.out;
  r = Pentamesh("plan --model llama3-8b --gpus 8 --train pretrain-4k --baseline ddp");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.out, "--baseline: 'ddp'")) << r.out;
  r = Pentamesh("plan --model llama3-8b --gpus 8 --train pretrain-4k --allow 'tp>=16'");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.out, "excludes all")) << r.out;
  r = Pentamesh("plan --model no-such-model --gpus 8 --train pretrain-4k");
  EXPECT_NE(r.code, 0);
  r = Pentamesh("scale --model llama3-8b --train pretrain-4k --gpus-list 8,x");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(Has(r.out, "--gpus-list: 'x'")) << r.out;
}

// plan --recipe: JSON per part with the three MFU conventions; the bad inputs exit 2 naming the
// phase and key, or the flag.
TEST(PlanCli, RecipeJsonAndErrors) {
  const std::string path = std::string(::testing::TempDir()) + "/recipe_cli.toml";
  const std::string good = R"([recipe]
name = "two"
usd_per_gpu_hour = 2
[[recipe.phase]]
name = "8k"
tokens = 1e11
seq_len = 8192
global_batch_tokens = 2097152
[[recipe.phase]]
name = "32k"
tokens = 1e10
seq_len = 32768
global_batch_tokens = 2097152
rope = { kind = "base", theta = 4e6 }
)";
  std::ofstream(path) << good;
  CliRun r =
      Pentamesh("plan --model llama3-8b --gpus 16 --mbs-max 1 --recipe " + path + " --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["parts"].size(), 2u);
  EXPECT_EQ(j["parts"][1]["seq_len"], 32768);
  EXPECT_EQ(j["parts"][1]["rope"]["kind"], "base");
  const nlohmann::json& mfu = j["parts"][1]["mfu"];
  // At 32K attention adds FLOPs: 6N < causal < full.
  EXPECT_LT(mfu["6n"].get<double>(), mfu["causal_attention"].get<double>());
  EXPECT_LT(mfu["causal_attention"].get<double>(), mfu["full_attention"].get<double>());
  EXPECT_TRUE(j["better"] == "per-phase" || j["better"] == "single");
  r = Pentamesh("plan --model llama3-8b --gpus 16 --mbs-max 1 --recipe " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "MFU conventions: 6N")) << r.out;
  EXPECT_TRUE(Has(r.out, "per-phase layouts:")) << r.out;

  std::ofstream(path) << good << "lr = 1\n";
  r = Pentamesh("plan --model llama3-8b --gpus 16 --recipe " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "recipe.phase[2].lr: unknown key")) << r.out;
  r = Pentamesh("plan --model llama3-8b --gpus 16 --recipe llama3-405b --train pretrain-4k");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "--recipe and --train")) << r.out;
  r = Pentamesh("plan --model llama3-8b --gpus 16 --recipe llama3-405b --pareto");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "--pareto is not supported with --recipe")) << r.out;
  r = Pentamesh("plan --model llama3-8b --gpus 16");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "give --train (one run) or --recipe (phases)")) << r.out;
  r = Pentamesh("plan --model llama3-8b --gpus 16 --recipe nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "unknown recipe preset 'nope'")) << r.out;
}

TEST(ScaleCli, JsonPoints) {
  const CliRun r = Pentamesh(
      "scale --model llama3-8b --cluster h100-sxm --train pretrain-4k --gpus-list 8,16,32 --json",
      false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_DOUBLE_EQ(j["points"][0]["efficiency"].get<double>(), 1.0);
  EXPECT_EQ(j["points"][2]["best"]["layout"]["dp"].get<int64_t>() *
                j["points"][2]["best"]["layout"]["tp"].get<int64_t>() *
                j["points"][2]["best"]["layout"]["pp"].get<int64_t>() *
                j["points"][2]["best"]["layout"]["cp"].get<int64_t>(),
            32);
}

TEST(SweepCli, Grid) {
  const CliRun r = Pentamesh("sweep --models llama2-7b,llama2-13b --nodes 1,2 --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["cells"].size(), 4u);
  EXPECT_EQ(j["global_batch_tokens"], 1048576);
  EXPECT_EQ(j["cells"][3]["model"], "llama2-13b");
  EXPECT_EQ(j["cells"][3]["nodes"], 2);
}

}  // namespace

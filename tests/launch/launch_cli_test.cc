// `pentamesh plan|estimate --emit`, `plan --engine`, `plan --baseline FILE` and `import-config`
// end to end: exit codes, files written, JSON, and the messages of bad requests. Runs the real
// binary (PENTAMESH_BIN).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out;
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

fs::path Dir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / ("pentamesh_launch_cli_" + name);
  fs::remove_all(d);
  return d;
}

TEST(LaunchCli, PlanEmitsTheBestLayoutTheEngineRuns) {
  const fs::path out = Dir("plan");
  const CliRun r = Pentamesh(
      "plan --model llama3-70b --train pretrain-4k --gpus 512 --top 1 "
      "--json --emit torchtitan --out " +
          out.string(),
      /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const std::string best = j["top"][0]["layout"]["text"];
  for (const char* f : {"job.toml", "overrides.txt", "sbatch.sh"}) {
    ASSERT_TRUE(fs::exists(out / f)) << f;
  }
  std::ifstream in(out / "job.toml");
  const std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(Has(toml, "# layout: " + best)) << toml.substr(0, 600);
  EXPECT_TRUE(Has(toml, "--emit torchtitan")) << "the command is in the header";
  // import-config reads back the layout the plan chose.
  const CliRun back = Pentamesh("import-config " + (out / "job.toml").string() + " --json",
                                /*merge_stderr=*/false);
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_EQ(nlohmann::json::parse(back.out)["estimate"]["layout"]["text"], best);
}

TEST(LaunchCli, RefusalsAndBadInputExitTwo) {
  const fs::path out = Dir("bad");
  CliRun r = Pentamesh(
      "estimate --model llama3-405b --train llama3-405b-8k --cluster h100-sxm --gpus 16384 "
      "--layout 'dp=128 tp=8 pp=16 zero=3' --emit deepspeed --out " +
      out.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "rule ds-pp-zero01")) << r.out;
  EXPECT_FALSE(fs::exists(out / "ds_config.json"));
  r = Pentamesh("plan --model llama3-8b --train pretrain-4k --gpus 64 --engine jax");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "'jax' is not a known engine")) << r.out;
  r = Pentamesh("plan --model llama3-8b --train pretrain-4k --gpus 64 --emit megatron");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "--emit needs --out")) << r.out;
  fs::create_directories(out);
  {
    std::ofstream bad(out / "job.toml");
    bad << "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = -4\n";
  }
  r = Pentamesh("import-config " + (out / "job.toml").string() + " --gpus 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "line 5: training.local_batch_size = -4 must be positive")) << r.out;
  r = Pentamesh("import-config " + (out / "missing.sh").string());
  EXPECT_EQ(r.code, 2);
}

TEST(LaunchCli, PlanBaselineFileComparesWithTheBest) {
  const fs::path out = Dir("baseline");
  CliRun r = Pentamesh(
      "estimate --model llama3-70b --train pretrain-4k --cluster h100-sxm --gpus 512 "
      "--layout 'dp=64 tp=8 zero=3 recompute=full' --emit megatron --out " +
      out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  r = Pentamesh(
      "plan --model llama3-70b --train pretrain-4k --gpus 512 --engine megatron --json "
      "--baseline " +
          (out / "train.sh").string(),
      /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["baseline_file"]["layout"]["text"],
            "dp=64 tp=8 pp=1 cp=1 ep=1 zero=3 mbs=1 recompute=full schedule=1f1b cp_kind=ring "
            "ep_placement=separate sp=on");
  EXPECT_GE(j["top"][0]["tokens_per_s"].get<double>(),
            j["baseline_file"]["tokens_per_s"].get<double>());
  // A baseline for another batch is not compared like for like: refused.
  r = Pentamesh("plan --model llama3-70b --train llama3-405b-8k --gpus 512 --baseline " +
                (out / "train.sh").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "differ from --train")) << r.out;
  // Nor one of another model.
  r = Pentamesh("plan --model llama2-70b --train pretrain-4k --gpus 512 --baseline " +
                (out / "train.sh").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Has(r.out, "is not --model llama2-70b")) << r.out;
}

}  // namespace

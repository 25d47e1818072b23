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

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// plan --emit E chooses and costs with E's stack profile (no --stack given), the header says which
// and why, and import-config of the emitted file (costed with the engine's profile) gives the
// plan's memory, fit and tokens/s. With --stack given, the header names it and import-config
// agrees only when told the same --stack.
TEST(LaunchCli, EmitCostsWithTheEngineStackAndImportAgrees) {
  struct EngineFile {
    const char* engine;
    const char* file;
  };
  for (const EngineFile& ef :
       {EngineFile{"torchtitan", "job.toml"}, EngineFile{"deepspeed", "launch.sh"},
        EngineFile{"megatron", "train.sh"}}) {
    const std::string engine = ef.engine;
    const fs::path out = Dir("stack_" + engine);
    const CliRun r = Pentamesh(
        "plan --model llama3-405b --train llama3-405b-8k --gpus 16384 --top 1 --json --emit " +
            engine + " --out " + out.string(),
        /*merge_stderr=*/false);
    ASSERT_EQ(r.code, 0) << engine << ": " << r.out;
    const auto plan = nlohmann::json::parse(r.out);
    EXPECT_EQ(plan["stack"], engine);
    const auto& best = plan["top"][0];
    const std::string header = ReadText(out / ef.file);
    EXPECT_TRUE(Has(header, "cost stack profile: " + engine + ", " + engine +
                                "'s own profile (no --stack given)"))
        << header.substr(0, 400);
    const CliRun back = Pentamesh("import-config " + (out / ef.file).string() + " --json",
                                  /*merge_stderr=*/false);
    ASSERT_EQ(back.code, 0) << back.out;
    const auto im = nlohmann::json::parse(back.out);
    EXPECT_EQ(im["stack"], engine);
    EXPECT_EQ(im["estimate"]["layout"]["text"], best["layout"]["text"]) << engine;
    EXPECT_DOUBLE_EQ(im["estimate"]["memory"]["total"].get<double>(),
                     best["memory"]["total"].get<double>())
        << engine;
    EXPECT_EQ(im["estimate"]["fits"], best["fits"]) << engine;
    EXPECT_DOUBLE_EQ(im["estimate"]["tokens_per_s"].get<double>(),
                     best["tokens_per_s"].get<double>())
        << engine;
  }
  // --stack given: the plan is chosen and costed with it, and the header says so.
  const fs::path out = Dir("stack_given");
  const CliRun r = Pentamesh(
      "plan --model llama3-405b --train llama3-405b-8k --gpus 16384 --top 1 --json --stack "
      "megatron --emit torchtitan --out " +
          out.string(),
      /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["stack"], "megatron");
  const std::string header = ReadText(out / "job.toml");
  EXPECT_TRUE(Has(header,
                  "cost stack profile: megatron, --stack megatron (import-config ... "
                  "--stack megatron costs it the same way)"))
      << header.substr(0, 400);
  const std::string file = (out / "job.toml").string();
  const auto same = nlohmann::json::parse(
      Pentamesh("import-config " + file + " --json --stack megatron", false).out);
  EXPECT_DOUBLE_EQ(same["estimate"]["memory"]["total"].get<double>(),
                   plan["top"][0]["memory"]["total"].get<double>());
  const auto own = nlohmann::json::parse(Pentamesh("import-config " + file + " --json", false).out);
  EXPECT_EQ(own["stack"], "torchtitan");
  EXPECT_NE(own["estimate"]["memory"]["total"].get<double>(),
            plan["top"][0]["memory"]["total"].get<double>())
      << "the profiles differ, so the default import must not agree by accident";
}

// import-config names a flag Megatron-LM's parser lacks (exit 2); --allow-unknown imports without
// it and warns, listing it.
TEST(LaunchCli, ImportNamesUnknownFlags) {
  const fs::path out = Dir("unknown");
  fs::create_directories(out);
  {
    std::ofstream f(out / "train.sh");
    f << "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 \\\n"
         "  --num-attention-heads 8 --vocab-size 1024 --seq-length 1024 --micro-batch-size 1 \\\n"
         "  --tensor-model-paralel-size 8 --global-batch-size 16\n";
  }
  const std::string file = (out / "train.sh").string();
  CliRun r = Pentamesh("import-config " + file + " --gpus 16");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "line 3: --tensor-model-paralel-size (did you mean "
                  "--tensor-model-parallel-size?)"))
      << r.out;
  r = Pentamesh("import-config " + file + " --gpus 16 --allow-unknown");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "pentamesh: warning: ")) << r.out;
  EXPECT_TRUE(Has(r.out,
                  "ignored, not in Megatron-LM's parser (core_v0.16.1): line 3: "
                  "--tensor-model-paralel-size"))
      << r.out;
  EXPECT_TRUE(Has(r.out, "--layout \"dp=16 tp=1 ")) << r.out;
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

// --shell: the default (auto) runs the script under bash where the host sandboxes it and reads
// the `$((...))` pipeline size; builtin keeps it as text and exits 2 naming the line; an unknown
// reader is refused naming the option.
TEST(LaunchCli, ImportShellChoosesTheReader) {
  const std::string file =
      (fs::path(PM_SOURCE_DIR) / "tests" / "launch" / "data" / "arrays_if_arith.sh").string();
  const CliRun builtin = Pentamesh("import-config --shell builtin " + file);
  EXPECT_EQ(builtin.code, 2) << builtin.out;
  EXPECT_TRUE(
      Has(builtin.out, "line 14: --pipeline-model-parallel-size '$((WORLD_SIZE / TP / 2))'"))
      << builtin.out;
  const CliRun bad = Pentamesh("import-config --shell zsh " + file);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_TRUE(Has(bad.out, "--shell: 'zsh' is not auto, bash or builtin")) << bad.out;
  const CliRun bash = Pentamesh("import-config --json " + file, /*merge_stderr=*/false);
  if (!Has(bash.out, "evaluated with bash in a sandbox (no network, read-only")) {
    GTEST_SKIP() << "no read-only sandbox on this host: " << bash.out;
  }
  ASSERT_EQ(bash.code, 0) << bash.out;
  const auto j = nlohmann::json::parse(bash.out);
  EXPECT_EQ(j["estimate"]["layout"]["pp"], 2);
  EXPECT_EQ(j["gpus"], 8);
}

}  // namespace

// Issue 31, item 3: hostile names and paths through every launch emitter. For each engine, model
// names, GPU names, command lines and --stack paths with quotes, $(), backticks, newlines, globs,
// leading dashes and unicode are emitted; every script passes `bash -n`, job.toml and
// ds_config.json read back to the same strings, and the scripts run under bash with the
// launchers replaced by printing stand-ins (PATH of the run only; the emitted files are
// unchanged) from a hostile submit directory with hostile CHECKPOINT_DIR, checkout and data
// paths: each value reaches the launcher as one literal argument and nothing else runs.
#include <gtest/gtest.h>

#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/quote.h"
#include "launch/internal.h"
#include "launch/launch.h"
#include "spec/load_toml.h"
#include "testing/hostile.h"

namespace pentamesh::launch {
namespace {

namespace fs = std::filesystem;
using namespace internal;  // NOLINT: the emitters under test
using testing::RunBash;
using testing::SplitNul;

void WriteText(const fs::path& path, const std::string& text, bool executable) {
  std::ofstream(path, std::ios::binary) << text;
  if (executable) fs::permissions(path, fs::perms::owner_all, fs::perm_options::replace);
}

// The printing stand-ins: python and torchrun write their working directory and arguments
// NUL-separated to $PM_ARGV_OUT; srun drops its options and runs its command as task 0;
// scontrol names one host.
std::string MakeStubs(const std::string& dir) {
  const fs::path bin = fs::path(dir) / "bin";
  fs::create_directories(bin);
  const std::string print = "#!/bin/bash\nprintf '%s\\0' \"$PWD\" \"$@\" > \"$PM_ARGV_OUT\"\n";
  WriteText(bin / "python", print, true);
  WriteText(bin / "torchrun", print, true);
  WriteText(bin / "srun",
            "#!/bin/bash\nwhile [[ $# -gt 0 && $1 == --* ]]; do shift; done\n"
            "export SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1\nexec \"$@\"\n",
            true);
  WriteText(bin / "scontrol", "#!/bin/bash\necho node1\n", true);
  return bin.string();
}

struct Case {
  Engine engine;
  const char* model;
  int64_t gpus;
  const char* layout;
};
constexpr Case kCases[] = {
    {Engine::kMegatron, "mixtral-8x7b", 64, "dp=8 tp=8 ep=8 ep_placement=folded zero=1"},
    {Engine::kTorchtitan, "llama3-8b", 16, "dp=2 tp=8 zero=3"},
    {Engine::kDeepSpeed, "mixtral-8x7b", 64, "dp=8 tp=8 ep=8 ep_placement=folded zero=1"},
};

std::vector<std::string> Concat(std::initializer_list<Flags> lists, const std::string& ckpt) {
  std::vector<std::string> out;
  for (const Flags& flags : lists) {
    for (const auto& [flag, value] : flags) {
      out.push_back(flag);
      if (value == kCheckpointDirRef) {
        out.push_back(ckpt);
      } else if (!value.empty()) {
        out.push_back(value);
      }
    }
  }
  return out;
}

// Keys of a TOML document, counting into tables.
size_t LeafCount(const toml::table& t) {
  size_t n = 0;
  for (const auto& [k, v] : t) n += v.is_table() ? LeafCount(*v.as_table()) : 1;
  return n;
}

// The value after `flag` in argv ("" when absent).
std::string After(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag) return argv[i + 1];
  }
  return "";
}

TEST(EmitQuoting, HostileNamesAndPathsArriveAsOneLiteralArgument) {
  const std::string base = testing::MakeTempDir("emit_quote");
  const std::string canary = base + "/PWNED";
  const std::vector<std::string> hostile = testing::HostileStrings(canary);
  const std::string bin = MakeStubs(base);
  const std::string argv_out = base + "/argv";
  // A submit directory whose name is itself hostile (no '/', the one byte a name cannot hold).
  const fs::path submit =
      fs::path(base) / "sub $(touch INJ) `touch INJ` ;touch INJ;'\"*?[a] -rf\n\u2713";
  fs::create_directories(submit);
  int runs = 0;
  for (const Case& c : kCases) {
    auto model = spec::LoadModel(c.model);
    auto cluster = spec::LoadCluster("h100-sxm", c.gpus);
    auto train = spec::LoadTrain("pretrain-4k");
    auto layout = spec::ParseLayout(c.layout);
    ASSERT_TRUE(model.ok() && cluster.ok() && train.ok() && layout.ok()) << c.layout;
    size_t plain_keys = 0;  // job.toml's keys for a plain custom name
    if (c.engine == Engine::kTorchtitan) {
      spec::ModelSpec plain = *model;
      plain.name = "plain";
      auto files = Emit(c.engine, EmitInput{.model = plain,
                                            .cluster = *cluster,
                                            .train = *train,
                                            .layout = *layout,
                                            .estimate = {},
                                            .command = "pentamesh"});
      ASSERT_TRUE(files.ok()) << files.status().message();
      for (const File& f : *files) {
        if (f.name == "job.toml") plain_keys = LeafCount(toml::parse(f.text));
      }
      ASSERT_GT(plain_keys, 10u);
    }
    for (size_t i = 0; i < hostile.size(); ++i) {
      const std::string& h = hostile[i];
      const std::string where =
          fmt::format("{} #{} {}", ToString(c.engine), i, core::CommentText(h));
      EmitInput in{.model = *model,
                   .cluster = *cluster,
                   .train = *train,
                   .layout = *layout,
                   .estimate = {},
                   .command = "pentamesh plan --model " + core::ShellQuote(h),
                   .stack = {h, "--stack " + h}};
      in.model.name = h;
      in.cluster.gpu = h;
      auto files = Emit(c.engine, in);
      ASSERT_TRUE(files.ok()) << where << ": " << files.status().message();
      fs::remove_all(submit);
      ASSERT_TRUE(WriteFiles(submit.string(), *files).ok()) << where;
      std::map<std::string, std::string> text;
      for (const File& f : *files) text[f.name] = f.text;

      // Every script parses; the TOML and JSON read back with the name intact.
      for (const File& f : *files) {
        if (f.name.ends_with(".sh")) {
          const auto n = RunBash({"-n", (submit / f.name).string()}, {"PATH=/usr/bin:/bin"}, base);
          EXPECT_EQ(n.exit_code, 0) << where << " " << f.name << ": " << n.output;
        }
      }
      if (c.engine == Engine::kTorchtitan) {
        toml::table job;
        try {
          job = toml::parse(text["job.toml"]);
        } catch (const toml::parse_error& e) {
          FAIL() << where << ": " << e.description();
        }
        // A name that is not UTF-8 cannot be a TOML string: its bad bytes read back as U+FFFD.
        const std::string want =
            h == testing::kInvalidUtf8 ? "\uFFFD\uFFFD invalid utf-8 \uFFFD" : h;
        EXPECT_EQ(job["model"]["flavor"].value<std::string>(), std::optional<std::string>(want))
            << where;
        EXPECT_EQ(
            job["job"]["description"].value<std::string>(),
            std::optional<std::string>("pentamesh: " + want + " " + spec::ShortLayout(in.layout)))
            << where;
        EXPECT_EQ(LeafCount(job), plain_keys) << where;  // no key or table injected
      }
      if (c.engine == Engine::kDeepSpeed) {
        const auto j = nlohmann::json::parse(text["ds_config.json"], nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << where;
        EXPECT_EQ(j["_pentamesh"].size(), 6u) << where;  // the header's lines, none split
      }

      // Run: sbatch.sh from the hostile submit directory, with hostile paths in the environment
      // and hostile extra arguments for the script itself.
      const std::string ckpt = h.empty() ? "ckpt" : h;
      const std::string checkout = h.empty() ? "." : h;  // ${MEGATRON_LM:-.}
      std::vector<std::string> env = {
          "PATH=" + bin + ":/usr/bin:/bin", "HOME=" + base,
          "PM_ARGV_OUT=" + argv_out,        "SLURM_SUBMIT_DIR=" + submit.string(),
          "SLURM_JOB_NODELIST=node1",       "SLURM_NNODES=1",
          "SLURM_CPUS_ON_NODE=1",           "SLURM_NODEID=0",
          "CHECKPOINT_DIR=" + ckpt,         "MEGATRON_LM=" + h,
          "MEGATRON_DEEPSPEED=" + h,        "DATA_PATH=" + ckpt};
      fs::remove(argv_out);
      const auto sb = RunBash({(submit / "sbatch.sh").string()}, env, base);
      ++runs;
      ASSERT_EQ(sb.exit_code, 0) << where << ": " << sb.output;
      std::vector<std::string> argv = SplitNul(testing::ReadFile(argv_out));
      ASSERT_FALSE(argv.empty()) << where;
      EXPECT_EQ(argv[0], submit.string()) << where;  // the launcher ran in the submit directory
      argv.erase(argv.begin());
      const spec::TrainSpec& t = in.train;
      switch (c.engine) {
        case Engine::kMegatron: {
          std::vector<std::string> want = {checkout + "/pretrain_gpt.py"};
          for (const auto& a : Concat({MegatronModelFlags(in.model, t, false),
                                       MegatronParallelFlags(in.model, t, in.layout, false),
                                       TrainingLoopFlags(t, false)},
                                      ckpt)) {
            want.push_back(a);
          }
          EXPECT_EQ(argv, want) << where;
          // The script alone, with hostile extra arguments: each passed through as it is.
          fs::remove(argv_out);
          const auto direct =
              RunBash({(submit / "train.sh").string(), h, "--x", h + h}, env, submit.string());
          ASSERT_EQ(direct.exit_code, 0) << where << ": " << direct.output;
          std::vector<std::string> got = SplitNul(testing::ReadFile(argv_out));
          ASSERT_GE(got.size(), 4u) << where;
          EXPECT_EQ(std::vector<std::string>(got.end() - 3, got.end()),
                    (std::vector<std::string>{h, "--x", h + h}))
              << where;
          break;
        }
        case Engine::kDeepSpeed:
          ASSERT_FALSE(argv.empty()) << where;
          EXPECT_EQ(argv[0], checkout + "/pretrain_gpt.py") << where;
          EXPECT_EQ(After(argv, "--save"), ckpt) << where;
          EXPECT_EQ(After(argv, "--load"), ckpt) << where;
          EXPECT_EQ(After(argv, "--data-path"), ckpt) << where;
          EXPECT_EQ(After(argv, "--deepspeed_config"), "ds_config.json") << where;
          break;
        case Engine::kTorchtitan:
          EXPECT_EQ(argv, (std::vector<std::string>{
                              "--nnodes=1", fmt::format("--nproc_per_node={}", GpusPerNode(in)),
                              "--node_rank=0", "--rdzv_backend=c10d", "--rdzv_endpoint=node1:29500",
                              "-m", "torchtitan.train", "--job.config_file", "job.toml"}))
              << where;
          break;
      }
      ASSERT_FALSE(fs::exists(canary)) << where;
      for (const auto& e : fs::recursive_directory_iterator(base)) {
        const std::string name = e.path().filename().string();
        ASSERT_TRUE(name.find("PWNED") == std::string::npos && name != "INJ")
            << where << ": " << e.path();
      }
    }
  }
  EXPECT_EQ(runs, 3 * static_cast<int>(hostile.size()));
}

// FlagArray, the one place launch scripts put values into words: any value (the hostile set)
// reads back through bash as the one literal word after its flag; kCheckpointDirRef expands.
TEST(EmitQuoting, FlagArrayValuesAreLiteralWords) {
  const std::string base = testing::MakeTempDir("flag_array");
  const std::string canary = base + "/PWNED";
  const std::vector<std::string> hostile = testing::HostileStrings(canary);
  Flags flags;
  for (const auto& h : hostile) {
    if (h.empty()) continue;  // "" is a switch
    flags.push_back({"--v", h});
    flags.push_back({"--switch", ""});
  }
  flags.push_back({"--save", kCheckpointDirRef});
  const std::string ckpt = hostile[10];
  const fs::path script = fs::path(base) / "flags.sh";
  WriteText(script,
            "CHECKPOINT_DIR=" + core::ShellQuote(ckpt) + "\n" + FlagArray("ARGS", flags) +
                "printf '%s\\0' \"${ARGS[@]}\"\n",
            false);
  const auto run = RunBash({script.string()}, {"PATH=/usr/bin:/bin"}, base);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(SplitNul(run.output), Concat({flags}, ckpt));
  EXPECT_FALSE(fs::exists(canary));
}

}  // namespace
}  // namespace pentamesh::launch

// Fault tests on the real `pentamesh train` binary: a straight run vs one killed with SIGKILL
// mid-run (an async save possibly in flight) and relaunched by scripts/relaunch.sh with
// --resume auto (the last step's loss is bitwise the same); injected NaN gradients stop the run
// with the last good checkpoint named, and the resumed run finishes; a flipped byte in the newest
// checkpoint is reported by file name and the run falls back to the previous checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/fixtures.h"

namespace pentamesh::ckpt {
namespace {

struct CliRun {
  int exit_code;
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun Shell(const std::string& cmd) {
  const std::string dir = data::testing::MakeTempDir("ckpt_cli");
  const int status = std::system((cmd + " >" + dir + "/out 2>" + dir + "/err").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(dir + "/out"), Slurp(dir + "/err")};
}

// A run directory with run.toml (8 steps, a checkpoint every 2, synchronous saves off).
std::string WriteRun(const std::string& tag) {
  const std::string dir = data::testing::MakeTempDir(tag);
  std::ofstream(dir + "/run.toml") << fmt::format(R"(
[model]
name = "t"
layers = 2
hidden = 32
heads = 4
kv_heads = 2
ffn_hidden = 64
vocab = 512
max_seq_len = 32
[train]
seq_len = 32
global_batch_seqs = 4
precision = "fp32"
total_tokens = 1024
[optim]
lr = 1e-2
min_lr = 1e-3
warmup_steps = 2
[data]
dataset = "{}"
[run]
seed = 7
layout = "mbs=2"
threads = 1
eval_every = 0
eval_batches = 1
out_dir = "{}/out"
[ckpt]
dir = "{}/ckpt"
interval = 2
keep = 3
)",
                                                  data::testing::Corpus().dataset, dir, dir);
  return dir;
}

std::string Train(const std::string& dir, const std::string& extra = "") {
  return fmt::format("{} train --config {}/run.toml {}", PM_BINARY, dir, extra);
}

nlohmann::json LastMetrics(const std::string& dir) {
  std::ifstream in(dir + "/out/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return nlohmann::json::parse(last);
}

TEST(CkptCli, KilledRunRelaunchedMatchesStraightRun) {
  const std::string straight = WriteRun("ckpt_straight");
  const CliRun a = Shell(Train(straight));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string crashed = WriteRun("ckpt_crashed");
  // The first attempt SIGKILLs itself after step 5; the relaunch resumes from step 4 (or 2).
  const CliRun b = Shell(fmt::format("{}/scripts/relaunch.sh --retries 2 -- {}", PM_SOURCE_DIR,
                                     Train(crashed, "--resume auto --set run.debug_kill_step=5")));
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.err.find("SIGKILL after step 5"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("relaunch: attempt 2"), std::string::npos) << b.err;
  EXPECT_NE(b.out.find("resumed from"), std::string::npos) << b.out;
  const nlohmann::json la = LastMetrics(straight), lb = LastMetrics(crashed);
  EXPECT_EQ(la["step"], 8);
  EXPECT_EQ(lb["step"], 8);
  EXPECT_EQ(la["loss"].get<double>(), lb["loss"].get<double>());
}

TEST(CkptCli, NonFiniteStopsThenResumeFinishes) {
  const std::string dir = WriteRun("ckpt_nan");
  const CliRun a = Shell(Train(
      dir,
      "--set run.debug_nan_step=4 --set run.debug_nan_count=100 --set run.max_nonfinite_in_row=2"));
  EXPECT_EQ(a.exit_code, 3) << a.err;
  EXPECT_NE(a.err.find("step 4 skipped: non-finite gradient norm"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("3 non-finite steps in a row"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("The last good checkpoint is " + dir + "/ckpt/step-00000002"),
            std::string::npos)
      << a.err;
  const CliRun b = Shell(Train(dir, "--resume auto"));
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("resumed from " + dir + "/ckpt/step-00000002 at step 2"), std::string::npos)
      << b.out;
  EXPECT_EQ(LastMetrics(dir)["step"], 8);
}

TEST(CkptCli, FlippedByteFallsBackToPreviousCheckpoint) {
  const std::string dir = WriteRun("ckpt_flip");
  ASSERT_EQ(Shell(Train(dir, "--set run.steps=6")).exit_code, 0);
  const std::string victim = dir + "/ckpt/step-00000006/rank-00000.safetensors";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  // An explicit path to the damaged checkpoint fails naming the file.
  const CliRun c = Shell(Train(dir, "--resume " + dir + "/ckpt/step-00000006"));
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.err.find(victim), std::string::npos) << c.err;
  const CliRun b = Shell(Train(dir, "--resume auto"));
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find(victim + ": CRC32C"), std::string::npos) << b.err;
  EXPECT_NE(b.out.find("resumed from " + dir + "/ckpt/step-00000004 at step 4"), std::string::npos)
      << b.out;
}

TEST(CkptCli, BadCkptKeyNamed) {
  const std::string dir = WriteRun("ckpt_badkey");
  const CliRun a = Shell(Train(dir, "--set ckpt.keep=0"));
  EXPECT_NE(a.exit_code, 0);
  EXPECT_NE(a.err.find("ckpt.keep"), std::string::npos) << a.err;
}

// Checkpoints cover one process with zero=0; other layouts are refused by name before any launch.
TEST(CkptCli, MultiRankOrZeroCheckpointRefused) {
  const std::string dir = WriteRun("ckpt_refuse");
  const CliRun a = Shell(Train(dir, "--layout 'dp=2 mbs=2'"));
  EXPECT_NE(a.exit_code, 0);
  EXPECT_NE(a.err.find("run.layout: ckpt.dir needs one process"), std::string::npos) << a.err;
  const CliRun b = Shell(Train(dir, "--layout 'dp=2 zero=1 mbs=2'"));
  EXPECT_NE(b.exit_code, 0);
  EXPECT_NE(b.err.find("run.layout: ckpt.dir needs zero=0"), std::string::npos) << b.err;
  const CliRun c = Shell(Train(dir, "--set 'ckpt.dir=\"\"' --resume auto --layout 'dp=2 mbs=2'"));
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.err.find("run.layout: --resume needs one process"), std::string::npos) << c.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ckpt"));
}

// A non-finite gradient under dp=2 zero=1 is skipped on every rank together; the run finishes.
TEST(CkptCli, NonFiniteSkippedOnEveryRank) {
  const std::string dir = WriteRun("ckpt_nan_dp");
  // Open MPI keeps allocations past MPI_Finalize: under ASan the ranks use the MPI tests'
  // LeakSanitizer suppressions (tests/mpi/lsan.supp); release builds ignore these variables.
  const CliRun a = Shell(fmt::format(
      "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 "
      "LSAN_OPTIONS=suppressions={}/tests/mpi/lsan.supp:print_suppressions=0 "
      "{} --oversubscribe --allow-run-as-root --mca btl self,vader -np 2 {}",
      PM_SOURCE_DIR, PM_MPIEXEC_BIN,
      Train(dir,
            "--set 'ckpt.dir=\"\"' --layout 'dp=2 zero=1 mbs=2' --set run.debug_nan_step=2 "
            "--set run.debug_nan_count=1")));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_NE(a.err.find("step 2 skipped: non-finite gradient norm"), std::string::npos) << a.err;
  EXPECT_EQ(LastMetrics(dir)["step"], 8);
}

}  // namespace
}  // namespace pentamesh::ckpt

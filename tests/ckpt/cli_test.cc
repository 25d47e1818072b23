// Fault tests on the real `pentamesh train` binary: a straight run vs one killed with SIGKILL
// mid-run (an async save possibly in flight) and relaunched by scripts/relaunch.sh with
// --resume auto (the last step's loss is bitwise the same); injected NaN gradients stop the run
// with the last good checkpoint named, and the resumed run finishes; a flipped byte in the newest
// checkpoint is reported by file name and the run falls back to the previous checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "testing/run_toml.h"

namespace pentamesh::ckpt {
namespace {

using testing::CliRun;
using testing::LastMetrics;
using testing::ReadFile;
using testing::Shell;
namespace fs = std::filesystem;

// A run directory with run.toml (8 steps, a checkpoint every 2, synchronous saves off).
std::string WriteRun(const std::string& tag) {
  const std::string dir = data::testing::MakeTempDir(tag);
  std::ofstream(dir + "/run.toml") << testing::RunTomlText(
      {.dataset = data::testing::Corpus().dataset,
       .run_keys = fmt::format("eval_every = 0\neval_batches = 1\nout_dir = \"{}/out\"", dir),
       .tables = fmt::format("[ckpt]\ndir = \"{}/ckpt\"\ninterval = 2\nkeep = 3", dir)});
  return dir;
}

std::string Train(const std::string& dir, const std::string& extra = "") {
  return fmt::format("{} train --config {}/run.toml {}", PM_BINARY, dir, extra);
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
  const nlohmann::json la = LastMetrics(straight + "/out"), lb = LastMetrics(crashed + "/out");
  EXPECT_EQ(la["step"], 8);
  EXPECT_EQ(lb["step"], 8);
  EXPECT_EQ(la["loss"].get<double>(), lb["loss"].get<double>());
}

TEST(CkptCli, NonFiniteStopsThenResumeFinishes) {
  const std::string dir = WriteRun("ckpt_nan");
  const CliRun a = Shell(Train(
      dir,
      "--set run.debug_nan_step=4 --set run.debug_nan_count=100 --set run.max_nonfinite_in_row=2"));
  EXPECT_EQ(a.exit_code, 2) << a.err;
  EXPECT_NE(a.err.find("step 4 skipped: non-finite gradient norm"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("3 non-finite steps in a row"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("The last good checkpoint is " + dir + "/ckpt/step-00000002"),
            std::string::npos)
      << a.err;
  const CliRun b = Shell(Train(dir, "--resume auto"));
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("resumed from " + dir + "/ckpt/step-00000002 at step 2"), std::string::npos)
      << b.out;
  EXPECT_EQ(LastMetrics(dir + "/out")["step"], 8);
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
  // The damaged checkpoint is kept aside (the resumed run saved a new step 6), never pruned.
  EXPECT_NE(b.err.find("kept the damaged checkpoint as " + dir + "/ckpt/step-00000006.damaged"),
            std::string::npos)
      << b.err;
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step-00000006.damaged/rank-00000.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step-00000006/manifest.json"));
}

// A run owns its ckpt.dir: a fresh `train` in another run's directory is refused naming that run
// (exit 2, every checkpoint byte left as it was); --overwrite replaces it under a new run id.
TEST(CkptCli, FreshRunInAnotherRunsCkptDirRefused) {
  const std::string dir = WriteRun("ckpt_owner");
  ASSERT_EQ(Shell(Train(dir, "--set run.steps=4")).exit_code, 0);
  const std::string owner = ReadFile(dir + "/ckpt/run-id");
  ASSERT_EQ(owner.size(), 17u) << owner;
  const nlohmann::json manifest =
      nlohmann::json::parse(ReadFile(dir + "/ckpt/step-00000004/manifest.json"));
  EXPECT_EQ(manifest["state"]["run_id"], owner.substr(0, 16));
  const std::string before = ReadFile(dir + "/ckpt/step-00000004/rank-00000.safetensors");
  const CliRun b = Shell(Train(dir));
  EXPECT_EQ(b.exit_code, 2) << b.err;
  EXPECT_NE(
      b.err.find("ckpt.dir " + dir + "/ckpt holds the checkpoints of run " + owner.substr(0, 16)),
      std::string::npos)
      << b.err;
  EXPECT_NE(b.err.find("--overwrite"), std::string::npos) << b.err;
  EXPECT_EQ(ReadFile(dir + "/ckpt/step-00000004/rank-00000.safetensors"), before);
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step-00000002"));
  const CliRun c = Shell(Train(dir, "--overwrite --set run.steps=3"));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(ReadFile(dir + "/ckpt/run-id"), owner);
  EXPECT_FALSE(fs::exists(dir + "/ckpt/step-00000004"));
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step-00000002/manifest.json"));
}

// Every checkpoint damaged: --resume auto refuses (exit 2, naming them) instead of starting again
// from step 0, and deletes none of them.
TEST(CkptCli, EveryCheckpointDamagedRefusedAndKept) {
  const std::string dir = WriteRun("ckpt_all_bad");
  ASSERT_EQ(Shell(Train(dir, "--set run.steps=6")).exit_code, 0);
  std::vector<std::string> steps;
  for (const char* step : {"step-00000002", "step-00000004", "step-00000006"}) {
    steps.push_back(dir + "/ckpt/" + step);
    std::fstream f(steps.back() + "/rank-00000.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  const CliRun r = Shell(Train(dir, "--resume auto"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("every checkpoint under " + dir + "/ckpt is damaged"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << "no step was trained";
  for (const std::string& s : steps) EXPECT_TRUE(fs::exists(s + "/manifest.json")) << s;
}

// A run whose saves fail does not exit 0: ckpt.dir is a file (refused before the first step); a
// `latest.tmp` that is a directory makes every publish fail (the last save too).
TEST(CkptCli, FailedSavesAreNotSuccess) {
  const std::string dir = WriteRun("ckpt_save_fails");
  std::ofstream(dir + "/ckpt") << "a file";
  const CliRun a = Shell(Train(dir));
  EXPECT_EQ(a.exit_code, 2) << a.err;
  EXPECT_NE(a.err.find("ckpt.dir: " + dir + "/ckpt exists and is not a directory"),
            std::string::npos)
      << a.err;
  fs::remove(dir + "/ckpt");
  fs::create_directories(dir + "/ckpt/latest.tmp/x");
  const CliRun b = Shell(Train(dir, "--resume auto --set run.steps=4"));
  EXPECT_NE(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find("the run's last checkpoint (step 4) was not saved"), std::string::npos)
      << b.err;
  EXPECT_EQ(b.out.find("done:"), std::string::npos) << b.out;
}

TEST(CkptCli, BadCkptKeyNamed) {
  const std::string dir = WriteRun("ckpt_badkey");
  const CliRun a = Shell(Train(dir, "--set ckpt.keep=0"));
  EXPECT_NE(a.exit_code, 0);
  EXPECT_NE(a.err.find("ckpt.keep"), std::string::npos) << a.err;
}

// A non-finite gradient under dp=2 zero=1 is skipped on every rank together; the run finishes.
TEST(CkptCli, NonFiniteSkippedOnEveryRank) {
  const std::string dir = WriteRun("ckpt_nan_dp");
  const CliRun a = Shell(testing::Mpirun(
      2, Train(dir,
               "--set 'ckpt.dir=\"\"' --layout 'dp=2 zero=1 mbs=2' --set run.debug_nan_step=2 "
               "--set run.debug_nan_count=1")));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_NE(a.err.find("step 2 skipped: non-finite gradient norm"), std::string::npos) << a.err;
  EXPECT_EQ(LastMetrics(dir + "/out")["step"], 8);
}

// --- Multi-rank checkpoints (real mpirun, 4 ranks, the tiny model) ---

// `pentamesh train` under mpirun -np np (testing::Mpirun: without LeakSanitizer under ASan).
std::string Mpi(int np, const std::string& train_cmd) {
  return testing::Mpirun(np, train_cmd, "PENTAMESH_COMM_TIMEOUT_S=60 ");
}

// step -> loss of metrics.jsonl under out_dir (a resumed run appends: the last line per step).
std::map<int64_t, double> Losses(const std::string& out_dir) {
  std::map<int64_t, double> losses;
  for (const nlohmann::json& j : testing::ReadMetrics(out_dir))
    losses[j["step"].get<int64_t>()] = j["loss"].get<double>();
  return losses;
}

// A tiny MoE model (2 layers, both MoE: 4 experts, top-2) for WriteRun's run.toml.
void AppendMoe(const std::string& dir) {
  std::ofstream(dir + "/run.toml", std::ios::app) << R"(
[model.moe]
experts = 4
top_k = 2
expert_ffn_hidden = 32
)";
}

// Aux-loss-free balancing moves the routing bias every step; it is saved per MoE layer
// (layers.N.moe.router_bias) and restored, so a resumed run's losses are bitwise the straight
// run's. Without the bias in the checkpoint the resumed run routes with a zero bias and differs.
TEST(CkptCli, MoeRoutingBiasResumesExactly) {
  const std::string bias = "--set optim.bias_update_rate=0.05";
  const std::string straight = WriteRun("ckpt_moe_straight");
  AppendMoe(straight);
  const CliRun a = Shell(Train(straight, bias));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string ckpt = straight + "/ckpt/step-00000004";
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  for (const char* name : {"layers.0.moe.router_bias", "layers.1.moe.router_bias"}) {
    ASSERT_TRUE(manifest["tensors"].contains(name)) << name;
    EXPECT_EQ(manifest["tensors"][name]["shape"], nlohmann::json::array({4})) << name;
  }
  const std::string resumed = WriteRun("ckpt_moe_resumed");
  AppendMoe(resumed);
  const CliRun b = Shell(Train(resumed, bias + " --resume " + ckpt));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::map<int64_t, double> want = Losses(straight + "/out"), got = Losses(resumed + "/out");
  ASSERT_EQ(want.size(), 8u);
  ASSERT_EQ(got.size(), 4u);
  for (const auto& [step, loss] : got) EXPECT_EQ(loss, want.at(step)) << "step " << step;
  // With the bias frozen after the resume (rate 0) the losses differ: its updates change routing.
  const std::string off = WriteRun("ckpt_moe_off");
  AppendMoe(off);
  const CliRun c = Shell(Train(off, "--set optim.bias_update_rate=0 --resume " + ckpt));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(Losses(off + "/out").at(8), want.at(8));
}

// Layout A of the multi-rank tests: dp x tp with ZeRO-1, 4 ranks. kv_heads = heads = 4 so that
// tp=4 is a layout the engine runs.
constexpr const char* kLayoutA = "dp=2 tp=2 zero=1 sp=off mbs=1";
std::string TrainMr(const std::string& dir, const std::string& extra) {
  return Train(dir, "--set model.kv_heads=4 " + extra);
}

// The straight 8-step run at layout A (checkpoints every 2 steps), run once for the tests below.
const std::string& StraightA() {
  static const std::string dir = [] {
    const std::string d = WriteRun("ckpt_mr_straight");
    const CliRun a = Shell(Mpi(4, TrainMr(d, fmt::format("--layout '{}'", kLayoutA))));
    EXPECT_EQ(a.exit_code, 0) << a.out << a.err;
    return d;
  }();
  return dir;
}

// Saved at layout A after 4 steps, loaded at other layouts (tp, dp and the ZeRO stage change;
// one process too): the next 4 steps' losses match continuing at layout A (1e-5 relative).
TEST(CkptMultiRank, ReshardsToOtherLayouts) {
  const std::string& a = StraightA();
  const std::map<int64_t, double> want = Losses(a + "/out");
  ASSERT_EQ(want.size(), 8u);
  const std::string ckpt = a + "/ckpt/step-00000004";
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  EXPECT_EQ(manifest["world"], 4);
  EXPECT_EQ(manifest["files"].size(), 4u);
  const struct {
    int np;
    const char* layout;
  } cases[] = {{4, "tp=4 sp=off mbs=1"},
               {4, "dp=4 zero=2 mbs=1"},
               {4, "dp=4 zero=3 mbs=1"},
               {2, "dp=2 zero=0 mbs=1"},
               {1, "mbs=1"}};
  for (const auto& c : cases) {
    const std::string dir = WriteRun("ckpt_mr_reshard");
    const std::string cmd = TrainMr(dir, fmt::format("--layout '{}' --resume {}", c.layout, ckpt));
    const CliRun r = Shell(c.np == 1 ? cmd : Mpi(c.np, cmd));
    ASSERT_EQ(r.exit_code, 0) << c.layout << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("resumed from " + ckpt + " at step 4"), std::string::npos) << r.out;
    const std::map<int64_t, double> got = Losses(dir + "/out");
    ASSERT_EQ(got.size(), 4u) << c.layout;
    double max_rel = 0;
    for (const auto& [step, loss] : got) {
      EXPECT_NEAR(loss, want.at(step), 1e-5 * std::abs(want.at(step)))
          << c.layout << " step " << step;
      max_rel = std::max(max_rel, std::abs(loss - want.at(step)) / std::abs(want.at(step)));
    }
    std::cerr << "resumed at " << c.layout << ": steps 5-8 max relative loss difference " << max_rel
              << "\n";
    // The resharded run's own checkpoint loads back at layout A: one more round trip.
    if (c.np == 2) {
      const std::string back = WriteRun("ckpt_mr_back");
      const CliRun b =
          Shell(Mpi(4, TrainMr(back, fmt::format("--layout '{}' --resume {}/ckpt/step-00000006",
                                                 kLayoutA, dir))));
      ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
      const std::map<int64_t, double> tail = Losses(back + "/out");
      ASSERT_EQ(tail.size(), 2u);
      for (const auto& [step, loss] : tail)
        EXPECT_NEAR(loss, want.at(step), 1e-5 * std::abs(want.at(step))) << "back, step " << step;
    }
  }
}

// Resumes checkpoint `ckpt` (saved after step 4 of an 8-step run) at `layout` on np processes
// with the extra flags; steps 5-8 must match `want` (the run continued at the saved layout) to
// 1e-5 relative.
void ExpectResumeMatches(const std::string& ckpt, const std::map<int64_t, double>& want, int np,
                         const std::string& layout, const std::string& extra, bool moe = false,
                         std::string* run_dir = nullptr) {
  const std::string dir = WriteRun("ckpt_mr_reshard2");
  if (run_dir) *run_dir = dir;
  if (moe) AppendMoe(dir);
  const std::string cmd =
      Train(dir, fmt::format("{} --layout '{}' --resume {}", extra, layout, ckpt));
  const CliRun r = Shell(np == 1 ? cmd : Mpi(np, cmd));
  ASSERT_EQ(r.exit_code, 0) << layout << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("resumed from " + ckpt + " at step 4"), std::string::npos) << r.out;
  const std::map<int64_t, double> got = Losses(dir + "/out");
  ASSERT_EQ(got.size(), 4u) << layout;
  double max_rel = 0;
  for (const auto& [step, loss] : got) {
    EXPECT_NEAR(loss, want.at(step), 1e-5 * std::abs(want.at(step))) << layout << " step " << step;
    max_rel = std::max(max_rel, std::abs(loss - want.at(step)) / std::abs(want.at(step)));
  }
  std::cerr << "resumed at " << layout << ": steps 5-8 max relative loss difference " << max_rel
            << "\n";
}

// Trains the run in `dir` straight through its 8 steps under mpirun -np np with `flags` (the
// layout among them) and returns the losses; fatal test failure (wrap in ASSERT_NO_FATAL_FAILURE)
// when the run fails or logs other than 8 steps.
void TrainStraight(const std::string& dir, int np, const std::string& flags,
                   std::map<int64_t, double>* losses) {
  const CliRun r = Shell(Mpi(np, Train(dir, flags)));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  *losses = Losses(dir + "/out");
  ASSERT_EQ(losses->size(), 8u);
}

// Pipeline parallel: each pp rank writes its own stage's tensors (distinct global names; at ZeRO-1
// each dp rank its range of them), rank 0 commits once every rank's files are durable. Saved at
// pp=2 dp=2 zero=1 after 4 steps, resumed at one process, at tp=2 and at pp=2 tp=2.
TEST(CkptMultiRank, PipelineReshards) {
  const std::string untied = "--set model.tied_embeddings=false";
  const std::string a = WriteRun("ckpt_mr_pp");
  std::map<int64_t, double> want;
  ASSERT_NO_FATAL_FAILURE(
      TrainStraight(a, 4, untied + " --layout 'pp=2 dp=2 zero=1 sp=off mbs=1'", &want));
  const std::string ckpt = a + "/ckpt/step-00000004";
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  EXPECT_EQ(manifest["world"], 4);
  EXPECT_EQ(manifest["files"].size(), 4u);
  // Stage 0 (embedding) and stage 1 (lm_head) are written by disjoint pairs of ranks: at ZeRO-1
  // both dp ranks of a stage write their half of the stage's tensors.
  const auto files_of = [&](const std::string& name) {
    std::set<std::string> files;
    for (const auto& sl : manifest["tensors"][name]["slices"]) files.insert(sl["file"]);
    return files;
  };
  const std::set<std::string> first = files_of("embedding.weight.adam_m"),
                              last = files_of("lm_head.weight.adam_m");
  EXPECT_EQ(first.size(), 2u);
  EXPECT_EQ(last.size(), 2u);
  for (const std::string& f : first) EXPECT_EQ(last.count(f), 0u) << f;
  ExpectResumeMatches(ckpt, want, 1, "mbs=1", untied);
  ExpectResumeMatches(ckpt, want, 2, "tp=2 sp=off mbs=1", untied);
  ExpectResumeMatches(ckpt, want, 4, "pp=2 tp=2 sp=off mbs=1", untied);
}

// At ZeRO-0 only dp rank 0 of each pp stage writes (its replicas hold the same state).
TEST(CkptMultiRank, PipelineZero0WritesOneReplicaPerStage) {
  const std::string untied = "--set model.tied_embeddings=false";
  const std::string a = WriteRun("ckpt_mr_pp0");
  std::map<int64_t, double> want;
  ASSERT_NO_FATAL_FAILURE(
      TrainStraight(a, 4, untied + " --layout 'pp=2 dp=2 zero=0 sp=off mbs=1'", &want));
  const std::string ckpt = a + "/ckpt/step-00000004";
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  std::set<std::string> writers;
  for (const auto& [name, t] : manifest["tensors"].items()) {
    ASSERT_EQ(t["slices"].size(), 1u) << name;
    writers.insert(t["slices"][0]["file"].get<std::string>());
  }
  EXPECT_EQ(writers.size(), 2u);
  ExpectResumeMatches(ckpt, want, 2, "dp=2 zero=1 mbs=1", untied);
}

// MoE with pp: each stage's routing biases update from its own layers' counts summed over its dp
// group, are saved by its first rank and resume at one process (the biases keep moving the same
// way there: steps 5-8 match).
TEST(CkptMultiRank, PipelineMoeBiasReshards) {
  // 3 layers: the stages hold 2 and 1 MoE layers (the update must not mix them across stages).
  const std::string flags =
      "--set model.tied_embeddings=false --set optim.bias_update_rate=0.05 --set model.layers=3";
  const std::string a = WriteRun("ckpt_mr_pp_moe");
  AppendMoe(a);
  std::map<int64_t, double> want;
  ASSERT_NO_FATAL_FAILURE(
      TrainStraight(a, 4, flags + " --layout 'pp=2 dp=2 zero=1 sp=off mbs=1'", &want));
  const std::string ckpt = a + "/ckpt/step-00000004";
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  for (const char* name :
       {"layers.0.moe.router_bias", "layers.1.moe.router_bias", "layers.2.moe.router_bias"})
    EXPECT_TRUE(manifest["tensors"].contains(name)) << name;
  std::string resumed;
  ExpectResumeMatches(ckpt, want, 1, "mbs=1", flags, true, &resumed);
  // The biases after step 8 agree exactly (they move in steps of +-rate from per-layer counts).
  auto end_a = Checkpoint::Open(a + "/ckpt/step-00000008");
  auto end_b = Checkpoint::Open(resumed + "/ckpt/step-00000008");
  ASSERT_TRUE(end_a.ok() && end_b.ok());
  for (const char* name :
       {"layers.0.moe.router_bias", "layers.1.moe.router_bias", "layers.2.moe.router_bias"}) {
    std::vector<float> bias_a(4), bias_b(4);
    ASSERT_TRUE(end_a->ReadRegion(name, {4}, {0}, {4}, bias_a.data()).ok()) << name;
    ASSERT_TRUE(end_b->ReadRegion(name, {4}, {0}, {4}, bias_b.data()).ok()) << name;
    EXPECT_EQ(bias_a, bias_b) << name;
  }
}

// Expert parallel at ZeRO-0: the experts are written by the first rank of each expert-dp group,
// the dense tensors and the routing bias by the first of the dense group. Saved at ep=2 dp=1,
// resumed at one process and at ep=1 dp=2.
TEST(CkptMultiRank, ExpertParallelReshards) {
  const std::string bias = "--set optim.bias_update_rate=0.05";
  const std::string a = WriteRun("ckpt_mr_ep");
  AppendMoe(a);
  std::map<int64_t, double> want;
  ASSERT_NO_FATAL_FAILURE(TrainStraight(a, 2, bias + " --layout 'ep=2 dp=1 zero=0 mbs=2'", &want));
  const std::string ckpt = a + "/ckpt/step-00000004";
  ExpectResumeMatches(ckpt, want, 1, "mbs=2", bias, true);
  ExpectResumeMatches(ckpt, want, 2, "ep=1 dp=2 mbs=2", bias, true);
}

// Resumes `ckpt` at the saved layout (np processes, `flags`): steps 5-8 are bitwise `want`.
void ExpectResumeBitwise(const std::string& ckpt, const std::map<int64_t, double>& want, int np,
                         const std::string& layout, const std::string& flags, bool moe) {
  std::string dir;
  ExpectResumeMatches(ckpt, want, np, layout, flags, moe, &dir);
  for (const auto& [step, loss] : Losses(dir + "/out"))
    EXPECT_EQ(loss, want.at(step)) << layout << " (same layout) step " << step;
}

// ZeRO-1/2/3 with expert parallel: the dense optimizer state (ZeRO-3: and weights) is sharded
// over dp x cp and the routed experts' over the expert data-parallel group, each packed per group;
// every rank writes the boxes of the global tensors its packed ranges cover. Saved at dp=2 ep=2
// zero=`zero`, resumed at one process, at zero=0 and (bitwise) at the saved layout.
void ExpectExpertParallelZeroReshards(int zero) {
  const std::string bias = "--set optim.bias_update_rate=0.05";
  const std::string layout = fmt::format("dp=2 ep=2 zero={} mbs=1", zero);
  const std::string a = WriteRun(fmt::format("ckpt_mr_ep_zero{}", zero));
  AppendMoe(a);
  std::map<int64_t, double> want;
  ASSERT_NO_FATAL_FAILURE(TrainStraight(a, 4, bias + " --layout '" + layout + "'", &want));
  const std::string ckpt = a + "/ckpt/step-00000004";
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  EXPECT_EQ(manifest["files"].size(), 4u) << layout;  // every rank holds a shard
  // The routed experts are not replicated: their state is written by both ep ranks.
  EXPECT_GE(manifest["tensors"]["layers.0.moe.experts.w1.adam_m"]["slices"].size(), 2u);
  ExpectResumeMatches(ckpt, want, 1, "mbs=1", bias, true);
  ExpectResumeMatches(ckpt, want, 4, "dp=2 ep=2 zero=0 mbs=1", bias, true);
  ExpectResumeBitwise(ckpt, want, 4, layout, bias, true);
}

TEST(CkptMultiRank, ExpertParallelZeroReshards) {
  for (const int zero : {1, 2}) {
    SCOPED_TRACE(zero);
    ExpectExpertParallelZeroReshards(zero);
  }
}

// ZeRO-3: each layer's dense weights sliced over dp x cp, its experts' over expert-dp.
TEST(CkptMultiRank, ExpertParallelZero3Reshards) { ExpectExpertParallelZeroReshards(3); }

// ZeRO-2/3 with pipeline parallel (gradients, and at ZeRO-3 the parameters, sharded over each
// stage's dp group): saved at pp=2 dp=2 zero=2 and zero=3, resumed at one process, at
// pp=2 dp=2 zero=1 and (bitwise) at the saved layout.
TEST(CkptMultiRank, PipelineZeroReshards) {
  const std::string untied = "--set model.tied_embeddings=false";
  for (const int zero : {2, 3}) {
    const std::string layout = fmt::format("pp=2 dp=2 zero={} sp=off mbs=1", zero);
    const std::string a = WriteRun("ckpt_mr_pp_zero");
    std::map<int64_t, double> want;
    ASSERT_NO_FATAL_FAILURE(TrainStraight(a, 4, untied + " --layout '" + layout + "'", &want));
    const std::string ckpt = a + "/ckpt/step-00000004";
    const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
    EXPECT_EQ(manifest["files"].size(), 4u) << layout;  // each dp rank of each stage, its shard
    ExpectResumeMatches(ckpt, want, 1, "mbs=1", untied);
    ExpectResumeMatches(ckpt, want, 4, "pp=2 dp=2 zero=1 sp=off mbs=1", untied);
    ExpectResumeBitwise(ckpt, want, 4, layout, untied, false);
  }
}

// All five axes at 8 ranks (pp=2 dp=2 cp=2 ep=2, experts folded onto dp x cp, interleaved
// schedule): stopped after step 4 and resumed at the same layout, steps 5-8 are bitwise the
// straight run's; resumed at one process they match to 1e-5 relative. Dropless, z loss on, no
// aux loss: capacity drops and the aux loss's f_i and P_i are computed over each rank's local
// tokens, and cp gives each rank half of every sequence, so with them the model itself depends on
// the layout (cp=2 alone vs one process: 1.3e-5 relative at step 1, before any checkpoint);
// without them the 8-rank and the one-process straight runs agree to ~3e-7.
TEST(CkptMultiRank, FiveAxesResumeBitwise) {
  const std::string flags =
      "--set model.tied_embeddings=false --set model.layers=4 --set optim.bias_update_rate=0.05 "
      "--set model.moe.capacity_factor=0 --set optim.aux_loss_coef=0 --set optim.z_loss_coef=0.001";
  const std::string layout =
      "pp=2 dp=2 cp=2 ep=2 ep_placement=folded schedule=interleaved:2 sp=off mbs=1";
  const std::string a = WriteRun("ckpt_mr_5d");
  AppendMoe(a);
  std::map<int64_t, double> want;
  ASSERT_NO_FATAL_FAILURE(TrainStraight(a, 8, flags + " --layout '" + layout + "'", &want));
  const std::string ckpt = a + "/ckpt/step-00000004";
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  EXPECT_EQ(manifest["world"], 8);
  ExpectResumeBitwise(ckpt, want, 8, layout, flags, true);
  ExpectResumeMatches(ckpt, want, 1, "mbs=1", flags, true);
}

// SIGKILL of world rank 1 after step 5 (the other ranks are then inside step 6's collectives):
// the job ends, non-zero, naming the lost rank, without hanging; scripts/relaunch.sh reruns it
// with --resume auto and every step's loss is bitwise the straight run's at the same layout.
TEST(CkptMultiRank, KilledRankRelaunchedBitwise) {
  const std::map<int64_t, double> want = Losses(StraightA() + "/out");
  const std::string dir = WriteRun("ckpt_mr_kill");
  const auto start = std::chrono::steady_clock::now();
  const CliRun r = Shell(fmt::format(
      "{}/scripts/relaunch.sh --retries 2 -- {}", PM_SOURCE_DIR,
      Mpi(4, TrainMr(dir, fmt::format("--layout '{}' --resume auto --set run.debug_kill_step=5 "
                                      "--set run.debug_kill_rank=1",
                                      kLayoutA)))));
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << r.err;  // the launcher's and relaunch.sh's account of the fault
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("SIGKILL after step 5 (world rank 1)"), std::string::npos) << r.err;
  // Open MPI's own report of the lost rank (it then kills the rest of the job).
  EXPECT_NE((r.out + r.err).find("rank 1 with PID"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("relaunch: attempt 1 exited with status"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("relaunch: attempt 2"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("resumed from " + dir + "/ckpt/step-0000000"), std::string::npos) << r.out;
  EXPECT_LT(wall_s, 150) << "the killed job took too long to end";
  const std::map<int64_t, double> got = Losses(dir + "/out");
  ASSERT_EQ(got.size(), 8u);
  for (const auto& [step, loss] : got) EXPECT_EQ(loss, want.at(step)) << "step " << step;
}

// The same multi-rank resume exactness in bf16 (zero=0: bf16 with ZeRO is not in the engine yet),
// every rank killed after step 5 this time: bitwise the straight run's losses.
TEST(CkptMultiRank, Bf16ResumeBitwise) {
  const std::string extra = "--layout 'dp=2 tp=2 sp=off mbs=1' --set train.precision='\"bf16\"'";
  const std::string straight = WriteRun("ckpt_mr_bf16");
  const CliRun a = Shell(Mpi(4, TrainMr(straight, extra)));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const std::string dir = WriteRun("ckpt_mr_bf16_kill");
  const CliRun r = Shell(
      fmt::format("{}/scripts/relaunch.sh --retries 1 -- {}", PM_SOURCE_DIR,
                  Mpi(4, TrainMr(dir, extra + " --resume auto --set run.debug_kill_step=5"))));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resumed from " + dir + "/ckpt/step-0000000"), std::string::npos) << r.out;
  const std::map<int64_t, double> want = Losses(straight + "/out"), got = Losses(dir + "/out");
  ASSERT_EQ(got.size(), 8u);
  for (const auto& [step, loss] : got) EXPECT_EQ(loss, want.at(step)) << "step " << step;
}

// Disk full on a real size-limited file system under 2 ranks: a 1 MiB tmpfs holds one checkpoint
// of the tiny model (~0.6 MiB) but not two. If mount is not permitted (an unprivileged
// container), the fallback is RLIMIT_FSIZE (`ulimit -f`, SIGXFSZ ignored so write fails with
// EFBIG), also a real kernel limit, on one process (Open MPI's PMIx store fails under it). The save
// fails naming the reason, the run (whose last checkpoint was not saved) exits 2, the previous
// checkpoint stays whole, and a resume from it works.
TEST(CkptMultiRank, DiskFullKeepsPreviousCheckpoint) {
  const std::string dir = WriteRun("ckpt_mr_full");
  const std::string mnt = dir + "/ckpt";
  std::filesystem::create_directories(mnt);
  // PM_TEST_NO_MOUNT=1 exercises the fallback where mount is permitted.
  const bool tmpfs =
      std::getenv("PM_TEST_NO_MOUNT") == nullptr &&
      std::system(fmt::format("mount -t tmpfs -o size=1m tmpfs {} 2>/dev/null", mnt).c_str()) == 0;
  struct Unmount {  // also on an early ASSERT return
    std::string path;
    ~Unmount() {
      if (!path.empty()) (void)std::system(fmt::format("umount {}", path).c_str());
    }
  } unmount{tmpfs ? mnt : ""};
  std::cerr << "disk-full limit: " << (tmpfs ? "tmpfs size=1m" : "ulimit -f (RLIMIT_FSIZE)")
            << "\n";
  const std::string layout = "--layout 'dp=2 zero=1 mbs=1' --set optim.warmup_steps=1";
  const CliRun a = Shell(Mpi(2, TrainMr(dir, layout + " --set run.steps=2")));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  // The fallback limit breaks mpirun's own shared-memory store, so that attempt runs on one
  // process (resuming the 2-rank checkpoint there, a reshard too).
  const std::string resume = " --resume auto --set run.steps=4";
  const CliRun b =
      Shell(tmpfs ? Mpi(2, TrainMr(dir, layout + resume))
                  : "trap '' XFSZ; ulimit -f 64; " +
                        TrainMr(dir, "--layout mbs=1 --set optim.warmup_steps=1" + resume));
  // The last checkpoint is the run's result: not saving it is a failed run (exit 2), not 0.
  EXPECT_EQ(b.exit_code, 2) << b.out << b.err;
  EXPECT_NE(b.out.find("resumed from " + mnt + "/step-00000002 at step 2"), std::string::npos)
      << b.out;
  EXPECT_NE(b.err.find("the run's last checkpoint (step 4) was not saved: checkpoint "
                       "step-00000004 NOT saved"),
            std::string::npos)
      << b.err;
  EXPECT_NE(b.err.find(tmpfs ? "No space left on device" : "File too large"), std::string::npos)
      << b.err;
  EXPECT_NE(b.err.find("the previous checkpoint " + mnt + "/step-00000002 is intact"),
            std::string::npos)
      << b.err;
  EXPECT_FALSE(std::filesystem::exists(mnt + "/step-00000004.tmp"));
  EXPECT_FALSE(std::filesystem::exists(mnt + "/step-00000004"));
  // The previous checkpoint verifies and resumes (without the ulimit; the tmpfs is still full, so
  // there the last save fails again and the run ends with exit 2).
  const CliRun c = Shell(Mpi(2, TrainMr(dir, layout +
                                                 " --resume auto --set run.steps=4 "
                                                 "--set run.out_dir='\"" +
                                                 dir + "/out2\"'")));
  EXPECT_EQ(c.exit_code, tmpfs ? 2 : 0) << c.out << c.err;
  EXPECT_NE(c.out.find("resumed from " + mnt + "/step-00000002 at step 2"), std::string::npos)
      << c.out;
}

// Under mpirun: rank 0 claims ckpt.dir and every rank learns the outcome, so a fresh run in an
// occupied directory ends on every rank (exit 2, no hang) and the 2-rank run's checkpoint stays.
TEST(CkptMultiRank, FreshRunInOccupiedDirRefusedOnEveryRank) {
  const std::string dir = WriteRun("ckpt_mr_owner");
  const std::string layout = "--layout 'dp=2 zero=1 mbs=2' --set run.steps=3";
  const CliRun a = Shell(Mpi(2, Train(dir, layout)));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const std::string owner = ReadFile(dir + "/ckpt/run-id").substr(0, 16);
  const nlohmann::json manifest =
      nlohmann::json::parse(ReadFile(dir + "/ckpt/step-00000002/manifest.json"));
  EXPECT_EQ(manifest["state"]["run_id"], owner);
  const CliRun b = Shell(Mpi(2, Train(dir, layout)));
  EXPECT_NE(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.err.find("holds the checkpoints of run " + owner), std::string::npos) << b.err;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(dir + "/ckpt/step-00000002/manifest.json")), manifest);
  const CliRun c = Shell(Mpi(2, Train(dir, layout + " --resume auto")));
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_EQ(ReadFile(dir + "/ckpt/run-id").substr(0, 16), owner);
}

}  // namespace
}  // namespace pentamesh::ckpt

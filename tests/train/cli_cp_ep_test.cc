// `mpirun -np 4 pentamesh train` end to end with context and expert parallelism: the real binary
// on configs/tiny-dense.toml with layout "cp=2 dp=2" (ring) and on configs/tiny-moe.toml with
// "ep=2 dp=2" (separate placement: 4 data ranks), on the shared corpus fixture (vocab 512, a few
// steps). Checks the exit status, that metrics.jsonl has one line per step with finite losses,
// the cp / ep groups' bytes, and for MoE the per-step expert statistics summed over all data
// ranks: tokens_per_expert adds up to global tokens x top_k x MoE layers. And one 8-rank run with
// all of pp, dp, cp and ep (folded) on tiny-moe: pp, cp and ep bytes in every step, and the expert
// statistics summed over the pipeline stages too (each stage routes only its own MoE layers), and
// a finite held-out loss from the pipelined evaluation.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/fixtures.h"
#include "testing/cli_run.h"

namespace pentamesh::train {
namespace {

constexpr int kSteps = 3;

using testing::CliRun;
using testing::Shell;

std::string TrainCommand(const std::string& config, const std::string& layout,
                         const std::string& dir, int steps, const std::string& extra, int np = 4) {
  return testing::Mpirun(
      np, fmt::format("{} train --config {}/configs/{} --layout '{}' --set model.vocab=512 --set "
                      "'data.dataset=\"{}\"' --set run.steps={} --set optim.warmup_steps=1 --set "
                      "run.eval_every=0 --set run.log_every=1 --set 'run.out_dir=\"{}\"' {}",
                      PM_BINARY, PM_SOURCE_DIR, config, layout, data::testing::Corpus().dataset,
                      steps, dir, extra));
}

CliRun Train(const std::string& config, const std::string& layout, const std::string& dir) {
  return Shell(TrainCommand(config, layout, dir, kSteps, "--set 'ckpt.dir=\"\"'"));
}

TEST(CliCpEp, ContextParallelRing) {
  const std::string dir = data::testing::MakeTempDir("cli_cp");
  const CliRun r = Train("tiny-dense.toml", "cp=2 dp=2 mbs=4", dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<nlohmann::json> m = testing::ReadMetrics(dir);
  ASSERT_EQ(m.size(), static_cast<size_t>(kSteps)) << r.out;
  for (const nlohmann::json& s : m) {
    EXPECT_TRUE(std::isfinite(s.at("loss").get<double>())) << s.dump();
    EXPECT_GT(s.at("comm_bytes").at("cp").at("bytes_wire").get<double>(), 0.0) << s.dump();
    EXPECT_GT(s.at("comm_bytes").at("dp_cp").at("bytes_wire").get<double>(), 0.0) << s.dump();
    EXPECT_EQ(s.at("comm_bytes").at("ep").at("bytes_wire").get<double>(), 0.0) << s.dump();
  }
}

TEST(CliCpEp, ExpertParallelWithExpertStats) {
  const std::string dir = data::testing::MakeTempDir("cli_ep");
  const CliRun r = Train("tiny-moe.toml", "ep=2 dp=2 mbs=2", dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<nlohmann::json> m = testing::ReadMetrics(dir);
  ASSERT_EQ(m.size(), static_cast<size_t>(kSteps)) << r.out;
  // tiny-moe: 16 x 128 tokens per step, top-2, 3 MoE layers (the first layer is dense).
  const int64_t assignments = 16 * 128 * 2 * 3;
  for (const nlohmann::json& s : m) {
    EXPECT_TRUE(std::isfinite(s.at("loss").get<double>())) << s.dump();
    EXPECT_GT(s.at("comm_bytes").at("ep").at("bytes_wire").get<double>(), 0.0) << s.dump();
    EXPECT_GT(s.at("comm_bytes").at("expert_dp").at("bytes_wire").get<double>(), 0.0);
    const auto routed = s.at("tokens_per_expert").get<std::vector<int64_t>>();
    ASSERT_EQ(routed.size(), 4u);
    int64_t sum = 0;
    for (int64_t n : routed) sum += n;
    EXPECT_EQ(sum, assignments) << s.dump();
    EXPECT_GE(s.at("expert_load_imbalance").get<double>(), 1.0);
    EXPECT_GE(s.at("dropped_tokens").get<int64_t>(), 0);  // capacity factor 1.25 may drop
    // tiny-moe: 4 experts, top-2: collapse past (1/4 + 1/2) / 2 of the assignments on one expert.
    EXPECT_DOUBLE_EQ(s.at("expert_collapse_share").get<double>(), 0.375);
    EXPECT_EQ(s.at("expert_collapse").get<bool>(), s.at("max_expert_share").get<double>() > 0.375);
  }
}

TEST(CliCpEp, PipelineWithContextAndExpertParallel) {
  const std::string dir = data::testing::MakeTempDir("cli_pp_cp_ep");
  const CliRun r = Shell(TrainCommand(
      "tiny-moe.toml", "pp=2 dp=2 cp=2 ep=2 ep_placement=folded mbs=2 schedule=interleaved:2", dir,
      kSteps, "--set 'ckpt.dir=\"\"' --set run.eval_every=3", /*np=*/8));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<nlohmann::json> m = testing::ReadMetrics(dir);
  ASSERT_EQ(m.size(), static_cast<size_t>(kSteps)) << r.out;
  const int64_t assignments = 16 * 128 * 2 * 3;  // as above: all 3 MoE layers, both stages
  for (const nlohmann::json& s : m) {
    EXPECT_TRUE(std::isfinite(s.at("loss").get<double>())) << s.dump();
    for (const char* group : {"pp", "cp", "ep", "dp_cp", "expert_dp"}) {
      EXPECT_GT(s.at("comm_bytes").at(group).at("bytes_wire").get<double>(), 0.0)
          << group << " " << s.dump();
    }
    int64_t sum = 0;
    for (int64_t n : s.at("tokens_per_expert").get<std::vector<int64_t>>()) sum += n;
    EXPECT_EQ(sum, assignments) << s.dump();
  }
  // Evaluate runs the executor's forward-only pass over the same groups.
  ASSERT_TRUE(m.back().contains("eval_loss")) << m.back().dump();
  EXPECT_TRUE(std::isfinite(m.back().at("eval_loss").get<double>()));
  EXPECT_LT(m.back().at("eval_loss").get<double>(), 9.0);  // ln 4096 = 8.3 at initialisation
}

// Checkpoints with ep > 1 (experts written by the first rank of each expert-dp group; at ZeRO
// >= 1 every rank writes its slices: dense of the dp x cp shard, experts of the expert-dp shard):
// a run killed after step 3 and relaunched with --resume auto ends with the straight run's losses.
void ExpectResumeBitwise(const std::string& layout) {
  const std::string a = data::testing::MakeTempDir("cli_ep_straight");
  const CliRun straight =
      Shell(TrainCommand("tiny-moe.toml", layout, a, 4,
                         fmt::format("--set 'ckpt.dir=\"{}/ckpt\"' --set ckpt.interval=2", a)));
  ASSERT_EQ(straight.exit_code, 0) << straight.out << straight.err;
  const std::string b = data::testing::MakeTempDir("cli_ep_killed");
  const CliRun killed = Shell(
      fmt::format("{}/scripts/relaunch.sh --retries 2 -- {}", PM_SOURCE_DIR,
                  TrainCommand("tiny-moe.toml", layout, b, 4,
                               fmt::format("--set 'ckpt.dir=\"{}/ckpt\"' --set ckpt.interval=2 "
                                           "--resume auto --set run.debug_kill_step=3",
                                           b))));
  ASSERT_EQ(killed.exit_code, 0) << killed.out << killed.err;
  EXPECT_NE(killed.out.find("resumed from"), std::string::npos) << killed.out;
  const std::vector<nlohmann::json> want = testing::ReadMetrics(a), got = testing::ReadMetrics(b);
  ASSERT_EQ(want.size(), 4u);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().at("step"), 4);
  EXPECT_EQ(got.back().at("loss").get<double>(), want.back().at("loss").get<double>());
}

TEST(CliCpEp, ExpertParallelResumeBitwise) { ExpectResumeBitwise("ep=2 dp=2 mbs=2"); }

TEST(CliCpEp, ExpertParallelZero2ResumeBitwise) { ExpectResumeBitwise("ep=2 dp=2 mbs=2 zero=2"); }

}  // namespace
}  // namespace pentamesh::train

// `pentamesh train --recipe` end to end, the real binary under mpirun: configs/tiny-recipe.toml
// on configs/tiny-dense.toml (a batch ramp at 32 tokens on dp=4, then 4x the context with Llama
// 3.1's RoPE scaling on cp=2 x dp=2, resharded through the phase-1 checkpoint), on the shared
// corpus fixture (vocab 512).
//   - Its losses equal a one-process run of the same recipe (--layout for every phase) within
//     1e-5, step by step (the reference: one process, no collective).
//   - Killed by SIGKILL right after the phase boundary's checkpoint and relaunched with
//     --resume auto, it resumes phase 2 from that checkpoint and ends with the straight run's
//     losses, bitwise.
//   - The last checkpoint's saved config is phase 2's: `export --hf` writes its rope_scaling.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/fixtures.h"
#include "testing/cli_run.h"

namespace pentamesh::train {
namespace {

using testing::CliRun;
using testing::Shell;

constexpr int kSteps = 21;  // tiny-recipe.toml: 4 + 3 + 8 steps, then 6

std::string RecipeArgs(const std::string& dir, const std::string& extra) {
  return fmt::format(
      "{} train --config {}/configs/tiny-dense.toml --recipe {}/configs/tiny-recipe.toml --set "
      "model.vocab=512 --set 'data.dataset=\"{}\"' --set optim.warmup_steps=3 --set "
      "run.eval_every=0 --set run.log_every=1 --set run.threads=1 --set 'run.out_dir=\"{}\"' "
      "--set 'ckpt.dir=\"{}/ckpt\"' {}",
      PM_BINARY, PM_SOURCE_DIR, PM_SOURCE_DIR, data::testing::Corpus().dataset, dir, dir, extra);
}

std::map<int64_t, double> Losses(const std::string& dir) {
  std::map<int64_t, double> out;
  for (const nlohmann::json& m : testing::ReadMetrics(dir))
    out[m.at("step").get<int64_t>()] = m.at("loss").get<double>();
  return out;
}

// The three checks share one mpirun run of the recipe (one test: gtest runs each test in its
// own process, and under ASan a run takes tens of seconds).
TEST(RecipeCli, TwoPhasesWithARelayoutUnderMpirun) {
  const std::string straight = data::testing::MakeTempDir("recipe_np4");
  const CliRun r4 = Shell(testing::Mpirun(4, RecipeArgs(straight, "")));
  ASSERT_EQ(r4.exit_code, 0) << r4.out << r4.err;
  EXPECT_NE(r4.out.find("segment 4/4 'long' (phase 2): steps 16-21, seq_len 128, batch 8 seqs"),
            std::string::npos)
      << r4.out;
  EXPECT_NE(r4.out.find("resumed from " + straight + "/ckpt/step-00000015"), std::string::npos)
      << r4.out;
  const std::map<int64_t, double> np4 = Losses(straight);
  ASSERT_EQ(np4.size(), static_cast<size_t>(kSteps));
  // Phase 2 ran on cp=2 x dp=2: its steps moved context-parallel bytes, phase 1's none.
  const std::vector<nlohmann::json> m = testing::ReadMetrics(straight);
  EXPECT_EQ(m[14].at("comm_bytes").at("cp").at("bytes_wire").get<double>(), 0.0);
  EXPECT_GT(m[15].at("comm_bytes").at("cp").at("bytes_wire").get<double>(), 0.0);
  EXPECT_EQ(m[3].at("tokens").get<int64_t>(), 8 * 32);  // the ramp's first level
  EXPECT_EQ(m[4].at("tokens").get<int64_t>(), 12 * 32);
  EXPECT_EQ(m[15].at("tokens").get<int64_t>(), 8 * 128);

  {
    SCOPED_TRACE("one process, the same recipe");
    const std::string one = data::testing::MakeTempDir("recipe_np1");
    const CliRun r = Shell(RecipeArgs(one, "--layout 'dp=1'"));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::map<int64_t, double> np1 = Losses(one);
    ASSERT_EQ(np1.size(), static_cast<size_t>(kSteps));
    for (const auto& [step, loss] : np1) {
      ASSERT_TRUE(std::isfinite(loss));
      EXPECT_NEAR(np4.at(step), loss, 1e-5) << "step " << step;
    }
    EXPECT_LT(np1.at(kSteps), np1.at(1) - 0.5);  // it learned
  }
  {
    SCOPED_TRACE("killed right after the phase boundary's checkpoint");
    const std::string d = data::testing::MakeTempDir("recipe_killed");
    // Synchronous saves: the boundary's checkpoint (step 15) is complete when the process dies.
    const CliRun r = Shell(fmt::format(
        "{}/scripts/relaunch.sh --retries 2 -- {}", PM_SOURCE_DIR,
        testing::Mpirun(4, RecipeArgs(d,
                                      "--set ckpt.async=false --set run.debug_kill_step=15 "
                                      "--resume auto"))));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.err.find("SIGKILL after step 15"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("resumed from " + d + "/ckpt/step-00000015"), std::string::npos) << r.out;
    const std::map<int64_t, double> got = Losses(d);
    EXPECT_EQ(got.size(), static_cast<size_t>(kSteps - 1));  // step 15's line died with it
    for (const auto& [step, loss] : got) EXPECT_EQ(loss, np4.at(step)) << "step " << step;
    EXPECT_EQ(got.at(kSteps), np4.at(kSteps));
  }
  {
    SCOPED_TRACE("the last checkpoint's config is phase 2's");
    const std::string hf = data::testing::MakeTempDir("recipe_hf") + "/hf";
    const CliRun r =
        Shell(fmt::format("{} export --checkpoint {}/ckpt --hf {}", PM_BINARY, straight, hf));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const nlohmann::json config = nlohmann::json::parse(testing::ReadFile(hf + "/config.json"));
    ASSERT_TRUE(config.at("rope_scaling").is_object()) << config.dump();
    EXPECT_EQ(config.at("rope_scaling").at("rope_type"), "llama3");
    EXPECT_EQ(config.at("rope_scaling").at("factor").get<double>(), 4.0);
    EXPECT_EQ(config.at("rope_scaling").at("original_max_position_embeddings").get<int>(), 32);
  }
}

}  // namespace
}  // namespace pentamesh::train

// Failure injection "too few micro-batches for the pipeline" (docs/engine.md): `mpirun -np 2
// pentamesh train` on configs/tiny-dense.toml (test corpus, vocab 512) with layout "pp=2
// schedule=1f1b" and M = 1..2P = 4 micro-batches (12 sequences per step, mbs = 12 / M). Each
// run's metrics.jsonl carries the measured bubble (idle / makespan of the step's pipeline actions,
// mean over the 2 pp ranks) and the simulator's over the same programs with the measured mean F
// and B durations of each stage; summary.json their medians over the steps after the first.
// Asserts, for every M: |measured - simulated| <= kTolerance (the measured idle also holds the p2p
// copies and the wake-up of a blocked receive, which the simulator leaves out); and the bubble
// grows as M shrinks: measured(1) > measured(2) > measured(4) and measured(1) > measured(3), and
// the same for the simulated bubble.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "data/fixtures.h"
#include "testing/cli_run.h"

namespace pentamesh {
namespace {

constexpr int kSteps = 5;
constexpr double kTolerance = 0.08;  // absolute, in bubble fraction

struct Bubble {
  double measured = 0, simulated = 0;
};

Bubble RunWithMicrobatches(int m) {
  const std::string dir = data::testing::MakeTempDir(fmt::format("bubble_m{}", m));
  const std::string cmd = fmt::format(
      "{} train --config {}/configs/tiny-dense.toml --layout 'pp=2 schedule=1f1b mbs={}' --set "
      "model.vocab=512 --set 'data.dataset=\"{}\"' --set train.global_batch_seqs=12 --set "
      "run.steps={} --set optim.warmup_steps=1 --set run.eval_every=0 --set run.eval_batches=1 "
      "--set 'run.out_dir=\"{}\"'",
      PM_BINARY, PM_SOURCE_DIR, 12 / m, data::testing::Corpus().dataset, kSteps, dir);
  const testing::CliRun r = testing::Shell(testing::Mpirun(2, cmd));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<nlohmann::json> lines = testing::ReadMetrics(dir);
  EXPECT_EQ(lines.size(), static_cast<size_t>(kSteps));
  for (const nlohmann::json& line : lines) {
    EXPECT_EQ(line.at("microbatches").get<int>(), m) << line.dump();
    const double b = line.at("bubble").get<double>();
    EXPECT_TRUE(b > 0 && b < 1) << line.dump();
    EXPECT_GT(line.at("pipeline_action_s").at("F").get<double>(), 0) << line.dump();
  }
  const nlohmann::json s =
      nlohmann::json::parse(testing::ReadFile(dir + "/summary.json")).at("bubble");
  EXPECT_EQ(s.at("microbatches").get<int>(), m);
  return {s.at("measured").get<double>(), s.at("simulated").get<double>()};
}

TEST(TooFewMicrobatches, MeasuredBubbleFollowsTheSimulatorAndGrowsAsMShrinks) {
  std::vector<Bubble> b(5);
  for (int m = 1; m <= 4; ++m) {
    b[static_cast<size_t>(m)] = RunWithMicrobatches(m);
    const Bubble& x = b[static_cast<size_t>(m)];
    std::printf("M=%d measured %.3f simulated %.3f closed form (equal costs) %.3f\n", m, x.measured,
                x.simulated, 1.0 / (m + 1));
    EXPECT_NEAR(x.measured, x.simulated, kTolerance) << "M=" << m;
  }
  // Not between neighbours: the last stage also carries the LM head, and with stages of unequal
  // cost the 1F1B bubble at P = 2 flattens towards the lighter stage's idle share as M grows, so
  // neighbouring M, each from its own run's timings on a shared machine, may swap (CI runs: M=3
  // 0.2748 against M=4 0.2763; M=3 0.273 against M=4 0.303, the simulator agreeing with each,
  // 0.269 and 0.298). Equal-cost ordering is checked exactly in tests/schedule.
  EXPECT_GT(b[1].measured, b[2].measured);
  EXPECT_GT(b[2].measured, b[4].measured);
  EXPECT_GT(b[1].measured, b[3].measured);
  // The simulator, fed each run's measured durations, orders them the same way.
  EXPECT_GT(b[1].simulated, b[2].simulated);
  EXPECT_GT(b[2].simulated, b[4].simulated);
  EXPECT_GT(b[1].simulated, b[3].simulated);
}

}  // namespace
}  // namespace pentamesh

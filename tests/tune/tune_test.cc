// tune: Spearman's rank correlation against hand-computed values, the metrics reader against a
// metrics.jsonl written by the engine's own writer (medians and maxima computed here), the
// candidates against cost::EstimateLayout and the engine's rules, and bad input to `pentamesh
// tune` (exit 2, the flag or the reason named).
#include "tune/tune.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "train/engine_rules.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace pentamesh::tune {
namespace {

TEST(TuneSpearman, HandComputedValues) {
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Ranks (1,2,3,4,5) vs (2,1,4,3,5): d^2 = 1+1+1+1+0 = 4, rho = 1 - 6*4/(5*24) = 0.8.
  EXPECT_NEAR(Spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  // Ties share their mean rank: ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4); centred (-1.5, 0, 0, 1.5)
  // and (-1.5, -0.5, 0.5, 1.5): rho = 4.5 / sqrt(4.5 * 5) = sqrt(0.9).
  EXPECT_NEAR(Spearman({1, 2, 2, 3}, {1, 2, 3, 4}), std::sqrt(0.9), 1e-12);
  EXPECT_EQ(Spearman({1}, {1}), 0.0);
}

// A metrics.jsonl from train::MetricsWriter: step times 9 (warm-up), then 1..7; a skipped line.
TEST(TuneReadMeasured, MediansAfterTheWarmUpAndPeaks) {
  const std::string dir = testing::MakeTempDir("tune_metrics");
  auto writer = train::MetricsWriter::Open(dir);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  const std::vector<double> times = {9, 9, 4, 1, 7, 2, 6, 3, 5};
  for (size_t i = 0; i < times.size(); ++i) {
    train::StepStats s;
    s.step = static_cast<int64_t>(i + 1);
    s.loss = 10.0 - static_cast<double>(i);
    s.step_time_s = times[i];
    s.tokens_per_s = 100.0 / times[i];
    s.mfu = 0.01 * times[i];
    s.peak_bytes[static_cast<size_t>(core::MemTag::kActivations)] = 1000 * static_cast<int64_t>(i);
    s.peak_bytes_total = 5000 + static_cast<int64_t>(i);
    ASSERT_TRUE(writer->Write(s).ok());
    if (i == 4) {
      s.skipped = true;
      ASSERT_TRUE(writer->WriteSkipped(s).ok());
    }
  }
  Row row;
  row.dir = dir;
  ASSERT_TRUE(ReadMeasured(row, /*steps=*/9).ok());  // warm-up: 9 / 4 = 2 steps
  ASSERT_TRUE(row.measured);
  EXPECT_EQ(row.measured->steps_measured, 7);
  EXPECT_DOUBLE_EQ(row.measured->step_time_s, 4.0);         // median of 1..7
  EXPECT_DOUBLE_EQ(row.measured->tokens_per_s, 100.0 / 4);  // median of 100/t
  EXPECT_DOUBLE_EQ(row.measured->mfu, 0.04);
  EXPECT_DOUBLE_EQ(row.measured->peak_bytes[static_cast<size_t>(core::MemTag::kActivations)], 8000);
  EXPECT_DOUBLE_EQ(row.measured->peak_total, 5008);
  EXPECT_DOUBLE_EQ(row.measured->final_loss, 2.0);
  EXPECT_FALSE(row.measured->expert_imbalance);

  Row short_run;
  short_run.dir = dir;
  EXPECT_FALSE(ReadMeasured(short_run, 40).ok());  // 10 warm-up steps: none left to measure
  Row none;
  none.dir = dir + "/missing";
  const core::Status s = ReadMeasured(none, 9);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no metrics"), std::string::npos) << s.message();
}

// tune_fuzz: a wrong type or a null where ReadMeasured took a number aborted tune (an uncaught
// JSON exception), and a negative step time was measured. The file is read by report's
// metrics.jsonl reader; what the table shows must be a finite number >= 0 (step time > 0).
TEST(TuneReadMeasured, BadValuesNameTheFileAndStep) {
  const std::string good =
      R"({"step":1,"loss":1,"lr":1,"grad_norm":1,"tokens_per_s":5,"mfu":0.1,"step_time_s":1,)"
      R"("peak_bytes":{"total":1}})";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string bad = good;
    bad.replace(bad.find(from), from.size(), to);
    const std::string dir = testing::MakeTempDir("tune_bad_metrics");
    std::ofstream(dir + "/metrics.jsonl") << good << "\n" << bad << "\n" << good << "\n";
    Row row;
    row.dir = dir;
    const core::Status s = ReadMeasured(row, 4);  // one warm-up step
    EXPECT_FALSE(row.measured);
    return s.ok() ? std::string("accepted") : s.message();
  };
  EXPECT_NE(with(R"("tokens_per_s":5)", R"("tokens_per_s":"x")")
                .find("metrics.jsonl:2: 'tokens_per_s' must be a number"),
            std::string::npos);
  EXPECT_NE(with(R"("mfu":0.1)", R"("mfu":null)").find("metrics.jsonl: step 1: mfu is nan"),
            std::string::npos)
      << with(R"("mfu":0.1)", R"("mfu":null)");
  EXPECT_NE(with(R"("step_time_s":1)", R"("step_time_s":-1)").find("step_time_s is -1"),
            std::string::npos);
  EXPECT_NE(with(R"("step_time_s":1)", R"("step_time_s":0)").find("step_time_s is 0, not positive"),
            std::string::npos);
  EXPECT_NE(with(R"("loss":1)", R"("loss":[1])").find("metrics.jsonl:2: 'loss' must be a number"),
            std::string::npos);
}

std::vector<std::string> Sets() {
  return {"model.vocab=512", "data.dataset=\"" + data::testing::Corpus().dataset + "\""};
}

// The candidates are the planner's for the host of np ranks, each one the engine runs; their
// predictions are cost::EstimateLayout's for the run's own config (what `train` predicts).
TEST(TunePlan, CandidatesAreRunnableAndPredictedByTheCostModel) {
  Options o;
  o.config = std::string(PM_SOURCE_DIR) + "/configs/tiny-moe.toml";
  o.sets = Sets();
  o.np = 4;
  o.top_k = 6;
  auto r = Plan(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto config = train::LoadRunConfig(o.config, o.sets);
  ASSERT_TRUE(config.ok());
  int fsdp = 0, single = 0, ranked = 0;
  for (const Row& row : r->rows) {
    train::RunConfig c = *config;
    c.run.layout = row.layout;
    EXPECT_TRUE(train::EngineLayoutViolations(c).empty()) << spec::ShortLayout(row.layout);
    EXPECT_EQ(row.layout.gpus(), row.ranks);
    const cost::Estimate e = train::PredictRun(c);
    EXPECT_DOUBLE_EQ(row.predicted.time.step, e.time.step) << spec::ShortLayout(row.layout);
    EXPECT_DOUBLE_EQ(row.predicted.memory.total, e.memory.total);
    if (row.kind != Kind::kSingle && ranked < o.top_k) {
      ++ranked;  // the first top_k rows are the planner's top K, in its order
      EXPECT_EQ(row.predicted_rank, ranked) << spec::ShortLayout(row.layout);
      // Ties: predictions within kTie of the first choice share its rank.
      EXPECT_LE(row.tied_rank, row.predicted_rank);
      if (row.predicted.time.step < r->rows[0].predicted.time.step * (1 + kTie)) {
        EXPECT_EQ(row.tied_rank, 1) << spec::ShortLayout(row.layout);
      }
    }
    if (row.kind == Kind::kFsdp) {
      ++fsdp;
      EXPECT_EQ(row.layout.dp, 4);
      EXPECT_EQ(row.layout.zero, 3);
      EXPECT_EQ(row.layout.tp * row.layout.pp * row.layout.cp * row.layout.ep, 1);
    }
    if (row.kind == Kind::kSingle) {
      ++single;
      EXPECT_EQ(row.ranks, 1);
      EXPECT_EQ(row.predicted_rank, 0);
    }
  }
  EXPECT_EQ(ranked, o.top_k);
  EXPECT_EQ(fsdp, 1);
  EXPECT_EQ(single, 1);
}

// --injections: scripts/inject.sh's outcomes are read, checked and shown on the page.
TEST(TunePlan, InjectionOutcomesReachThePage) {
  const std::string dir = testing::MakeTempDir("tune_inject");
  std::ofstream(dir + "/ok.json")
      << R"([{"name": "memory cap", "command": "pentamesh train --set run.memory_limit_bytes=1",)"
      << R"( "outcome": "refused: <optimizer> does not fit", "numbers": {}}])";
  Options o;
  o.config = std::string(PM_SOURCE_DIR) + "/configs/tiny-dense.toml";
  o.sets = Sets();
  o.injections = dir + "/ok.json";
  auto r = Plan(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string page = Html(*r);
  EXPECT_NE(page.find("<h2>Failure injections</h2>"), std::string::npos);
  EXPECT_NE(page.find("refused: &lt;optimizer&gt; does not fit"), std::string::npos);
  std::ofstream(dir + "/bad.json") << R"([{"name": "x", "command": "y"}])";
  o.injections = dir + "/bad.json";
  auto bad = Plan(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("entry 0: 'outcome' must be a string"), std::string::npos)
      << bad.status().message();
}

TEST(TuneCli, BadInputExitsTwoNamingTheReason) {
  const std::string base = fmt::format("tune --config {}/configs/tiny-dense.toml", PM_SOURCE_DIR);
  struct Case {
    std::string args, message;
  };
  const std::string dir = testing::MakeTempDir("tune_bad");
  for (const Case& c : std::vector<Case>{
           {base + " --np 1", "--np"},
           {base + " --np 65", "--np"},
           {base + " --np 2 --top 0", "--top"},
           {base + " --np 2 --steps 2", "--steps"},
           {"tune --np 2 --config /nonexistent.toml", "--config"},
           // Nothing to plan: no layout of 2 ranks has pp >= 4.
           {base + " --np 2 --allow 'pp>=4' --set model.vocab=512", "no layout of 2 ranks"},
           {base + " --np 2 --set optim.learning_rate=1", "optim.learning_rate: unknown key"},
           {base + " --np 2 --mpirun /nonexistent/mpirun --out-dir " + dir, "--mpirun"},
           {base + " --np 2 --html /nonexistent/dir/t.html", "--html"},
           {base + " --np 2 --plan-only --injections /nonexistent.json", "--injections"},
       }) {
    const testing::CliRun r = testing::Pentamesh(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
  // mpirun missing from PATH: refused before any run starts.
  const testing::CliRun r = testing::Shell(fmt::format(
      "env PATH=/nonexistent {} {} --np 2 --out-dir {}", PM_BINARY, base, dir + "/nopath"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("'mpirun' is not on PATH"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pentamesh::tune

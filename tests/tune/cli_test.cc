// `pentamesh tune` end to end: real runs under mpirun on the shared corpus fixture (vocab 512, a
// few steps). The JSON's rows are measured, each prediction equals the one the run itself wrote
// to its metrics.jsonl (the planner and the engine predict the same layout the same way), the
// measured step time is the median of the run's own post-warm-up steps, and the page is written.
// A layout that fails mid-tune (a rank killed by run.debug_kill_step) is a row with its error and
// the other runs go on. The first test measures the host itself (`calibrate --host --np 2`), the
// second is given a profile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "testing/html_page.h"

namespace pentamesh {
namespace {

std::string TuneCommand(const std::string& dir, const std::string& extra) {
  return fmt::format(
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 "
      "{} tune --config {}/configs/tiny-dense.toml --set model.vocab=512 --set "
      "'data.dataset=\"{}\"' --set train.global_batch_seqs=8 --np 2 --out-dir {} {}",
      PM_BINARY, PM_SOURCE_DIR, data::testing::Corpus().dataset, dir, extra);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

TEST(TuneCli, MeasuresThePlannedLayoutsTheBaselineAndOneProcess) {
  const std::string dir = testing::MakeTempDir("tune_cli");
  const testing::CliRun r =
      testing::Shell(TuneCommand(dir, "--top 2 --steps 8 --json --html " + dir + "/tune.html"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& rows = j.at("rows");
  ASSERT_EQ(rows.size(), 4u) << r.out;  // top 2, the FSDP baseline, one process
  EXPECT_EQ(rows[2].at("kind"), "fsdp");
  EXPECT_EQ(rows[3].at("kind"), "single");
  for (const nlohmann::json& row : rows) {
    ASSERT_TRUE(row.contains("measured")) << row.dump();
    const std::vector<nlohmann::json> m = testing::ReadMetrics(row.at("dir"));
    ASSERT_EQ(m.size(), 8u) << row.dump();
    EXPECT_DOUBLE_EQ(row.at("predicted").at("time_s").at("step").get<double>(),
                     m.back().at("predicted").at("time_s").at("step").get<double>());
    std::vector<double> times;
    for (size_t i = 2; i < m.size(); ++i) times.push_back(m[i].at("step_time_s"));  // 8/4 warm-up
    EXPECT_DOUBLE_EQ(row.at("measured").at("step_time_s").get<double>(), Median(times));
    EXPECT_GT(row.at("measured").at("peak_bytes").at("weights").get<double>(), 0);
  }
  EXPECT_EQ(j.at("summary").at("measured_runs"), 4);
  EXPECT_GE(j.at("summary").at("best_predicted_rank").get<int>(), 1);
  // The page: one self-contained file whose charts render in headless Chromium with round ticks,
  // the comparison table listing the baseline.
  const std::string page = testing::ReadFile(dir + "/tune.html");
  EXPECT_NE(page.find("<td>fsdp</td>"), std::string::npos);
  testing::ExpectSelfContained(page);
  const std::string chromium = testing::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  testing::PngInfo png;
  ASSERT_NO_FATAL_FAILURE(
      testing::Screenshot(chromium, dir, dir + "/tune.html", dir + "/tune.png", &png));
  EXPECT_GT(png.colours, 20) << "the screenshot is blank or nearly so";
  auto charts = testing::RenderedCharts(chromium, dir, dir + "/tune.html");
  for (const char* id : {"tune-throughput", "tune-time", "tune-memory"}) {
    ASSERT_TRUE(charts.contains(id)) << id;
    EXPECT_TRUE(charts[id].rendered) << id << ": " << charts[id].error;
    ASSERT_NO_FATAL_FAILURE(testing::ExpectRoundTicks(charts[id].y_ticks, std::string(id) + " y"));
  }
}

TEST(TuneCli, AFailedLayoutIsARowAndTheOthersGoOn) {
  const std::string dir = testing::MakeTempDir("tune_fail");
  const testing::CliRun host =
      testing::Pentamesh(fmt::format("calibrate --host --threads 1 --out {}/host.toml", dir));
  ASSERT_EQ(host.exit_code, 0) << host.out << host.err;
  // Rank 1 kills itself after step 2: every 2-rank run fails, the one-process run (rank 0) not.
  const testing::CliRun r =
      testing::Shell(TuneCommand(dir,
                                 "--top 1 --no-fsdp --steps 4 --set run.debug_kill_step=2 --set "
                                 "run.debug_kill_rank=1 --host-profile " +
                                     dir + "/host.toml"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("FAILED"), std::string::npos) << r.err;  // the progress line
  EXPECT_NE(r.out.find("over 1 runs"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pentamesh

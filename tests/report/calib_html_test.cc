// The `pentamesh validate` page: built from the shipped published runs, it is self-contained and
// its charts (log-log scatter, error bars by group and by GPU count) render in headless Chromium
// with one point per estimated run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "calib/validate.h"
#include "report/calib_html.h"
#include "testing/html_page.h"

namespace pentamesh::report {
namespace {

namespace pt = pentamesh::testing;

TEST(CalibrationPage, ChartsRenderInHeadlessChromium) {
  const std::string runs_path = PM_SOURCE_DIR "/bench/data/published_runs.json";
  auto runs = calib::LoadRuns(runs_path);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  auto shipped = calib::ShippedCalibration();
  ASSERT_TRUE(shipped.ok()) << shipped.status().message();
  const calib::Validation v = calib::ValidateRuns(*runs, *shipped, {});
  ASSERT_FALSE(v.rows.empty());
  const std::string page = CalibrationHtml(v, runs_path);
  pt::ExpectSelfContained(page);
  const std::string chromium = pt::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const std::string dir = ::testing::TempDir() + "/pm_calib_html_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string html = dir + "/validate.html";
  std::ofstream(html) << page;
  auto charts = pt::RenderedCharts(chromium, dir, html);
  for (const char* id : {"calib-scatter", "calib-groups", "calib-gpus"}) {
    ASSERT_TRUE(charts.contains(id)) << id;
    EXPECT_TRUE(charts[id].rendered) << id << ": " << charts[id].error;
  }
  const pt::RenderedChart& scatter = charts["calib-scatter"];
  ASSERT_NO_FATAL_FAILURE(pt::ExpectLogTicks(scatter.x_ticks, "scatter x"));
  ASSERT_NO_FATAL_FAILURE(pt::ExpectLogTicks(scatter.y_ticks, "scatter y"));
  // One hover point per estimated run (with tokens/s > 0), plus two per dashed reference line.
  size_t points = 0;
  for (const auto& r : v.rows) {
    points += r.run->tokens_per_s_gpu > 0 && r.shipped.tokens_per_s_gpu > 0;
  }
  EXPECT_EQ(static_cast<size_t>(scatter.symbols), points + 6);
  ASSERT_NO_FATAL_FAILURE(pt::ExpectRoundTicks(charts["calib-groups"].y_ticks, "groups y"));
  EXPECT_EQ(charts["calib-groups"].x_ticks.size(), v.groups.size());
}

}  // namespace
}  // namespace pentamesh::report

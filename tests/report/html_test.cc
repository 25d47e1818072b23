// The HTML report: self-contained (no script, no network), every section present, and it renders
// in headless Chromium to a non-blank screenshot.
#include "report/html.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "plan/baseline.h"
#include "plan/scale.h"
#include "testing/tiny_specs.h"

namespace pentamesh::report {
namespace {

namespace pt = pentamesh::testing;

PlanReport TinyReport() {
  const auto model = pt::PlannerMoe();
  const auto cluster = pt::PlannerCluster(4, 4, pt::kHbmGbMoe);
  const auto train = pt::Train(8192, 16);
  plan::SearchOptions options;
  options.cost = pt::TestCostParams();
  options.top_k = 5;
  const auto result = plan::Search(model, cluster, train, options);
  PM_CHECK(result.ok() && !result->top.empty());
  PlanReport r;
  r.model = "tiny-moe <&>";  // escaped in the page
  r.cluster = cluster.name;
  r.train = train.name;
  r.gpus = cluster.gpus();
  r.top = result->top;
  r.counts = result->counts;
  r.search_seconds = result->seconds;
  r.baseline = *plan::CompareWithFsdp(model, cluster, train, result->top.front(), options);
  r.scale = *plan::Scale(model, cluster, train, {4, 8, 16}, options);
  r.sweep = *plan::Sweep({pt::PlannerDense(), model}, cluster, train, {1, 2, 4}, options);
  return r;
}

TEST(Html, SelfContainedWithEverySection) {
  const std::string html = RenderHtml(TinyReport());
  for (const char* part : {"Best layout and runners-up", "Memory per GPU by component",
                           "Step time by term", "FSDP baseline vs best layout", "Scaling",
                           "Sweep: best MFU", "<svg", "tiny-moe &lt;&amp;&gt;"}) {
    EXPECT_NE(html.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("tiny-moe <&>"), std::string::npos);
  // The only URL is the SVG namespace (an identifier, never fetched).
  size_t pos = 0;
  while ((pos = html.find("http", pos)) != std::string::npos) {
    EXPECT_EQ(html.compare(pos, 26, "http://www.w3.org/2000/svg"), 0) << html.substr(pos, 40);
    ++pos;
  }
}

TEST(Html, WriteErrorNamesThePath) {
  const auto status = WriteHtml(PlanReport{}, "/no/such/dir/report.html");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/no/such/dir/report.html"), std::string::npos);
}

std::string FindChromium() {
  for (const char* name : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(name)) return name;
  }
  return "";
}

TEST(Html, RendersInHeadlessChromium) {
  const std::string chromium = FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const std::string dir = ::testing::TempDir() + "/pm_html_test";
  std::filesystem::create_directories(dir);
  const std::string html = dir + "/report.html", png = dir + "/report.png";
  std::filesystem::remove(png);
  ASSERT_TRUE(WriteHtml(TinyReport(), html).ok());
  const std::string cmd = "cd " + dir + " && timeout 120 " + chromium +
                          " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                          "--user-data-dir=" +
                          dir + "/profile --screenshot=" + png +
                          " --window-size=1280,2000 file://" + html + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(std::filesystem::exists(png));
  EXPECT_GT(std::filesystem::file_size(png), 20000u);
  const std::string check = "/usr/bin/python3 " PM_SOURCE_DIR "/tests/report/png_check.py " + png;
  FILE* pipe = popen(check.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  int width = 0, height = 0, colours = 0;
  ASSERT_EQ(fscanf(pipe, "%d %d %d", &width, &height, &colours), 3);
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_EQ(width, 1280);
  EXPECT_EQ(height, 2000);
  EXPECT_GT(colours, 20) << "the screenshot is blank or nearly so";
}

}  // namespace
}  // namespace pentamesh::report

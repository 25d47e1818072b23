// The HTML report: self-contained (no script, no network), every section present, and it renders
// in headless Chromium to a non-blank screenshot.
#include "report/html.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/check.h"
#include "cost/goodput.h"
#include "plan/baseline.h"
#include "plan/scale.h"
#include "testing/html_page.h"
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
  EXPECT_EQ(html.find("tiny-moe <&>"), std::string::npos);
  pt::ExpectSelfContained(html);
}

// With the plan's goodput, the best box and the table show days with and without failures.
TEST(Html, DaysWithAndWithoutFailures) {
  PlanReport r = TinyReport();
  const std::string without = RenderHtml(r);
  EXPECT_EQ(without.find("days with failures"), std::string::npos);
  cost::GoodputParams p;
  p.rates.per_gpu_day[static_cast<size_t>(cost::FailureKind::kHardware)] = 0.5;
  const spec::ClusterSpec cluster = pt::PlannerCluster(4, 4, pt::kHbmGbMoe);
  for (const cost::Estimate& e : r.top) r.goodput.push_back(cost::EstimateGoodput(cluster, e, p));
  const cost::Goodput& g = r.goodput.front();
  ASSERT_TRUE(g.progresses);
  ASSERT_GT(g.days, r.top.front().days);
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<th>days with failures</th>"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("{:.1f} days, USD {:.3g} without failures", r.top.front().days,
                                  r.top.front().cost_usd)),
            std::string::npos);
  EXPECT_NE(html.find(fmt::format("with failures: {:.1f} days ({:.1f} lost)", g.days, g.days_lost)),
            std::string::npos)
      << html;
}

TEST(Html, WriteErrorNamesThePath) {
  const auto status = WriteHtml(PlanReport{}, "/no/such/dir/report.html");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/no/such/dir/report.html"), std::string::npos);
}

TEST(Html, RendersInHeadlessChromium) {
  const std::string chromium = pt::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const std::string dir = ::testing::TempDir() + "/pm_html_test";
  std::filesystem::create_directories(dir);
  const std::string html = dir + "/report.html", png = dir + "/report.png";
  std::filesystem::remove(png);
  ASSERT_TRUE(WriteHtml(TinyReport(), html).ok());
  pt::PngInfo png_info;
  ASSERT_NO_FATAL_FAILURE(pt::Screenshot(chromium, dir, html, png, &png_info));
  EXPECT_GT(png_info.bytes, 20000u);
  EXPECT_EQ(png_info.width, 1280);
  EXPECT_EQ(png_info.height, 2000);
  EXPECT_GT(png_info.colours, 20) << "the screenshot is blank or nearly so";
}

}  // namespace
}  // namespace pentamesh::report

// The HTML report: self-contained (inline scripts only, no network), every section present, its
// charts report/chart.h's stacks of the estimates' numbers, and it renders in headless Chromium.
#include "report/html.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include <fmt/format.h>

#include "core/check.h"
#include "cost/goodput.h"
#include "plan/baseline.h"
#include "plan/scale.h"
#include "report/chart.h"
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
  for (const char* part :
       {"Best layout and runners-up", "Memory per GPU by component", "Step time by term",
        "FSDP baseline vs best layout", "Scaling", "Sweep: best MFU", "tiny-moe &lt;&amp;&gt;",
        "pmChart(\"plan-memory\")", "pmChart(\"plan-time\")", "pmChart(\"plan-scale\")",
        "pmChart(\"plan-sweep\")", "<th>scaling efficiency</th>"}) {
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

// The estimates the page charts, by bar label, in its order: the top six and the FSDP baseline.
std::vector<std::pair<std::string, const cost::Estimate*>> Charted(const PlanReport& r) {
  std::vector<std::pair<std::string, const cost::Estimate*>> out;
  for (size_t i = 0; i < r.top.size() && i < 6; ++i) {
    out.emplace_back(fmt::format("#{} {}", i + 1, spec::ShortLayout(r.top[i].layout)), &r.top[i]);
  }
  out.emplace_back("FSDP " + spec::ShortLayout(r.baseline->fsdp.layout), &r.baseline->fsdp);
  return out;
}

// The step-time and memory charts are report/chart.h's horizontal stacks of the estimates' own
// numbers: one segment per non-zero entry of cost::kTimeTerms / kMemoryCategories in list order,
// colour i = ChartColor(i) (a list longer than the palette cycles it, never reads past it), the
// step and the capacity as ticks, and the label after each stack the step or the sum over the list.
TEST(Html, ChartsWalkTheTermAndCategoryLists) {
  const PlanReport r = TinyReport();
  const std::string html = RenderHtml(r);
  struct Case {
    const char* id;
    std::vector<std::string> names;
    std::vector<double> (*values)(const cost::Estimate&);
    std::string (*label)(const cost::Estimate&);
    double (*tick)(const cost::Estimate&);
  };
  std::vector<std::string> terms, categories;
  for (const cost::TimeTerm& t : cost::kTimeTerms) terms.push_back(t.name);
  for (const cost::MemoryCategory& c : cost::kMemoryCategories) categories.push_back(c.label);
  const Case cases[] = {
      {"plan-time", terms,
       [](const cost::Estimate& e) {
         std::vector<double> v;
         for (const cost::TimeTerm& t : cost::kTimeTerms) v.push_back(e.time.*t.field);
         return v;
       },
       [](const cost::Estimate& e) { return fmt::format("{:.2f} s", e.time.step); },
       [](const cost::Estimate& e) { return e.time.step; }},
      {"plan-memory", categories,
       [](const cost::Estimate& e) {
         std::vector<double> v;
         for (const cost::MemoryCategory& c : cost::kMemoryCategories) {
           v.push_back(e.memory.*c.field / 1e9);
         }
         return v;
       },
       // The memory total is the sum over the categories (cost/stage.cc), so the label is too.
       [](const cost::Estimate& e) { return fmt::format("{:.1f} GB", e.memory.total / 1e9); },
       [](const cost::Estimate& e) { return e.memory.capacity / 1e9; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    const nlohmann::json spec = testing::ChartSpec(html, c.id);
    ASSERT_TRUE(spec.is_object());
    const nlohmann::json& color = spec["scales"][2];
    ASSERT_EQ(color["name"], "color");
    for (size_t i = 0; i < c.names.size(); ++i) {
      EXPECT_EQ(color["domain"][i], c.names[i]);
      EXPECT_EQ(color["range"][i], ChartColor(i));
    }
    std::map<std::string, std::vector<const nlohmann::json*>> rows;  // by bar label
    for (const nlohmann::json& row : spec["data"][0]["values"]) rows[row["g"]].push_back(&row);
    for (const auto& [label, e] : Charted(r)) {
      if (std::string(c.id) == "plan-time" && !e->fits) {
        EXPECT_FALSE(rows.contains(label)) << "a layout that does not run has no step time";
        continue;
      }
      ASSERT_TRUE(rows.contains(label)) << label;
      const std::vector<double> values = c.values(*e);
      size_t seg = 0;
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] == 0) continue;
        ASSERT_LT(seg, rows[label].size());
        const nlohmann::json& row = *rows[label][seg++];
        EXPECT_EQ(row["k"], "s");
        EXPECT_EQ(row["part"], c.names[i]);
        EXPECT_DOUBLE_EQ(row["v"].get<double>(), values[i]) << c.names[i];
      }
      ASSERT_EQ(rows[label].size(), seg + 2);  // the tick and the label follow the segments
      EXPECT_EQ((*rows[label][seg])["k"], "m");
      EXPECT_DOUBLE_EQ((*rows[label][seg])["v"].get<double>(), c.tick(*e));
      EXPECT_EQ((*rows[label][seg + 1])["lt"].get<std::string>().substr(0, c.label(*e).size()),
                c.label(*e));
    }
  }
}

// In the browser, each segment's width is its term's share: width = value x the chart's pixels
// per second, for every segment of every stack (checked against the estimates' own numbers).
TEST(Html, StepTimeBarWidthsAreTheTermsInHeadlessChromium) {
  const std::string chromium = pt::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const std::string dir = ::testing::TempDir() + "/pm_html_widths_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const PlanReport r = TinyReport();
  const std::string html = dir + "/report.html";
  ASSERT_TRUE(WriteHtml(r, html).ok());
  auto charts = pt::RenderedCharts(chromium, dir, html);
  for (const char* id : {"plan-memory", "plan-time", "plan-scale", "plan-sweep"}) {
    EXPECT_TRUE(charts[id].rendered) << id << ": " << charts[id].error;
  }
  std::vector<double> seconds;  // every drawn segment's term, in document order
  for (const auto& [label, e] : Charted(r)) {
    if (!e->fits) continue;
    for (const cost::TimeTerm& t : cost::kTimeTerms) {
      if (e->time.*t.field != 0) seconds.push_back(e->time.*t.field);
    }
  }
  ASSERT_GT(seconds.size(), Charted(r).size()) << "the stacks should have several terms";
  const std::vector<double>& widths = charts["plan-time"].rect_widths;
  ASSERT_EQ(widths.size(), seconds.size());
  double width_sum = 0, seconds_sum = 0;
  for (size_t i = 0; i < widths.size(); ++i) width_sum += widths[i], seconds_sum += seconds[i];
  ASSERT_GT(seconds_sum, 0);
  const double px_per_s = width_sum / seconds_sum;
  for (size_t i = 0; i < widths.size(); ++i) {
    EXPECT_NEAR(widths[i], seconds[i] * px_per_s, 1e-6 * width_sum) << "segment " << i;
  }
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

// report/chart.h: the fragment carries its data as escaped JSON, and in headless Chromium every
// chart kind really renders (no network): round tick steps, a fitted loss axis that does not start
// at 0, bars from 0, one SVG item per point or segment, and the series' colour drawn inside the
// chart's box on the screenshot.
#include "report/chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "report/svg.h"
#include "testing/html_page.h"

namespace pentamesh::report {
namespace {

namespace pt = pentamesh::testing;
using Points = std::vector<std::pair<double, double>>;

// A loss curve like a short run's: above 2 everywhere, from 4.779 down to 2.39 over steps 1..12
// (the old hand-placed axis ticked it at 3.75 / 6.5 / 9.25 steps, from 0 nats).
Points LossCurve() {
  Points p;
  for (int step = 1; step <= 12; ++step) p.emplace_back(step, 2.39 + 2.389 / step);
  return p;
}

TEST(Chart, DataReachesThePageAsEscapedJson) {
  XyChart c("loss", ChartAxis("step"), ChartAxis("loss"));
  c.series.emplace_back("</script><b>train", LossCurve());
  c.series.emplace_back("empty", Points{{1, NAN}, {2, INFINITY}});
  const std::string html = XyChartHtml(c);
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_NE(html.find("<script>pmChart(\"loss\")</script>"), std::string::npos);
  const nlohmann::json spec = testing::ChartSpec(html, "loss");
  ASSERT_EQ(spec["data"].size(), 2u);
  ASSERT_EQ(spec["data"][0]["values"].size(), 12u);
  EXPECT_EQ(spec["data"][0]["values"][0]["s"], "</script><b>train");
  EXPECT_DOUBLE_EQ(spec["data"][0]["values"][11]["y"].get<double>(), 2.39 + 2.389 / 12);
  EXPECT_TRUE(spec["data"][1]["values"].empty());  // non-finite points are left out
  // The fitted helper scale spans the data, nice, without 0.
  const nlohmann::json& yfit = spec["scales"][2];
  EXPECT_EQ(yfit["name"], "yfit");
  EXPECT_DOUBLE_EQ(yfit["domain"][0].get<double>(), 2.39 + 2.389 / 12);
  EXPECT_DOUBLE_EQ(yfit["domain"][1].get<double>(), 2.39 + 2.389);
  EXPECT_EQ(yfit["zero"], false);
  EXPECT_EQ(yfit["nice"], true);
}

TEST(Chart, FlatAndEmptySeries) {
  XyChart flat("flat", ChartAxis("step"), ChartAxis("lr"));
  flat.series.emplace_back("lr", Points{{1, 0.001}, {2, 0.001}});
  const nlohmann::json spec = testing::ChartSpec(XyChartHtml(flat), "flat");
  EXPECT_DOUBLE_EQ(spec["scales"][2]["domain"][0].get<double>(), 0.0009);
  EXPECT_DOUBLE_EQ(spec["scales"][2]["domain"][1].get<double>(), 0.0011);
  XyChart none("none", ChartAxis("step"), ChartAxis("lr"));
  none.series.emplace_back("lr", Points{});
  EXPECT_NE(XyChartHtml(none).find("No data to plot"), std::string::npos);
}

TEST(Chart, StackedBarsStackInPartOrder) {
  StackedBarChart c("mem", "layout", {"weights", "grads"}, ChartAxis("bytes", kFormatSi));
  c.bars.emplace_back("dp2", "predicted", std::vector<double>{100, 50});
  c.bars.emplace_back("dp2", "measured", std::vector<double>{110, NAN});
  const nlohmann::json rows =
      testing::ChartSpec(StackedBarChartHtml(c), "mem")["data"][0]["values"];
  ASSERT_EQ(rows.size(), 5u);  // 3 segments + 2 totals
  EXPECT_EQ(rows[1]["part"], "grads");
  EXPECT_DOUBLE_EQ(rows[1]["y0"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(rows[1]["y1"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(rows[2]["t"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(rows[4]["t"].get<double>(), 110);
}

// Horizontal stacks: a stack past value_max is cut there (its hover keeps the true values) and
// labelled in red with " >>"; the ticks and the labels sit after the cut stack.
TEST(Chart, HorizontalStacksCutAtTheBound) {
  StackedBarChart c("hmem", "", {"weights", "grads"}, ChartAxis("GB"));
  c.horizontal = true;
  c.ticks.emplace_back("capacity", "#c00", true);
  c.value_max = 60;
  c.bars.emplace_back("small", "", std::vector<double>{10, 20});
  c.bars.back().ticks = {40};
  c.bars.emplace_back("large", "", std::vector<double>{50, 30});
  c.bars.back().ticks = {40};
  c.bars.back().label = "80.0 GB";
  const nlohmann::json spec = testing::ChartSpec(StackedBarChartHtml(c), "hmem");
  const nlohmann::json rows = spec["data"][0]["values"];
  ASSERT_EQ(rows.size(), 8u);  // per stack: 2 segments, 1 tick, 1 label
  EXPECT_DOUBLE_EQ(rows[1]["y1"].get<double>(), 30);
  EXPECT_EQ(rows[3]["over"], false);
  EXPECT_DOUBLE_EQ(rows[3]["y1"].get<double>(), 40);  // after the tick
  EXPECT_DOUBLE_EQ(rows[5]["v"].get<double>(), 30);   // the cut segment keeps its value
  EXPECT_DOUBLE_EQ(rows[5]["y0"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(rows[5]["y1"].get<double>(), 60);
  EXPECT_EQ(rows[6]["dash"], nlohmann::json::array({5, 3}));
  EXPECT_EQ(rows[7]["over"], true);
  EXPECT_EQ(rows[7]["lt"], "80.0 GB >>");
  EXPECT_EQ(spec["scales"][2]["domain"], nlohmann::json::array({"weights", "grads", "capacity"}));
  EXPECT_EQ(spec["scales"][2]["range"][2], "#c00");
}

TEST(Chart, HeatmapCellsCarryValueAndText) {
  HeatmapChart c("heat", {"dense", "moe"}, {"1 node", "2 nodes"});
  c.value_max = 0.6;
  c.cells = {{{0.5, {"50.0%", "tp1"}, "a"}, {0.1, {"10.0%"}, "b"}},
             {{NAN, {"does not fit"}, "why"}, {0.3, {}, ""}}};
  const nlohmann::json cells = testing::ChartSpec(HeatmapChartHtml(c), "heat")["data"][0]["values"];
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0]["fg"], "#fff");  // above the middle of the colour scale
  EXPECT_EQ(cells[1]["fg"], "#222");
  EXPECT_FALSE(cells[2].contains("v"));  // no value: grey, red text
  EXPECT_EQ(cells[2]["fg"], "#c00");
  EXPECT_EQ(cells[2]["t1"], "does not fit");
  EXPECT_EQ(cells[0]["t2"], "tp1");
}

// One page with every chart kind, as the tune page will use them.
std::string TestPage() {
  XyChart loss("loss", ChartAxis("step"), ChartAxis("loss (nats)"));
  loss.series.emplace_back("train loss", LossCurve(), SeriesStyle::kLine, "#4e79a7");
  loss.series.emplace_back("eval loss", Points{{4, 3.1}, {8, 2.8}, {12, 2.7}});
  BarChart tps("throughput", "layout", {"fsdp dp4", "tp2 dp2", "pp2 dp2"},
               ChartAxis("tokens/s", kFormatSi));
  tps.series.emplace_back("predicted", std::vector<double>{1234, 2345, NAN}, "#f28e2b");
  tps.series.emplace_back("measured", std::vector<double>{1100, 2500, 1900}, "#59a14f");
  StackedBarChart mem("memory", "layout", {"weights", "grads", "optimizer"},
                      ChartAxis("bytes per rank", kFormatSi));
  mem.colors = {"#4e79a7", "#e15759", "#76b7b2"};
  for (const char* layout : {"fsdp dp4", "tp2 dp2"}) {
    mem.bars.emplace_back(layout, "predicted", std::vector<double>{4e6, 4e6, 8e6});
    mem.bars.emplace_back(layout, "measured", std::vector<double>{4.1e6, 3.9e6, 8.3e6});
  }
  XyChart scatter("scatter", ChartAxis("measured", kFormatSi), ChartAxis("predicted", kFormatSi));
  scatter.x.log = scatter.y.log = true;
  scatter.series.emplace_back("runs", Points{{900, 1000}, {3e4, 2.5e4}, {2e5, 2.2e5}},
                              SeriesStyle::kPoints, "#b07aa1");
  scatter.series.back().labels = {"a", "b", "c"};
  return std::string("<!DOCTYPE html><html><head><meta charset=\"utf-8\">") + kPageStyle +
         ChartLibraryScript() + "</head><body>" + XyChartHtml(loss) + BarChartHtml(tps) +
         StackedBarChartHtml(mem) + XyChartHtml(scatter) + "</body></html>\n";
}

TEST(Chart, PageIsSelfContained) { pt::ExpectSelfContained(TestPage()); }

TEST(Chart, EveryKindRendersInHeadlessChromium) {
  const std::string chromium = pt::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const std::string dir = ::testing::TempDir() + "/pm_chart_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string html = dir + "/charts.html";
  std::ofstream(html) << TestPage();
  auto charts = pt::RenderedCharts(chromium, dir, html);
  ASSERT_EQ(charts.size(), 4u);
  for (const auto& [id, c] : charts) {
    EXPECT_TRUE(c.rendered) << id << ": " << c.error;
    EXPECT_FALSE(c.box.empty()) << id;
    if (id == "scatter") {
      ASSERT_NO_FATAL_FAILURE(pt::ExpectLogTicks(c.x_ticks, id + " x"));
      ASSERT_NO_FATAL_FAILURE(pt::ExpectLogTicks(c.y_ticks, id + " y"));
    } else {
      ASSERT_NO_FATAL_FAILURE(pt::ExpectRoundTicks(c.y_ticks, id + " y"));
    }
  }
  const pt::RenderedChart& loss = charts["loss"];
  ASSERT_NO_FATAL_FAILURE(pt::ExpectRoundTicks(loss.x_ticks, "loss x"));
  EXPECT_GE(pt::TickValue(loss.y_ticks.front()), 2.0) << "the loss axis must not start at 0";
  EXPECT_LE(pt::TickValue(loss.y_ticks.front()), 2.39 + 2.389 / 12);
  EXPECT_GE(pt::TickValue(loss.y_ticks.back()), 2.39 + 2.389);
  EXPECT_EQ(pt::TickValue(loss.x_ticks.front()), 1);
  EXPECT_EQ(pt::TickValue(loss.x_ticks.back()), 12);
  EXPECT_EQ(loss.lines, 2);
  EXPECT_EQ(loss.symbols, 15);               // one hover point per data point
  EXPECT_EQ(charts["throughput"].rects, 5);  // the NaN is no bar
  EXPECT_EQ(pt::TickValue(charts["throughput"].y_ticks.front()), 0);
  EXPECT_EQ(charts["throughput"].x_ticks,
            (std::vector<std::string>{"fsdp dp4", "tp2 dp2", "pp2 dp2"}));
  EXPECT_EQ(charts["memory"].rects, 12);
  EXPECT_EQ(pt::TickValue(charts["memory"].y_ticks.front()), 0);
  EXPECT_EQ(charts["scatter"].symbols, 3);
  // Pixels: each chart's series colour is drawn inside its box.
  pt::PngInfo png;
  ASSERT_NO_FATAL_FAILURE(pt::Screenshot(chromium, dir, html, dir + "/charts.png", &png));
  const std::vector<std::pair<std::string, std::string>> colour_of = {{"loss", "#4e79a7"},
                                                                      {"throughput", "#59a14f"},
                                                                      {"memory", "#e15759"},
                                                                      {"scatter", "#b07aa1"}};
  std::vector<std::pair<std::string, std::string>> queries;
  for (const auto& [id, colour] : colour_of) queries.emplace_back(charts[id].box, colour);
  const std::vector<int> pixels = pt::ColourPixels(dir + "/charts.png", queries);
  ASSERT_EQ(pixels.size(), queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    EXPECT_GT(pixels[i], 40) << colour_of[i].first << ": no " << queries[i].second
                             << " pixels in its box " << queries[i].first;
  }
}

// The mouse wheel zooms: a wheel event over the loss chart's centre narrows the x axis around the
// pointer, and the ticks stay round.
TEST(Chart, WheelZoomsInHeadlessChromium) {
  const std::string chromium = pt::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const std::string dir = ::testing::TempDir() + "/pm_chart_zoom_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  XyChart loss("loss", ChartAxis("step"), ChartAxis("loss (nats)"));
  loss.series.emplace_back("train loss", LossCurve());
  const std::string wheel =
      "<script>setTimeout(function(){var s=document.querySelector('#loss svg'),"
      "r=s.getBoundingClientRect();s.dispatchEvent(new WheelEvent('wheel',{deltaY:-400,"
      "clientX:r.left+r.width/2,clientY:r.top+r.height/2,bubbles:true,cancelable:true}));},"
      "500);</script>";
  const std::string html = dir + "/zoom.html";
  std::ofstream(html) << "<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
                      << ChartLibraryScript() << "</head><body>" << XyChartHtml(loss) << wheel
                      << "</body></html>\n";
  auto charts = pt::RenderedCharts(chromium, dir, html);
  ASSERT_TRUE(charts["loss"].rendered) << charts["loss"].error;
  const std::vector<std::string>& x = charts["loss"].x_ticks;
  ASSERT_NO_FATAL_FAILURE(pt::ExpectRoundTicks(x, "zoomed x"));
  EXPECT_GT(pt::TickValue(x.front()), 1) << "the wheel did not zoom in";
  EXPECT_LT(pt::TickValue(x.back()), 12) << "the wheel did not zoom in";
  ASSERT_NO_FATAL_FAILURE(pt::ExpectRoundTicks(charts["loss"].y_ticks, "zoomed y"));
}

}  // namespace
}  // namespace pentamesh::report

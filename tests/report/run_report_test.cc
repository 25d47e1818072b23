// The run report: a hand-written metrics.jsonl gives a self-contained page with every section and
// the numbers from the file; malformed input is an error naming the file and line; the CLI's exit
// codes; and the page renders in headless Chromium to a non-blank screenshot whose charts ran.
#include "report/run_report.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cost/cost.h"
#include "report/chart.h"
#include "testing/html_page.h"

namespace pentamesh::report {
namespace {

std::string Line(int step, double loss, double tps, bool moe, bool eval) {
  std::string s = "{\"step\":" + std::to_string(step) + ",\"loss\":" + std::to_string(loss) +
                  ",\"ce_loss\":1.0,\"lr\":0.001,\"grad_norm\":0.5,\"tokens\":256,"
                  "\"step_time_s\":0.25,\"tokens_per_s\":" +
                  std::to_string(tps) +
                  ",\"mfu\":0.125,\"peak_bytes\":{\"weights\":4000,\"grads\":4000,\"optimizer\":"
                  "8000,\"activations\":12345,\"logits\":1000,\"comm\":0,\"other\":0,\"total\":"
                  "29345}";
  if (moe) {
    s += ",\"aux_loss\":0.01,\"z_loss\":0.0,\"tokens_per_expert\":[" + std::to_string(100 + step) +
         ",90,70],\"expert_load_imbalance\":1.375,\"dropped_tokens\":0";
  }
  if (eval) s += ",\"eval_loss\":3.75";
  s += ",\"predicted\":{\"peak_bytes\":{\"weights\":4000,\"grads\":4000,\"optimizer\":8000,"
       "\"activations\":11111,\"logits\":1000,\"comm\":0,\"total\":28111},\"flops_per_token\":1e6,"
       "\"time_s\":{\"compute\":0.1,\"optimizer\":0.01,\"step\":0.11},\"mfu\":0.2}}";
  return s + "\n";
}

std::string Metrics(bool moe) {
  std::string text;
  for (int step = 1; step <= 4; ++step)
    text += Line(step, 5.0 - step * 0.5, 1000 + step, moe, step == 4);
  return text;
}

// Step time by term: the prediction's terms next to the measured collectives, the rest as compute
// (medians over steps 2-4: the first quarter of 4 steps is step 1).
TEST(RunReport, StepTimePredictedNextToMeasuredPerTerm) {
  std::string text;
  for (int step = 1; step <= 4; ++step) {
    std::string line = Line(step, 4.0, 1000, false, false);
    line.replace(line.find("\"time_s\":{"), 10,
                 "\"time_s\":{\"dp\":0.02,\"tp\":0.03,\"bubble\":0.0,");
    line.insert(line.rfind('}'),
                fmt::format(",\"comm_time_s\":{{\"dp\":{},\"tp\":0.04}}", step == 1 ? 0.2 : 0.05));
    text += line;
  }
  auto run = ParseRunMetrics(text, "metrics.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().message();
  const std::string html = RenderRunHtml(*run);
  for (const char* part :
       {"Step time: predicted vs measured per term", "Median over steps 2-4",
        "<td class=l>compute</td><td>0.1000</td><td>0.1600</td>",
        "<td class=l>tp</td><td>0.0300</td><td>0.0400</td>",
        "<td class=l>dp</td><td>0.0200</td><td>0.0500</td>", "pmChart(\"time\")"}) {
    EXPECT_NE(html.find(part), std::string::npos) << part;
  }
  // compute, tp, dp, bubble, optimizer in cost::kTimeTerms order.
  EXPECT_LT(html.find("<td class=l>compute</td>"), html.find("<td class=l>tp</td>"));
  EXPECT_LT(html.find("<td class=l>tp</td>"), html.find("<td class=l>dp</td>"));
  std::string bad = text;
  bad.replace(bad.find("\"dp\":0.2"), 8, "\"dp\":-1.0");
  auto error = ParseRunMetrics(bad, "metrics.jsonl");
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.status().message().find("metrics.jsonl:1: 'comm_time_s.dp' must be a "
                                          "non-negative number"),
            std::string::npos)
      << error.status().message();
}

TEST(RunReport, PageHasEveryChartAndTheNumbers) {
  auto run = ParseRunMetrics(Metrics(/*moe=*/true), "run/<metrics>.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->steps.size(), 4u);
  EXPECT_EQ(run->steps[3].eval_loss, 3.75);
  EXPECT_EQ(run->steps[0].tokens_per_expert, (std::vector<double>{101, 90, 70}));
  const std::string html = RenderRunHtml(*run);
  for (const char* part : {"<h2>Loss</h2>",
                           "train loss",
                           "eval loss",
                           "<h2>Throughput</h2>",
                           "tokens/s",
                           "Memory: measured vs predicted",
                           "predicted (cost model)",
                           "12345",
                           "11111",
                           "29345",
                           "28111",
                           "expert load imbalance",
                           "tokens per expert",
                           "expert 2",
                           "pmChart(\"loss\")",
                           "<rect",
                           "final loss 3.0000",
                           "last eval loss 3.7500",
                           "4 steps logged",
                           "run/&lt;metrics&gt;.jsonl"}) {
    EXPECT_NE(html.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(html.find("run/<metrics>"), std::string::npos);
  testing::ExpectSelfContained(html);
}

TEST(RunReport, DenseRunHasNoMoeSection) {
  auto run = ParseRunMetrics(Metrics(/*moe=*/false), "m.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().message();
  const std::string html = RenderRunHtml(*run);
  EXPECT_EQ(html.find("MoE"), std::string::npos);
  EXPECT_NE(html.find("<h2>Loss</h2>"), std::string::npos);
}

TEST(RunReport, ErrorsNameFileAndLine) {
  const std::string good = Line(1, 4.0, 1000, false, false);
  auto bad_json = ParseRunMetrics(good + "\n" + "{\"step\": 2, \"loss\":\n", "x/metrics.jsonl");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.status().message().find("x/metrics.jsonl:3: malformed JSON"),
            std::string::npos)
      << bad_json.status().message();
  auto missing = ParseRunMetrics(good + "{\"step\":2}\n", "m.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("m.jsonl:2: missing required key 'loss'"),
            std::string::npos)
      << missing.status().message();
  auto wrong_type = ParseRunMetrics("{\"step\":\"one\"}\n", "m.jsonl");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("m.jsonl:1: 'step' must be an integer"),
            std::string::npos);
  auto not_object = ParseRunMetrics("[1,2]\n", "m.jsonl");
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.status().message().find("m.jsonl:1:"), std::string::npos);
  auto empty = ParseRunMetrics("", "e.jsonl");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("e.jsonl"), std::string::npos);
  EXPECT_FALSE(ParseRunMetrics("\n  \n", "e.jsonl").ok());
  auto no_dir = LoadRunMetrics("/no/such/run");
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find("/no/such/run/metrics.jsonl"), std::string::npos);
}

TEST(RunReport, NullLossFromADivergedRunIsSkippedNotAnError) {
  std::string text = Line(1, 4.0, 1000, false, false);
  std::string nan_line = Line(2, 4.0, 1000, false, false);
  nan_line.replace(nan_line.find("\"loss\":"), 15, "\"loss\":null    ");
  auto run = ParseRunMetrics(text + nan_line, "m.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(std::isnan(run->steps[1].loss));
  EXPECT_EQ(RenderRunHtml(*run).find("nan,"), std::string::npos);
}

std::string TempDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

int RunCli(const std::string& args) {
  const std::string cmd = std::string(PM_BINARY) + " report " + args + " 2>/dev/null >/dev/null";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(RunReport, CliExitCodes) {
  const std::string dir = TempDir("pm_run_report_cli");
  std::ofstream(dir + "/metrics.jsonl") << Metrics(true);
  EXPECT_EQ(RunCli("--run " + dir + " --html " + dir + "/r.html"), 0);
  ASSERT_TRUE(std::filesystem::exists(dir + "/r.html"));
  EXPECT_GT(std::filesystem::file_size(dir + "/r.html"), 5000u);
  EXPECT_EQ(RunCli("--run " + dir + " --html /no/such/dir/r.html"), 2);
  std::ofstream(dir + "/trace.json")
      << R"({"traceEvents":[{"name":"F0","cat":"F","ph":"X","pid":0,"tid":0,"ts":5,"dur":2}]})";
  EXPECT_EQ(RunCli("--run " + dir + " --html " + dir + "/t.html --trace " + dir + "/trace.json"),
            0);
  std::ifstream traced(dir + "/t.html");
  std::stringstream traced_text;
  traced_text << traced.rdbuf();
  EXPECT_NE(traced_text.str().find("Trace: the pipeline as it ran"), std::string::npos);
  EXPECT_EQ(RunCli("--run " + dir + " --html " + dir + "/u.html --trace " + dir + "/none.json"), 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/u.html"));
  EXPECT_EQ(RunCli("--run " + dir + "/missing --html " + dir + "/x.html"), 2);
  std::ofstream(dir + "/metrics.jsonl") << "{not json\n";
  EXPECT_EQ(RunCli("--run " + dir + " --html " + dir + "/y.html"), 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/y.html"));
  EXPECT_NE(RunCli("--html " + dir + "/z.html"), 0);  // --run is required
}

// A term keeps its colour across pages: the run page's time chart colours each term by its index in
// cost::kTimeTerms (the plan page's colours), not by its place among the terms the run logged.
TEST(RunReport, TermColoursAreThoseOfTheTermList) {
  std::string text;
  for (int step = 1; step <= 4; ++step) {
    std::string line = Line(step, 4.0, 1000, false, false);
    line.replace(line.find("\"time_s\":{"), 10, "\"time_s\":{\"dp\":0.02,\"bubble\":0.0,");
    text += line;
  }
  auto run = ParseRunMetrics(text, "metrics.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().message();
  const nlohmann::json spec = testing::ChartSpec(RenderRunHtml(*run), "time");
  ASSERT_TRUE(spec.is_object());
  const nlohmann::json* color = nullptr;
  for (const nlohmann::json& scale : spec["scales"]) {
    if (scale["name"] == "color") color = &scale;
  }
  ASSERT_NE(color, nullptr);
  // The run logged compute, dp, bubble and optimizer: four of the list's terms, with gaps.
  const std::vector<std::string> logged = {"compute", "dp", "bubble", "optimizer"};
  ASSERT_EQ((*color)["domain"].size(), logged.size());
  for (size_t i = 0; i < logged.size(); ++i) {
    EXPECT_EQ((*color)["domain"][i], logged[i]);
    size_t index = cost::kTimeTerms.size();
    for (size_t k = 0; k < cost::kTimeTerms.size(); ++k) {
      if (logged[i] == cost::kTimeTerms[k].name) index = k;
    }
    ASSERT_LT(index, cost::kTimeTerms.size()) << logged[i];
    EXPECT_EQ((*color)["range"][i], ChartColor(index)) << logged[i];
  }
}

TEST(RunReport, RendersInHeadlessChromium) {
  const std::string chromium = testing::FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  const std::string dir = TempDir("pm_run_report_png");
  const std::string html = dir + "/run.html", png = dir + "/run.png";
  auto run = ParseRunMetrics(Metrics(true), "metrics.jsonl");
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(WriteRunHtml(*run, html).ok());
  testing::PngInfo png_info;
  ASSERT_NO_FATAL_FAILURE(testing::Screenshot(chromium, dir, html, png, &png_info));
  EXPECT_EQ(png_info.width, 1280);
  EXPECT_GT(png_info.colours, 20) << "the screenshot is blank or nearly so";
  // The charts ran: every one rendered, with round ticks; the loss axis (losses 4.5 .. 3.0) is
  // fitted, not from 0; the train loss's colour is drawn inside the loss chart.
  auto charts = testing::RenderedCharts(chromium, dir, html);
  for (const char* id :
       {"loss", "lr", "throughput", "memory", "time", "expert-imbalance", "aux-loss"}) {
    ASSERT_TRUE(charts.contains(id)) << id;
    EXPECT_TRUE(charts[id].rendered) << id << ": " << charts[id].error;
    ASSERT_NO_FATAL_FAILURE(testing::ExpectRoundTicks(charts[id].y_ticks, std::string(id) + " y"));
  }
  const testing::RenderedChart& loss = charts["loss"];
  ASSERT_NO_FATAL_FAILURE(testing::ExpectRoundTicks(loss.x_ticks, "loss x"));
  EXPECT_GE(testing::TickValue(loss.y_ticks.front()), 2.0) << "the loss axis starts at 0";
  EXPECT_LE(testing::TickValue(loss.y_ticks.front()), 3.0);
  EXPECT_GE(testing::TickValue(loss.y_ticks.back()), 4.5);
  EXPECT_EQ(loss.lines, 2);
  const std::vector<int> pixels = testing::ColourPixels(png, {{loss.box, ChartColor(0)}});
  ASSERT_EQ(pixels.size(), 1u);
  EXPECT_GT(pixels[0], 40) << "no train-loss pixels in the loss chart's box " << loss.box;
}

}  // namespace
}  // namespace pentamesh::report

// Expert load over time in the run report: the heatmap has one cell per expert per step whose
// share and token count (parsed back from the cell titles) are the step's tokens_per_expert, the
// collapse marks sit at exactly the steps where one expert took more than the line's threshold
// (expert_collapse_share, or the engine's own expert_collapse flag) of the routed tokens,
// long runs are averaged into at most max_columns columns, and a real tiny MoE run
// (configs/tiny-moe.toml for a few steps on a slice of the corpus) gives a page whose cells match
// its metrics.jsonl.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "data/fixtures.h"
#include "report/run_report.h"

namespace pentamesh::report {
namespace {

struct Cell {
  int expert = 0;
  int64_t first_step = 0, last_step = 0;
  double share = 0, tokens = 0;
};

std::vector<Cell> ParseCells(const std::string& html) {
  static const std::regex re(
      R"re(<rect class="expert-cell"[^>]*><title>expert (\d+) steps? (\d+)(?:-(\d+))? share (\S+) tokens (\S+)</title>)re");
  std::vector<Cell> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    const int64_t first = std::stoll(m[2]);
    out.push_back({std::stoi(m[1]), first, m[3].matched ? std::stoll(m[3]) : first, std::stod(m[4]),
                   std::stod(m[5])});
  }
  return out;
}

std::vector<int64_t> ParseCollapseSteps(const std::string& html) {
  static const std::regex re(R"re(<rect class="collapse"[^>]*><title>step (\d+):)re");
  std::vector<int64_t> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stoll((*it)[1]));
  }
  return out;
}

std::string Line(int step, const std::vector<int>& tokens) {
  std::string list;
  for (int t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  return fmt::format(
      R"({{"step":{},"loss":3.0,"lr":0.001,"grad_norm":1.0,"tokens_per_s":100,"mfu":0.1,)"
      R"("step_time_s":0.5,"peak_bytes":{{"total":100}},"aux_loss":0.01,)"
      R"("tokens_per_expert":[{}],"expert_load_imbalance":1.0,"dropped_tokens":{}}})"
      "\n",
      step, list, step % 3);
}

TEST(ExpertLoad, OneCellPerExpertPerStepWithTheSharesOfTheFile) {
  // 4 experts, lines stating a 25% threshold; steps 2, 4 and 5 push one expert above it (30, 60
  // and 26 of 100); steps 1 and 3 are exactly 25% everywhere (not a collapse: strict).
  const std::vector<std::vector<int>> tokens = {
      {25, 25, 25, 25}, {30, 20, 25, 25}, {25, 25, 25, 25}, {60, 10, 10, 20}, {24, 26, 25, 25}};
  std::string text, no_threshold;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string line = Line(static_cast<int>(i + 1), tokens[i]);
    no_threshold += line;
    text += line.insert(line.rfind('}'), R"(,"expert_collapse_share":0.25)");
  }
  auto run = ParseRunMetrics(text, "m.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->steps[3].dropped_tokens, 1.0);
  const std::string html = RenderRunHtml(*run);
  const std::vector<Cell> cells = ParseCells(html);
  ASSERT_EQ(cells.size(), 4u * tokens.size());
  std::map<std::pair<int64_t, int>, int> seen;
  for (const Cell& c : cells) {
    ASSERT_EQ(c.first_step, c.last_step);
    ++seen[{c.first_step, c.expert}];
    const auto& row = tokens[static_cast<size_t>(c.first_step - 1)];
    EXPECT_EQ(c.tokens, row[static_cast<size_t>(c.expert)]);
    EXPECT_NEAR(c.share, row[static_cast<size_t>(c.expert)] / 100.0, 1e-9);
  }
  EXPECT_EQ(seen.size(), cells.size()) << "each (step, expert) exactly once";
  EXPECT_EQ(ParseCollapseSteps(html), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_NE(html.find("3 of 5 steps, at steps 2 4 5"), std::string::npos);
  EXPECT_NE(html.find("collapse threshold (25.0% share)"), std::string::npos);
  EXPECT_NE(html.find("MoE: dropped tokens"), std::string::npos);
  // Without a threshold or the engine's flag a line is not marked: the threshold depends on the
  // router's top_k, which the line does not carry.
  auto bare = ParseRunMetrics(no_threshold, "m.jsonl");
  ASSERT_TRUE(bare.ok()) << bare.status().message();
  const std::string bare_html = RenderRunHtml(*bare);
  EXPECT_TRUE(ParseCollapseSteps(bare_html).empty());
  EXPECT_EQ(bare_html.find("collapse threshold ("), std::string::npos);
}

// A line carrying the engine's own warning ("expert_collapse", as pentamesh train writes it) is
// marked by that flag, not by its tokens; a flag that is not a bool is an error naming it.
TEST(ExpertLoad, TheEnginesCollapseFlagDecides) {
  std::string a = Line(1, {25, 25, 25, 25}), b = Line(2, {60, 10, 10, 20});
  a.insert(a.rfind('}'), R"(,"expert_collapse":true)");
  b.insert(b.rfind('}'), R"(,"expert_collapse":false)");
  auto run = ParseRunMetrics(a + b, "m.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(ParseCollapseSteps(RenderRunHtml(*run)), (std::vector<int64_t>{1}));
  std::string bad = Line(1, {25, 25, 25, 25});
  bad.insert(bad.rfind('}'), R"(,"expert_collapse":1)");
  auto refused = ParseRunMetrics(bad, "m.jsonl");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("expert_collapse"), std::string::npos)
      << refused.status().message();
}

TEST(ExpertLoad, LongRunsAverageConsecutiveStepsIntoColumns) {
  std::string text;
  for (int step = 1; step <= 10; ++step) text += Line(step, {step, 10, 10, 10});
  auto run = ParseRunMetrics(text, "m.jsonl");
  ASSERT_TRUE(run.ok());
  const std::vector<Cell> cells = ParseCells(ExpertLoadHeatmap(*run, /*max_columns=*/4));
  ASSERT_EQ(cells.size(), 4u * 4u);  // ceil(10 / 4) = 3 steps per column: 1-3 4-6 7-9 10
  for (const Cell& c : cells) {
    double tokens = 0, total = 0;
    for (int64_t s = c.first_step; s <= c.last_step; ++s) {
      tokens += c.expert == 0 ? static_cast<double>(s) : 10.0;
      total += static_cast<double>(s) + 30.0;
    }
    EXPECT_EQ(c.tokens, tokens);
    EXPECT_NEAR(c.share, tokens / total, 1e-9);
  }
  EXPECT_EQ(cells.front().last_step, 3);
  EXPECT_EQ(cells.back().first_step, 10);
}

int System(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ExpertLoad, RealTinyMoeRunMatchesItsMetrics) {
  const std::string dir = ::testing::TempDir() + "/pm_expert_load_run";
  std::filesystem::remove_all(dir);
  const std::string ds = data::testing::Corpus().dataset;
  constexpr int kSteps = 4;  // 16 sequences x 128 tokens per step
  const std::string train = fmt::format(
      "{} train --config {}/configs/tiny-moe.toml --set model.vocab=512 --set data.dataset={} "
      "--set train.total_tokens={} --set run.out_dir={} --set run.log_every=1 "
      "--set run.eval_every=0 --set optim.warmup_steps=1 > {}/train.log 2>&1",
      PM_BINARY, PM_SOURCE_DIR, ds, kSteps * 16 * 128, dir, ::testing::TempDir());
  ASSERT_EQ(System(train), 0) << train;
  const std::string page = dir + "/report.html";
  ASSERT_EQ(System(fmt::format("{} report --run {} --html {} >/dev/null", PM_BINARY, dir, page)),
            0);

  std::map<std::pair<int64_t, int>, double> expected_tokens, expected_share;
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::string line;
  int steps = 0;
  size_t experts = 0;
  std::vector<int64_t> collapse_steps;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    const auto t = j.at("tokens_per_expert").get<std::vector<double>>();
    experts = t.size();
    double total = 0;
    for (double v : t) total += v;
    ASSERT_GT(total, 0);
    // tiny-moe: 4 experts, top-2: the threshold is (1/4 + 1/2) / 2.
    EXPECT_DOUBLE_EQ(j.at("expert_collapse_share").get<double>(), 0.375);
    if (*std::max_element(t.begin(), t.end()) / total > 0.375)
      collapse_steps.push_back(j.at("step").get<int64_t>());
    for (size_t e = 0; e < t.size(); ++e) {
      expected_tokens[{j.at("step").get<int64_t>(), static_cast<int>(e)}] = t[e];
      expected_share[{j.at("step").get<int64_t>(), static_cast<int>(e)}] = t[e] / total;
    }
    ++steps;
  }
  ASSERT_EQ(steps, kSteps);
  ASSERT_EQ(experts, 4u);  // configs/tiny-moe.toml
  std::ifstream in(page);
  std::stringstream html;
  html << in.rdbuf();
  const std::vector<Cell> cells = ParseCells(html.str());
  ASSERT_EQ(cells.size(), experts * kSteps);
  for (const Cell& c : cells) {
    const std::pair<int64_t, int> key{c.first_step, c.expert};
    ASSERT_TRUE(expected_tokens.contains(key)) << c.first_step << " " << c.expert;
    EXPECT_EQ(c.tokens, expected_tokens[key]);
    EXPECT_NEAR(c.share, expected_share[key], 1e-8);
    expected_tokens.erase(key);
  }
  EXPECT_TRUE(expected_tokens.empty());
  EXPECT_EQ(ParseCollapseSteps(html.str()), collapse_steps);
}

}  // namespace
}  // namespace pentamesh::report

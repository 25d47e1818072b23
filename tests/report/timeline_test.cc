// The pipeline timeline: the SVG is parsed back (box titles carry exact start/end times) and
// checked against the programs and the simulation it was drawn from: one box per action in program
// order, idle boxes summing to each rank's simulated idle time, positions proportional to time,
// colours by kind, the printed bubble equal to the simulator's; the plan report's timeline of a
// costed layout idles exactly the cost model's bubble term; `pentamesh schedule --html` writes it.
#include "report/timeline.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "report/html.h"
#include "report/run_report.h"
#include "schedule/estimate.h"
#include "schedule/format.h"
#include "testing/tiny_specs.h"

namespace pentamesh::report {
namespace {

struct Box {
  std::string css_class;  // "act F", "act B", "act W" or "idle"
  double x = 0, width = 0;
  std::string fill;
  int rank = 0;
  std::string name;  // "F3.1" or "idle"
  double start = 0, end = 0;
};

std::vector<Box> ParseBoxes(const std::string& svg) {
  static const std::regex re(
      R"re(<rect class="([^"]+)" x="([-0-9.]+)" y="[-0-9.]+" width="([-0-9.]+)" height="[-0-9.]+" fill="([^"]+)"><title>rank (\d+) (\S+) start=(\S+) end=(\S+)</title>)re");
  std::vector<Box> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    out.push_back({m[1], std::stod(m[2]), std::stod(m[3]), m[4], std::stoi(m[5]), m[6],
                   std::stod(m[7]), std::stod(m[8])});
  }
  return out;
}

struct Case {
  std::string kind;
  int pp, m;
};

class Timeline : public ::testing::TestWithParam<Case> {};

TEST_P(Timeline, BoxesAreTheProgramsAndIdleIsTheSimulatorsBubble) {
  auto spec = schedule::ParseScheduleKind(GetParam().kind);
  ASSERT_TRUE(spec.ok());
  spec->pp = GetParam().pp;
  spec->microbatches = GetParam().m;
  auto programs = schedule::MakeAll(*spec);
  ASSERT_TRUE(programs.ok()) << programs.status().message();
  schedule::Costs costs;
  costs.per_stage = {{.time_f_s = 1.0, .time_b_s = 1.5, .time_w_s = 0.75}};
  costs.time_p2p_s = 0.125;
  auto sim = schedule::Simulate(*programs, spec->topology(), costs);
  ASSERT_TRUE(sim.ok() && sim->complete);
  const std::string svg = ScheduleTimelineSvg(*sim, spec->virtual_stages, "units");
  const std::vector<Box> boxes = ParseBoxes(svg);

  const bool chunks = spec->virtual_stages > 1;
  std::vector<size_t> next(static_cast<size_t>(spec->pp), 0);
  std::vector<double> idle(static_cast<size_t>(spec->pp), 0.0);
  std::map<char, int> drawn, listed;
  double x0 = NAN, px_per_unit = NAN;
  for (const Box& b : boxes) {
    ASSERT_LT(b.rank, spec->pp);
    if (b.css_class == "idle") {
      EXPECT_EQ(b.name, "idle");
      EXPECT_EQ(b.fill, "#f6c6c6");
      EXPECT_GT(b.end, b.start);
      idle[b.rank] += b.end - b.start;
      continue;
    }
    const auto& program = (*programs)[b.rank];
    size_t& i = next[b.rank];
    ASSERT_LT(i, program.size()) << "rank " << b.rank << " has more boxes than actions";
    EXPECT_EQ(b.name, schedule::ToString(program[i], chunks)) << "rank " << b.rank << " #" << i;
    const schedule::Timing& t = sim->timeline[b.rank][i];
    EXPECT_NEAR(b.start, t.start_s, 1e-7);
    EXPECT_NEAR(b.end, t.end_s, 1e-7);
    const char kind = schedule::KindLetter(program[i].kind);
    EXPECT_EQ(b.css_class, std::string("act ") + kind);
    if (program[i].chunk == 0) {
      EXPECT_EQ(b.fill, kind == 'F' ? "#4e79a7" : (kind == 'B' ? "#59a14f" : "#f28e2b"));
    }
    ++drawn[kind];
    if (std::isnan(x0) && t.start_s == 0) x0 = b.x;
    if (t.end_s == sim->makespan_s) px_per_unit = (b.x + b.width - x0) / t.end_s;
    ++i;
  }
  ASSERT_FALSE(std::isnan(x0));
  ASSERT_FALSE(std::isnan(px_per_unit));
  for (const Box& b : boxes) {  // x proportional to time (coordinates are rounded to 0.1 px)
    EXPECT_NEAR(b.x, x0 + px_per_unit * b.start, 0.25);
    EXPECT_NEAR(b.x + b.width, x0 + px_per_unit * b.end, 0.35);
  }
  double mean_idle_share = 0;
  for (int r = 0; r < spec->pp; ++r) {
    EXPECT_EQ(next[r], (*programs)[r].size()) << "rank " << r << ": every action has a box";
    EXPECT_NEAR(idle[r], sim->ranks[r].idle_s, 1e-6) << "rank " << r;
    mean_idle_share += idle[r] / sim->makespan_s / spec->pp;
    for (const schedule::Action& a : (*programs)[r]) ++listed[schedule::KindLetter(a.kind)];
  }
  EXPECT_EQ(drawn, listed);
  EXPECT_NEAR(mean_idle_share, sim->bubble_fraction, 1e-6);

  const std::string html = ScheduleTimelineHtml(*spec, *sim, "units");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex(R"(bubble <b>([0-9.]+)%</b>)")));
  EXPECT_NEAR(std::stod(m[1]), 100 * sim->bubble_fraction, 0.005);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Timeline,
                         ::testing::Values(Case{"gpipe", 4, 6}, Case{"1f1b", 4, 8},
                                           Case{"interleaved:2", 4, 8}, Case{"zb", 4, 8},
                                           Case{"zb", 5, 3}, Case{"zbv", 3, 7},
                                           Case{"1f1b", 1, 4}));

TEST(TimelineWindow, LargeSchedulesShowTheStartOfTheStep) {
  auto sim = schedule::SimulateSchedule({schedule::Schedule::kZeroBubble, 8, 64, 1},
                                        schedule::Costs::Equal());
  ASSERT_TRUE(sim.ok());
  const std::string svg = ScheduleTimelineSvg(*sim, 1, "units", /*max_boxes=*/100);
  int actions = 0;
  for (const Box& b : ParseBoxes(svg)) {
    if (b.css_class != "idle") ++actions;
    EXPECT_LT(b.start, sim->makespan_s / 2);
  }
  EXPECT_GT(actions, 50);
  EXPECT_LE(actions, 100);
  EXPECT_NE(svg.find("the step has 1536 actions"), std::string::npos);
}

// A costed layout, simulated with its stages' own micro-batch times: the slowest rank is busy the
// cost model's pipeline terms, no rank more, and the makespan is those plus its bubble term
// (PipelineBubble).
TEST(LayoutTimeline, MakespanEqualsTheCostModelsPipelineAndBubble) {
  spec::ModelSpec model = pentamesh::testing::GptTiny();
  model.layers = 16;
  for (const spec::Layout& l :
       {spec::Layout{.dp = 2, .pp = 4}, spec::Layout{.pp = 8, .schedule = spec::Schedule::kGPipe},
        spec::Layout{
            .dp = 2, .pp = 4, .schedule = spec::Schedule::kInterleaved, .virtual_stages = 2},
        spec::Layout{.dp = 2, .pp = 4, .schedule = spec::Schedule::kZeroBubble}}) {
    const cost::Estimate e = cost::EstimateLayout(model, pentamesh::testing::H100Cluster(8),
                                                  pentamesh::testing::Train(128, 32), l);
    ASSERT_TRUE(e.fits) << spec::ShortLayout(l);
    schedule::ScheduleSpec spec;
    auto sim = SimulateLayoutSchedule(e, &spec);
    ASSERT_TRUE(sim.ok()) << sim.status().message();
    EXPECT_EQ(spec.pp, l.pp);
    EXPECT_EQ(spec.microbatches, e.microbatches);
    const double busy = e.time.compute + e.time.tp + e.time.cp + e.time.ep + e.time.pp;
    const schedule::RankStats& slowest = sim->ranks[static_cast<size_t>(e.critical_stage)];
    EXPECT_NEAR(slowest.busy_s, busy, 1e-9 * busy) << spec::ShortLayout(l);
    for (const schedule::RankStats& r : sim->ranks) EXPECT_LE(r.busy_s, busy * (1 + 1e-9));
    std::printf("%s: stages %.4g %.4g %.4g, makespan %.6g priced %.6g (%+.3f%%)\n",
                spec::ShortLayout(l).c_str(), e.stage_microbatch_s[0], e.stage_microbatch_s[1],
                e.stage_microbatch_s[2], sim->makespan_s, busy + e.time.bubble,
                100 * ((busy + e.time.bubble) / sim->makespan_s - 1));
    // Exact when the last stage is the slowest and the first no slower than the middle ones
    // (Bubble.UnequalStagesMatchTheSimulatedSchedule); in this tiny model the middle ranks are the
    // slowest (they both receive and send) and the price is up to 2% above the simulation.
    EXPECT_NEAR(sim->makespan_s, busy + e.time.bubble, 0.03 * sim->makespan_s)
        << spec::ShortLayout(l);
    const std::string svg = ScheduleTimelineSvg(*sim, spec.virtual_stages, "s");
    EXPECT_EQ(ParseBoxes(svg).size() > 0, true);
  }
  const cost::Estimate flat = cost::EstimateLayout(model, pentamesh::testing::H100Cluster(8),
                                                   pentamesh::testing::Train(128, 32), {.dp = 8});
  auto none = SimulateLayoutSchedule(flat, nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("pp=1"), std::string::npos);
}

TEST(LayoutTimeline, PlanReportDrawsTheBestLayoutsSchedule) {
  spec::ModelSpec model = pentamesh::testing::GptTiny();
  model.layers = 16;
  const spec::Layout l{.dp = 2, .pp = 4};
  PlanReport r;
  r.model = model.name;
  r.gpus = 8;
  r.top = {cost::EstimateLayout(model, pentamesh::testing::H100Cluster(8),
                                pentamesh::testing::Train(128, 32), l)};
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("Pipeline schedule of the best layout"), std::string::npos);
  int actions = 0;
  for (const Box& b : ParseBoxes(html)) actions += b.css_class != "idle";
  EXPECT_EQ(actions, 4 * 2 * r.top[0].microbatches);  // 1F1B: an F and a full B per (rank, mb)
}

int RunCli(const std::string& args) {
  const std::string cmd = std::string(PM_BINARY) + " schedule " + args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ScheduleCli, WritesTheTimelinePage) {
  const std::string dir = ::testing::TempDir() + "/pm_schedule_html";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string page = dir + "/zb.html";
  ASSERT_EQ(RunCli("--kind zb --pp 4 --microbatches 8 --costs 1,1,1 --html " + page), 0);
  std::ifstream in(page);
  std::stringstream text;
  text << in.rdbuf();
  const std::string html = text.str();
  int actions = 0;
  for (const Box& b : ParseBoxes(html)) actions += b.css_class != "idle";
  EXPECT_EQ(actions, 4 * 8 * 3);  // F, B and W of 8 micro-batches on 4 ranks
  // ZB-H1, m >= p, equal costs: (p-1)/(3m+p-1) = 3/27.
  EXPECT_NE(html.find(fmt::format("bubble <b>{:.2f}%</b>", 100.0 * 3 / 27)), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(RunCli("--kind zb --pp 4 --microbatches 8 --html /no/such/dir/x.html"), 2);
}

}  // namespace
}  // namespace pentamesh::report

namespace pentamesh::report {
namespace {

// A Chrome trace (the format schedule::ChromeTrace and train --trace write) reads back into one
// row per (pid, tid) with the events' exact times, and draws like the simulated timeline.
TEST(ChromeTraceView, RowsAndTimesComeBackFromTheJson) {
  auto spec = schedule::ParseScheduleKind("zb");
  spec->pp = 3;
  spec->microbatches = 4;
  auto sim = schedule::SimulateSchedule(*spec, schedule::Costs::Equal());
  ASSERT_TRUE(sim.ok());
  const std::string text = schedule::ChromeTrace(*sim, 1, /*us_per_s=*/1000).dump();
  auto rows = ParseChromeTrace(text, "t.json");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 3u);
  size_t spans = 0;
  for (size_t r = 0; r < rows->size(); ++r) {
    EXPECT_EQ((*rows)[r].label, fmt::format("pid 0 / pp rank {}", r));
    ASSERT_EQ((*rows)[r].spans.size(), sim->timeline[r].size());
    for (size_t i = 0; i < sim->timeline[r].size(); ++i) {
      EXPECT_NEAR((*rows)[r].spans[i].start, 1000 * sim->timeline[r][i].start_s, 1e-9);
      EXPECT_NEAR((*rows)[r].spans[i].end, 1000 * sim->timeline[r][i].end_s, 1e-9);
      EXPECT_EQ((*rows)[r].spans[i].cat,
                std::string(1, schedule::KindLetter(sim->timeline[r][i].action.kind)));
    }
    spans += (*rows)[r].spans.size();
  }
  // Labels here are "pid 0 / pp rank R": count the classes and sum the idle titles directly.
  const std::string svg = TimelineSvg(*rows, 1000 * sim->makespan_s, "us", false, 1000);
  size_t boxes = 0;
  for (size_t pos = 0; (pos = svg.find("<rect class=\"act ", pos)) != std::string::npos; ++pos) {
    ++boxes;
  }
  EXPECT_EQ(boxes, spans);
  double idle = 0;
  static const std::regex idle_re(R"re(idle start=(\S+) end=(\S+)</title>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), idle_re);
       it != std::sregex_iterator(); ++it) {
    idle += std::stod((*it)[2]) - std::stod((*it)[1]);
  }
  double sim_idle = 0;
  for (const auto& r : sim->ranks) sim_idle += 1000 * r.idle_s;
  EXPECT_NEAR(idle, sim_idle, 1e-6);

  RunMetrics run;
  run.source = "m.jsonl";
  run.steps.push_back({});
  run.steps[0].peak_bytes["total"] = 1;
  run.trace = *rows;
  run.trace_source = "t.json";
  EXPECT_NE(RenderRunHtml(run).find("Trace: the pipeline as it ran"), std::string::npos);

  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"{", "malformed JSON"},
           {R"({"events": []})", "no 'traceEvents'"},
           {R"({"traceEvents": [{"ph": "M", "name": "thread_name"}]})", "no complete"},
           {R"({"traceEvents": [{"ph": "X", "name": "F0", "ts": 1}]})", "'F0'"},
           {R"([{"name": "F0"}])", "has no 'ph'"}}) {
    auto r = ParseChromeTrace(bad, "bad.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("bad.json"), std::string::npos);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace pentamesh::report

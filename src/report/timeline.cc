#include "report/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/output.h"
#include "report/page.h"
#include "report/svg.h"
#include "schedule/estimate.h"
#include "schedule/format.h"

namespace pentamesh::report {
namespace {

// Per kind, shades for chunk 0, 1, 2, ... (cycled): darker first.
const char* const kForwardShades[] = {"#4e79a7", "#7ea6cf", "#a0cbe8", "#c6dcf0"};
const char* const kBackwardShades[] = {"#59a14f", "#7fbf73", "#8cd17d", "#b6e3aa"};
const char* const kWeightShades[] = {"#f28e2b", "#f7a85a", "#ffbe7d", "#ffd8b0"};
constexpr const char* kIdleColor = "#f6c6c6";

std::string Shade(const std::string& cat, int shade) {
  const size_t i = static_cast<size_t>(std::max(shade, 0)) % std::size(kForwardShades);
  if (cat == "F") return kForwardShades[i];
  if (cat == "B") return kBackwardShades[i];
  if (cat == "W") return kWeightShades[i];
  return "#b07aa1";  // anything else (p2p transfers in a trace)
}

// The drawn window [0, end_s]: the whole makespan, or the start of the max_boxes+1-th action when
// there are more actions than that.
double WindowEnd(const std::vector<TimelineRow>& rows, double end, size_t max_boxes,
                 size_t* total) {
  std::vector<double> starts;
  for (const TimelineRow& row : rows) {
    for (const TimelineSpan& t : row.spans) starts.push_back(t.start);
  }
  *total = starts.size();
  if (starts.size() <= max_boxes) return end;
  std::nth_element(starts.begin(), starts.begin() + static_cast<ptrdiff_t>(max_boxes),
                   starts.end());
  return starts[max_boxes];
}

struct Geometry {
  double left = 70, right = 120, top = 46, row = 24, width = 1180, end_s = 1;
  double px(double t) const { return left + (width - left - right) * t / end_s; }
};

void Legend(Svg& svg, int virtual_stages, double y) {
  double x = 70;
  const std::pair<std::string, std::string> items[] = {
      {"F forward", kForwardShades[0]},
      {"B backward (input grad when a W follows)", kBackwardShades[0]},
      {"W weight grad", kWeightShades[0]},
      {"idle (bubble)", kIdleColor}};
  for (const auto& [name, color] : items) {
    svg.Rect(x, y - 10, 12, 12, color);
    svg.Text(x + 16, y, name, 12);
    x += 28 + 6.5 * static_cast<double>(name.size());
  }
  if (virtual_stages > 1) svg.Text(x, y, "(lighter shade: later chunk)", 11, "start", "#555");
}

// One row: span boxes (clipped to the window) and the idle gaps between them.
void Row(Svg& svg, const Geometry& g, size_t index, const TimelineRow& row, double end) {
  const double y = g.top + g.row * static_cast<double>(index);
  const double h = std::max(g.row - 4, 2.0);
  double cursor = 0;
  auto idle = [&](double from, double to) {
    if (to <= from || from >= g.end_s) return;
    svg.Rect(g.px(from), y, g.px(std::min(to, g.end_s)) - g.px(from), h, kIdleColor,
             fmt::format("{} idle start={:.9g} end={:.9g}", row.label, from, to), "idle");
  };
  for (const TimelineSpan& t : row.spans) {
    if (t.start >= g.end_s) break;
    idle(cursor, t.start);
    const double x = g.px(t.start), w = g.px(std::min(t.end, g.end_s)) - x;
    svg.Rect(x, y, w, h, Shade(t.cat, t.shade),
             fmt::format("{} {} start={:.9g} end={:.9g}", row.label, t.name, t.start, t.end),
             "act " + t.cat);
    const std::string label = t.name.size() > 1 && t.name.size() <= 8 ? t.name.substr(1) : "";
    if (h >= 12 && !label.empty() && w >= 6.5 * static_cast<double>(label.size()) + 4) {
      svg.Text(x + w / 2, y + h / 2 + 4, label, 10, "middle", "#fff");
    }
    cursor = std::max(cursor, t.end);
  }
  idle(cursor, end);
}

}  // namespace

std::string TimelineSvg(const std::vector<TimelineRow>& rows, double end, const std::string& unit,
                        bool show_legend_chunks, size_t max_boxes) {
  size_t total = 0;
  Geometry g;
  g.end_s = WindowEnd(rows, end, max_boxes, &total);
  if (!(g.end_s > 0)) g.end_s = 1;
  const double longest_label = [&] {
    size_t n = 0;
    for (const TimelineRow& row : rows) n = std::max(n, row.label.size());
    return static_cast<double>(n);
  }();
  g.left = std::max(70.0, 6.5 * longest_label + 14);
  g.row = std::clamp(480.0 / static_cast<double>(std::max<size_t>(rows.size(), 1)), 6.0, 26.0);
  const double plot_bottom = g.top + g.row * static_cast<double>(rows.size());
  Svg svg(g.width, plot_bottom + 44);
  Legend(svg, show_legend_chunks ? 2 : 1, 20);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double y = g.top + g.row * static_cast<double>(i);
    if (g.row >= 10) svg.Text(g.left - 8, y + g.row / 2 + 2, rows[i].label, 11, "end");
    Row(svg, g, i, rows[i], end);
    double busy = 0;
    for (const TimelineSpan& t : rows[i].spans) busy += t.end - t.start;
    if (g.row >= 10 && end > 0) {
      svg.Text(g.width - g.right + 8, y + g.row / 2 + 2,
               fmt::format("idle {:.1f}%", 100 * std::max(end - busy, 0.0) / end), 11, "start",
               "#555");
    }
  }
  svg.Line(g.left, plot_bottom + 2, g.px(g.end_s), plot_bottom + 2, "#888");
  for (int i = 0; i <= 5; ++i) {
    const double t = g.end_s * i / 5;
    svg.Text(g.px(t), plot_bottom + 18, TickLabel(t), 11, "middle", "#555");
  }
  const std::string window =
      total > max_boxes
          ? fmt::format(" (first {} of the step: {} boxes at most; the step has {} actions)",
                        TickLabel(g.end_s), max_boxes, total)
          : "";
  svg.Text(g.px(g.end_s), plot_bottom + 36, "time (" + unit + ")" + window, 11, "end", "#555");
  return svg.Finish();
}

std::string ScheduleTimelineSvg(const schedule::SimResult& sim, int virtual_stages,
                                const std::string& unit, size_t max_boxes) {
  std::vector<TimelineRow> rows(sim.timeline.size());
  for (size_t rank = 0; rank < rows.size(); ++rank) {
    rows[rank].label = fmt::format("rank {}", rank);
    for (const schedule::Timing& t : sim.timeline[rank]) {
      rows[rank].spans.push_back({schedule::ToString(t.action, virtual_stages > 1),
                                  std::string(1, schedule::KindLetter(t.action.kind)),
                                  t.action.chunk, t.start_s, t.end_s});
    }
  }
  return TimelineSvg(rows, sim.makespan_s, unit, virtual_stages > 1, max_boxes);
}

namespace {

// Rows labelled "process / thread" (or "pid P / tid T"), times shifted to start at t0, spans
// sorted by start.
std::vector<TimelineRow> LabelAndShift(
    std::map<std::pair<int64_t, int64_t>, TimelineRow> rows,
    const std::map<int64_t, std::string>& process_names,
    const std::map<std::pair<int64_t, int64_t>, std::string>& thread_names, double t0) {
  std::vector<TimelineRow> out;
  for (auto& [key, row] : rows) {
    const auto process = process_names.find(key.first);
    const auto thread = thread_names.find(key);
    row.label =
        (process != process_names.end() ? process->second : fmt::format("pid {}", key.first)) +
        " / " + (thread != thread_names.end() ? thread->second : fmt::format("tid {}", key.second));
    for (TimelineSpan& span : row.spans) span.start -= t0, span.end -= t0;
    std::sort(row.spans.begin(), row.spans.end(),
              [](const TimelineSpan& a, const TimelineSpan& b) { return a.start < b.start; });
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

core::Result<std::vector<TimelineRow>> ParseChromeTrace(const std::string& text,
                                                        const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::Status::Error(source + ": malformed JSON");
  const nlohmann::json* events = &j;
  if (j.is_object()) {
    if (!j.contains("traceEvents") || !j["traceEvents"].is_array())
      return core::Status::Error(source + ": no 'traceEvents' array");
    events = &j["traceEvents"];
  }
  if (!events->is_array()) return core::Status::Error(source + ": not a Chrome trace");
  std::map<int64_t, std::string> process_names;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<std::pair<int64_t, int64_t>, TimelineRow> rows;
  double t0 = INFINITY;
  for (size_t i = 0; i < events->size(); ++i) {
    const nlohmann::json& e = (*events)[i];
    auto id = [&](const char* key) {
      return e.contains(key) && e[key].is_number_integer() ? e[key].get<int64_t>() : 0;
    };
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      return core::Status::Error(fmt::format("{}: event #{} has no 'ph'", source, i));
    }
    const std::string ph = e["ph"].get<std::string>();
    const std::string name = e.value("name", std::string());
    const std::pair<int64_t, int64_t> key{id("pid"), id("tid")};
    if (ph == "M") {
      const std::string value = e.contains("args") && e["args"].is_object()
                                    ? e["args"].value("name", std::string())
                                    : std::string();
      if (name == "process_name") process_names[key.first] = value;
      if (name == "thread_name") thread_names[key] = value;
      continue;
    }
    if (ph != "X") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number()) {
      return core::Status::Error(
          fmt::format("{}: event #{} ('{}') needs numeric 'ts' and 'dur'", source, i, name));
    }
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0) {
      return core::Status::Error(
          fmt::format("{}: event #{} ('{}') has ts={} dur={}", source, i, name, ts, dur));
    }
    const int chunk = e.contains("args") && e["args"].is_object() && e["args"].contains("chunk") &&
                              e["args"]["chunk"].is_number_integer()
                          ? e["args"]["chunk"].get<int>()
                          : 0;
    rows[key].spans.push_back({name, e.value("cat", std::string()), chunk, ts, ts + dur});
    t0 = std::min(t0, ts);
  }
  if (rows.empty()) return core::Status::Error(source + ": no complete ('X') events");
  return LabelAndShift(std::move(rows), process_names, thread_names, t0);
}

std::string ScheduleTimelineHtml(const schedule::ScheduleSpec& spec, const schedule::SimResult& sim,
                                 const std::string& unit) {
  std::string closed;
  if (const auto c = schedule::BubbleFractionClosedForm(spec)) {
    closed = fmt::format(" (closed form at equal costs: {:.2f}%)", 100 * *c);
  }
  return fmt::format(
             "<p class=note>schedule {}, pp={}, {} micro-batches{}: makespan {} {}; bubble "
             "<b>{:.2f}%</b> of the step (mean over ranks of idle / makespan){}, idle / busy "
             "{:.4f}.</p>\n",
             Escape(schedule::ToString(spec)), spec.pp, spec.microbatches,
             spec.virtual_stages > 1 ? fmt::format(", {} chunks per rank", spec.virtual_stages)
                                     : "",
             TickLabel(sim.makespan_s), Escape(unit), 100 * sim.bubble_fraction, closed,
             sim.bubble_ratio) +
         ScheduleTimelineSvg(sim, spec.virtual_stages, unit);
}

core::Result<schedule::SimResult> SimulateLayoutSchedule(const cost::Estimate& e,
                                                         schedule::ScheduleSpec* spec_out) {
  if (e.layout.pp <= 1) {
    return core::Status::Error("pp=1: the layout has no pipeline schedule");
  }
  PM_ASSIGN_OR_RETURN(const schedule::ScheduleSpec spec,
                      schedule::FromLayout(e.layout, e.microbatches));
  // Each pp rank's micro-batch time (the first, each middle one, the last: cost's stages), split
  // evenly over its chunks and over F, B and W.
  const schedule::Topology topology = spec.topology();
  schedule::Costs costs;
  costs.per_stage.resize(static_cast<size_t>(topology.stages()));
  for (int stage = 0; stage < topology.stages(); ++stage) {
    const int rank = topology.RankOf(stage);
    const int which = rank == 0 ? 0 : rank == spec.pp - 1 ? 2 : 1;
    const double unit_s = e.stage_microbatch_s[which] / (3.0 * spec.virtual_stages);
    costs.per_stage[static_cast<size_t>(stage)] = {
        .time_f_s = unit_s, .time_b_s = unit_s, .time_w_s = unit_s};
  }
  if (spec_out) *spec_out = spec;
  return schedule::SimulateSchedule(spec, costs);
}

std::string RenderScheduleHtml(const schedule::ScheduleSpec& spec,
                               const std::vector<schedule::Program>& programs,
                               const schedule::SimResult& sim, const std::string& costs_text) {
  const std::string title = fmt::format("pentamesh schedule: {} pp={} micro-batches={}",
                                        schedule::ToString(spec), spec.pp, spec.microbatches);
  std::string html = "<h1>" + Escape(title) + "</h1>\n<p class=note>Simulated with " +
                     Escape(costs_text) +
                     " by schedule::Simulate on the programs of schedule::MakeAll.</p>\n";
  html += "<h2>Timeline</h2>\n" + ScheduleTimelineHtml(spec, sim, "units");
  html +=
      "<h2>Programs</h2>\n<table><tr><th>rank</th><th>actions</th><th>idle</th>"
      "<th>peak in-flight (chunks)</th></tr>\n";
  for (size_t rank = 0; rank < programs.size(); ++rank) {
    html +=
        fmt::format("<tr><td>{}</td><td class=l><code>{}</code></td><td>{}</td><td>{}</td></tr>\n",
                    rank, Escape(schedule::FormatProgram(programs[rank], spec.virtual_stages > 1)),
                    rank < sim.ranks.size() ? TickLabel(sim.ranks[rank].idle_s) : "-",
                    rank < sim.ranks.size() ? sim.ranks[rank].peak_in_flight : 0);
  }
  return HtmlPage(title, html + "</table>\n");
}

core::Status WriteScheduleHtml(const schedule::ScheduleSpec& spec,
                               const std::vector<schedule::Program>& programs,
                               const schedule::SimResult& sim, const std::string& costs_text,
                               const std::string& path) {
  return WritePage(path, RenderScheduleHtml(spec, programs, sim, costs_text));
}

}  // namespace pentamesh::report

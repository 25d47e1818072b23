#include "report/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

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

std::string Shade(schedule::ActionKind kind, int chunk) {
  const size_t i = static_cast<size_t>(chunk) % std::size(kForwardShades);
  switch (kind) {
    case schedule::ActionKind::kForward:
      return kForwardShades[i];
    case schedule::ActionKind::kBackward:
      return kBackwardShades[i];
    case schedule::ActionKind::kWeight:
      return kWeightShades[i];
  }
  return "#999";
}

// The drawn window [0, end_s]: the whole makespan, or the start of the max_boxes+1-th action when
// there are more actions than that.
double WindowEnd(const schedule::SimResult& sim, size_t max_boxes, size_t* total) {
  std::vector<double> starts;
  for (const auto& rank_timeline : sim.timeline) {
    for (const schedule::Timing& t : rank_timeline) starts.push_back(t.start_s);
  }
  *total = starts.size();
  if (starts.size() <= max_boxes) return sim.makespan_s;
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

// One rank's row: action boxes (clipped to the window) and the idle gaps between them.
void Row(Svg& svg, const Geometry& g, size_t rank, const std::vector<schedule::Timing>& timeline,
         double makespan_s, bool chunks) {
  const double y = g.top + g.row * static_cast<double>(rank);
  const double h = std::max(g.row - 4, 2.0);
  double cursor = 0;
  auto idle = [&](double from, double to) {
    if (to <= from || from >= g.end_s) return;
    svg.Rect(g.px(from), y, g.px(std::min(to, g.end_s)) - g.px(from), h, kIdleColor,
             fmt::format("rank {} idle start={:.9g} end={:.9g}", rank, from, to), "idle");
  };
  for (const schedule::Timing& t : timeline) {
    if (t.start_s >= g.end_s) break;
    idle(cursor, t.start_s);
    const std::string name = schedule::ToString(t.action, chunks);
    const double x = g.px(t.start_s), w = g.px(std::min(t.end_s, g.end_s)) - x;
    svg.Rect(x, y, w, h, Shade(t.action.kind, t.action.chunk),
             fmt::format("rank {} {} start={:.9g} end={:.9g}", rank, name, t.start_s, t.end_s),
             fmt::format("act {}", schedule::KindLetter(t.action.kind)));
    if (h >= 12 && w >= 6.5 * static_cast<double>(name.size() - 1) + 4) {
      svg.Text(x + w / 2, y + h / 2 + 4, name.substr(1), 10, "middle", "#fff");
    }
    cursor = t.end_s;
  }
  idle(cursor, makespan_s);
}

}  // namespace

std::string ScheduleTimelineSvg(const schedule::SimResult& sim, int virtual_stages,
                                const std::string& unit, size_t max_boxes) {
  const size_t ranks = sim.timeline.size();
  size_t total = 0;
  Geometry g;
  g.end_s = WindowEnd(sim, max_boxes, &total);
  if (!(g.end_s > 0)) g.end_s = 1;
  g.row = std::clamp(480.0 / static_cast<double>(std::max<size_t>(ranks, 1)), 6.0, 26.0);
  const double plot_bottom = g.top + g.row * static_cast<double>(ranks);
  Svg svg(g.width, plot_bottom + 44);
  Legend(svg, virtual_stages, 20);
  for (size_t rank = 0; rank < ranks; ++rank) {
    const double y = g.top + g.row * static_cast<double>(rank);
    if (g.row >= 10)
      svg.Text(g.left - 8, y + g.row / 2 + 2, fmt::format("rank {}", rank), 11, "end");
    Row(svg, g, rank, sim.timeline[rank], sim.makespan_s, virtual_stages > 1);
    if (rank < sim.ranks.size() && g.row >= 10 && sim.makespan_s > 0) {
      svg.Text(g.width - g.right + 8, y + g.row / 2 + 2,
               fmt::format("idle {:.1f}%", 100 * sim.ranks[rank].idle_s / sim.makespan_s), 11,
               "start", "#555");
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
  const cost::Time& t = e.time;
  const double per_microbatch_s = (t.compute + t.tp + t.cp + t.ep + t.pp) /
                                  static_cast<double>(std::max<int64_t>(e.microbatches, 1));
  const double unit_s = per_microbatch_s / (3.0 * spec.virtual_stages);
  schedule::Costs costs;
  costs.per_stage = {{.time_f_s = unit_s, .time_b_s = unit_s, .time_w_s = unit_s}};
  if (spec_out) *spec_out = spec;
  return schedule::SimulateSchedule(spec, costs);
}

std::string RenderScheduleHtml(const schedule::ScheduleSpec& spec,
                               const std::vector<schedule::Program>& programs,
                               const schedule::SimResult& sim, const std::string& costs_text) {
  const std::string title = fmt::format("pentamesh schedule: {} pp={} micro-batches={}",
                                        schedule::ToString(spec), spec.pp, spec.microbatches);
  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" +
                     Escape(title) + "</title>\n" + kPageStyle + "</head><body>\n<h1>" +
                     Escape(title) + "</h1>\n<p class=note>Simulated with " + Escape(costs_text) +
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
  return html + "</table>\n</body></html>\n";
}

core::Status WriteScheduleHtml(const schedule::ScheduleSpec& spec,
                               const std::vector<schedule::Program>& programs,
                               const schedule::SimResult& sim, const std::string& costs_text,
                               const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    return core::Status::Error(
        fmt::format("--html: cannot write '{}': {}", path, std::strerror(errno)));
  }
  out << RenderScheduleHtml(spec, programs, sim, costs_text);
  out.close();
  if (!out) return core::Status::Error(fmt::format("--html: writing '{}' failed", path));
  return core::Status::Ok();
}

}  // namespace pentamesh::report

// The pipeline schedule as a timeline: one row per pp rank, one box per simulated action (F, B, W
// of each micro-batch and chunk), coloured by kind (lighter shades for later chunks), the idle
// gaps drawn as their own pale-red boxes, and the bubble printed. Drawn from a schedule::SimResult,
// i.e. the programs schedule::MakeAll generates and schedule::Simulate times: the simulator the
// planner's closed-form bubble (schedule/estimate.h) is tested against. The same row renderer
// (TimelineSvg) draws a measured Chrome trace (ParseChromeTrace; `pentamesh report --trace`).
// Invariant: the drawing presents the simulation only. Every action box and idle box carries a
// <title> with its exact start and end, so the boxes of a rank tile [0, makespan] and the idle
// boxes of rank r sum to sim.ranks[r].idle_s (tests/report/timeline_test.cc parses them back).
#pragma once

#include <string>

#include "core/status.h"
#include "cost/cost.h"
#include "schedule/generate.h"
#include "schedule/simulate.h"

namespace pentamesh::report {

// A generic timeline row (a pp rank of a simulation, or one thread of a Chrome trace): spans
// sorted by start, non-overlapping on compute rows. `cat` picks the colour ("F", "B", "W", else
// grey) and `shade` its lightness (the chunk).
struct TimelineSpan {
  std::string name;
  std::string cat;
  int shade = 0;
  double start = 0, end = 0;
};
struct TimelineRow {
  std::string label;  // "rank 0", "pp rank 1 / compute"
  std::vector<TimelineSpan> spans;
};

// The rows of a Chrome trace-event JSON ({"traceEvents": [...]} or a bare array): one row per
// (pid, tid) with complete ("X") events, labelled by the process_name / thread_name metadata,
// times in microseconds relative to the earliest event. Errors name `source` and the reason.
core::Result<std::vector<TimelineRow>> ParseChromeTrace(const std::string& text,
                                                        const std::string& source);

// Draws rows on a common time axis [0, end of the last span] in `unit`: a box per span and a
// pale-red idle box per gap, each row's idle share at its end. Titles read "LABEL NAME start=S
// end=E" and "LABEL idle start=S end=E" (%.9g), classes "act CAT" and "idle".
std::string TimelineSvg(const std::vector<TimelineRow>& rows, double end, const std::string& unit,
                        bool show_legend_chunks, size_t max_boxes);

// At most this many action boxes are drawn; a larger schedule shows the first part of the step
// (every action that starts before a cut-off time) and says so.
inline constexpr size_t kMaxTimelineBoxes = 12000;

// The SVG: rows per rank, a time axis in `unit` ("s", "units"), a legend. Box titles read
// "rank R F3.1 start=S end=E" and idle titles "rank R idle start=S end=E" (%.9g).
std::string ScheduleTimelineSvg(const schedule::SimResult& sim, int virtual_stages,
                                const std::string& unit, size_t max_boxes = kMaxTimelineBoxes);

// An HTML block: a summary line (schedule, pp, micro-batches, makespan, bubble fraction and
// idle/busy, the closed form when one exists) followed by the timeline SVG.
std::string ScheduleTimelineHtml(const schedule::ScheduleSpec& spec, const schedule::SimResult& sim,
                                 const std::string& unit);

// The pipeline schedule of a costed layout, simulated in seconds: per chunk, F = B = W = its pp
// rank's time per micro-batch (Estimate::stage_microbatch_s: the first rank, each middle one, the
// last) / (3 V), the cost model's convention (a full backward = 2 forwards). The slowest rank is
// busy the estimate's pipeline terms (compute + tp + cp + ep + pp) and the makespan is those plus
// time.bubble (cost::PipelineBubble) wherever its closed form holds. Errors: pp = 1 (no
// pipeline), an invalid schedule, or a schedule too large to generate.
core::Result<schedule::SimResult> SimulateLayoutSchedule(const cost::Estimate& estimate,
                                                         schedule::ScheduleSpec* spec_out);

// A self-contained page for `pentamesh schedule --html`: the timeline and each rank's program.
std::string RenderScheduleHtml(const schedule::ScheduleSpec& spec,
                               const std::vector<schedule::Program>& programs,
                               const schedule::SimResult& sim, const std::string& costs_text);

// Writes RenderScheduleHtml's page; the error names the path and the OS reason.
core::Status WriteScheduleHtml(const schedule::ScheduleSpec& spec,
                               const std::vector<schedule::Program>& programs,
                               const schedule::SimResult& sim, const std::string& costs_text,
                               const std::string& path);

}  // namespace pentamesh::report

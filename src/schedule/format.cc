// Rendering of programs, timeline grids and Chrome traces.
#include "schedule/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pentamesh::schedule {

std::string FormatProgram(const Program& program, bool show_chunk) {
  std::string out;
  for (const Action& a : program) {
    if (!out.empty()) out += ' ';
    out += ToString(a, show_chunk);
  }
  return out;
}

std::string FormatPrograms(const std::vector<Program>& programs, int virtual_stages) {
  std::string out;
  for (size_t rank = 0; rank < programs.size(); ++rank) {
    out += fmt::format("rank {}: {}\n", rank, FormatProgram(programs[rank], virtual_stages > 1));
  }
  return out;
}

namespace {

double ShortestAction(const SimResult& result) {
  double shortest = 0.0;
  for (const auto& rank_timeline : result.timeline) {
    for (const Timing& t : rank_timeline) {
      const double d = t.end_s - t.start_s;
      if (d > 0 && (shortest == 0.0 || d < shortest)) shortest = d;
    }
  }
  return shortest > 0 ? shortest : 1.0;
}

}  // namespace

std::string FormatGrid(const SimResult& result, int virtual_stages, double slot_s, int max_rows) {
  const bool chunks = virtual_stages > 1;
  if (!(slot_s > 0) || !std::isfinite(slot_s)) slot_s = ShortestAction(result);
  max_rows = std::max(max_rows, 0);
  const int ranks = static_cast<int>(result.timeline.size());
  // Clamped before the cast: a tiny slot must not overflow the row count.
  const double rows_exact = std::min(result.makespan_s / slot_s, 1e9);
  const int rows = static_cast<int>(std::ceil(rows_exact - 1e-9));
  size_t width = 6;  // "rank N"
  for (const auto& rank_timeline : result.timeline) {
    for (const Timing& t : rank_timeline)
      width = std::max(width, ToString(t.action, chunks).size());
  }
  std::string out = "step ";
  for (int rank = 0; rank < ranks; ++rank) {
    out += fmt::format(" {:>{}}", fmt::format("rank {}", rank), width);
  }
  out += '\n';
  std::vector<size_t> cursor(static_cast<size_t>(ranks), 0);
  const int shown = std::min(rows, max_rows);
  for (int row = 0; row < shown; ++row) {
    const double lo = row * slot_s, hi = (row + 1) * slot_s, mid = (row + 0.5) * slot_s;
    out += fmt::format("{:>4} ", row);
    for (int rank = 0; rank < ranks; ++rank) {
      const auto& tl = result.timeline[rank];
      size_t& c = cursor[rank];
      while (c < tl.size() && tl[c].end_s <= lo + 1e-9 * slot_s) ++c;
      std::string cell = ".";
      // An action that starts inside this slot is named; one still running shows "-".
      if (c < tl.size() && tl[c].start_s < hi - 1e-9 * slot_s) {
        const bool starts = tl[c].start_s >= lo - 1e-9 * slot_s;
        cell = starts ? ToString(tl[c].action, chunks) : (tl[c].end_s > mid ? "-" : ".");
      }
      out += fmt::format(" {:>{}}", cell, width);
    }
    out += '\n';
  }
  if (rows > shown) out += fmt::format("... {} more rows\n", rows - shown);
  return out;
}

nlohmann::json ChromeTrace(const SimResult& result, int virtual_stages, double us_per_s) {
  const bool chunks = virtual_stages > 1;
  nlohmann::json events = nlohmann::json::array();
  for (size_t rank = 0; rank < result.timeline.size(); ++rank) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", rank},
                      {"args", {{"name", fmt::format("pp rank {}", rank)}}}});
    for (const Timing& t : result.timeline[rank]) {
      const char kind[2] = {KindLetter(t.action.kind), '\0'};
      events.push_back({{"name", ToString(t.action, chunks)},
                        {"cat", kind},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", rank},
                        {"ts", t.start_s * us_per_s},
                        {"dur", (t.end_s - t.start_s) * us_per_s},
                        {"args",
                         {{"microbatch", t.action.microbatch},
                          {"chunk", t.action.chunk},
                          {"kind", std::string(kind)}}}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace pentamesh::schedule

// Text and trace views of schedules: a program as "F0 F1 B0 ...", a step x rank timeline grid of a
// simulation (rows are time slots, like PyTorch pipelining's step x rank table), and the simulated
// timeline as Chrome trace-event JSON (opens in Perfetto / chrome://tracing).
// Invariant: printing never changes or re-derives the schedule; it only renders a
// Program/SimResult.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schedule/action.h"
#include "schedule/simulate.h"

namespace pentamesh::schedule {

// "F0 F1 B0 F2 B1 B2"; chunk suffixes ("F0.1") when show_chunk.
std::string FormatProgram(const Program& program, bool show_chunk = false);
// One line per rank: "rank 0: F0 F1 ...".
std::string FormatPrograms(const std::vector<Program>& programs, int virtual_stages);

// Step x rank grid: one row per time slot of width slot_s (0: the shortest action's duration), one
// column per rank. A cell shows the action that starts in the slot, "-" while it continues, "."
// when the rank is idle. At most max_rows rows (then a "... N more" line).
std::string FormatGrid(const SimResult& result, int virtual_stages, double slot_s = 0.0,
                       int max_rows = 400);

// Chrome trace events: one complete ("X") event per action, pid 0, tid = pp rank, time in
// microseconds = seconds * us_per_s (use 1e6 for costs in seconds). A JSON object
// {"traceEvents": [...], "displayTimeUnit": "ms"}.
nlohmann::json ChromeTrace(const SimResult& result, int virtual_stages, double us_per_s = 1e6);

}  // namespace pentamesh::schedule

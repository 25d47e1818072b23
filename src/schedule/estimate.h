// Fast schedule estimates (cost/ takes its pipeline bubble from here; `pentamesh schedule` prints
// them): bubble fraction and peak in-flight activations under equal action costs (F = B = W = 1,
// full backward = 2), answered by a closed form where the simulator is proven (by tests/schedule's
// exhaustive sweep) to match it, else by the simulator behind a thread-safe memo. Plus a helper
// that simulates with unequal per-action costs.
//
// Closed forms (each schedule's row in table.cc; p = pp, m = micro-batches, V = virtual stages,
// r = pp rank):
//   bubble fraction (mean idle / makespan):
//     gpipe, 1f1b:        (p-1) / (m + p - 1)                       every m
//     interleaved:V       (p-1) / (V*m + p - 1)                     every valid m (m % p == 0)
//     zb (ZB-H1):         (p-1) / (3m + p - 1)                      m >= p
//                         (2p-1-m) / (2m + 2p - 1)                  m < p
//     zbv (ZB-V):         (p-1) / (6m + p - 1)                      m >= 2p - 1; simulated below
//   peak in-flight chunk activations on rank r:
//     gpipe: m;  1f1b: min(m, p - r);  zb: min(m, p);  zbv: 2p when m >= 2p - 1;
//     interleaved: min(2(p - r - 1) + (V - 1)p + 1, V*m)   (divide by V for stage-equivalents)
//   where no closed form is listed, the answer comes from the program (simulated).
// Invariant: every answer equals Simulate() on MakeAll() with Costs::Equal().
#pragma once

#include <optional>

#include "core/status.h"
#include "schedule/generate.h"
#include "schedule/simulate.h"

namespace pentamesh::schedule {

// Mean over ranks of idle / makespan, equal costs. Closed form or memoized simulation.
core::Result<double> BubbleFraction(Schedule kind, int pp, int microbatches,
                                    int virtual_stages = 1);
// Peak in-flight (mb, chunk) activations of `rank`, equal costs (memory does not depend on costs).
core::Result<int> PeakInFlight(Schedule kind, int pp, int microbatches, int virtual_stages,
                               int rank);

// The closed forms alone (the row's); nullopt where none is proven (zbv with m < 2p - 1, or a row
// without one).
// REQUIRES: a valid spec and 0 <= rank < pp.
std::optional<double> BubbleFractionClosedForm(const ScheduleSpec& spec);
// The same in doubles, for any size (cost/'s pipeline bubble: cost::EstimateLayout);
// virtual_stages 2 with kZeroBubble is ZB-V. REQUIRES: a valid schedule of these sizes.
std::optional<double> BubbleFractionClosedForm(Schedule kind, double pp, double microbatches,
                                               double virtual_stages);
std::optional<int> PeakInFlightClosedForm(const ScheduleSpec& spec, int rank);

// Always the simulator (memoized per spec; thread-safe). The reference the closed forms match.
core::Result<double> BubbleFractionSimulated(const ScheduleSpec& spec);

// Simulates `spec` with the given (possibly unequal, per-stage) costs. Not memoized.
core::Result<SimResult> SimulateSchedule(const ScheduleSpec& spec, const Costs& costs);

}  // namespace pentamesh::schedule

// Closed forms and the memoized simulator behind the planner's schedule estimates.
#include "schedule/estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace pentamesh::schedule {
namespace {

class BubbleMemo {
 public:
  std::optional<double> Find(uint64_t key) const {
    std::shared_lock lock(mutex_);
    const auto it = table_.find(key);
    if (it == table_.end()) return std::nullopt;
    return it->second;
  }
  void Insert(uint64_t key, double value) {
    std::unique_lock lock(mutex_);
    table_.emplace(key, value);
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint64_t, double> table_;
};

BubbleMemo& Memo() {
  static BubbleMemo memo;
  return memo;
}

// The validity limits keep the fields apart: V <= 64 (bits 0-7), m <= 65536 (bits 8-24),
// pp <= 1024 (bits 32-42), kind (bits 48+).
uint64_t Key(const ScheduleSpec& s) {
  return (static_cast<uint64_t>(s.kind) << 48) | (static_cast<uint64_t>(s.pp) << 32) |
         (static_cast<uint64_t>(s.microbatches) << 8) | static_cast<uint64_t>(s.virtual_stages);
}

}  // namespace

std::optional<double> BubbleFractionClosedForm(Schedule kind, double p, double m, double v) {
  switch (kind) {
    case Schedule::kGPipe:
    case Schedule::kOneFOneB:
      return (p - 1) / (m + p - 1);
    case Schedule::kInterleaved:
      return (p - 1) / (v * m + p - 1);
    case Schedule::kZeroBubble:
      if (v == 2) {  // ZB-V
        if (m < 2 * p - 1) return std::nullopt;
        return (p - 1) / (6 * m + p - 1);
      }
      // ZB-H1: makespan 3m + p - 1, plus p - m when m < p (the last stage waits for the first
      // F of every micro-batch to cross the pipeline); busy 3m.
      return (p - 1 + std::max(0.0, p - m)) / (3 * m + p - 1 + std::max(0.0, p - m));
  }
  return std::nullopt;
}

std::optional<double> BubbleFractionClosedForm(const ScheduleSpec& s) {
  return BubbleFractionClosedForm(s.kind, s.pp, s.microbatches, s.virtual_stages);
}

std::optional<int> PeakInFlightClosedForm(const ScheduleSpec& s, int rank) {
  const int p = s.pp, m = s.microbatches, v = s.virtual_stages;
  switch (s.kind) {
    case Schedule::kGPipe:
      return m;
    case Schedule::kOneFOneB:
      return std::min(m, p - rank);
    case Schedule::kInterleaved:
      return std::min(2 * (p - rank - 1) + (v - 1) * p + 1, v * m);
    case Schedule::kZeroBubble:
      if (!s.v_shape()) return std::min(m, p);
      if (m >= 2 * p - 1) return 2 * p;
      return std::nullopt;
  }
  return std::nullopt;
}

core::Result<SimResult> SimulateSchedule(const ScheduleSpec& spec, const Costs& costs) {
  PM_ASSIGN_OR_RETURN(std::vector<Program> programs, MakeAll(spec));
  PM_ASSIGN_OR_RETURN(SimResult result, Simulate(programs, spec.topology(), costs));
  if (!result.complete) {
    return core::Status::Error(fmt::format("schedule {} pp={} m={}: {}", ToString(spec), spec.pp,
                                           spec.microbatches, result.deadlock));
  }
  return result;
}

core::Result<double> BubbleFractionSimulated(const ScheduleSpec& spec) {
  PM_RETURN_IF_ERROR(ValidateSchedule(spec));
  const uint64_t key = Key(spec);
  if (const auto hit = Memo().Find(key)) return *hit;
  PM_ASSIGN_OR_RETURN(SimResult result, SimulateSchedule(spec, Costs::Equal()));
  Memo().Insert(key, result.bubble_fraction);
  return result.bubble_fraction;
}

core::Result<double> BubbleFraction(Schedule kind, int pp, int microbatches, int virtual_stages) {
  const ScheduleSpec spec{kind, pp, microbatches, virtual_stages};
  PM_RETURN_IF_ERROR(ValidateSchedule(spec));
  if (const auto closed = BubbleFractionClosedForm(spec)) return *closed;
  return BubbleFractionSimulated(spec);
}

core::Result<int> PeakInFlight(Schedule kind, int pp, int microbatches, int virtual_stages,
                               int rank) {
  const ScheduleSpec spec{kind, pp, microbatches, virtual_stages};
  PM_RETURN_IF_ERROR(ValidateSchedule(spec));
  if (rank < 0 || rank >= pp) {
    return core::Status::Error(
        fmt::format("schedule {}: rank={} must be in [0, pp={})", ToString(spec), rank, pp));
  }
  if (const auto closed = PeakInFlightClosedForm(spec, rank)) return *closed;
  // No closed form (zbv with few micro-batches): walk the rank's program, O(m).
  PM_ASSIGN_OR_RETURN(Program program, Make(kind, pp, rank, microbatches, virtual_stages));
  return schedule::PeakInFlight(program, virtual_stages, microbatches);
}

}  // namespace pentamesh::schedule

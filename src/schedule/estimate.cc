// The schedules' closed forms (their rows, table.cc) and the memoized simulator behind the
// planner's schedule estimates.
#include "schedule/estimate.h"

#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "schedule/table.h"

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
  const ScheduleRow* row = FindRow(kind);
  if (row == nullptr || row->bubble_fraction == nullptr) return std::nullopt;
  return row->bubble_fraction(p, m, v);
}

std::optional<double> BubbleFractionClosedForm(const ScheduleSpec& s) {
  return BubbleFractionClosedForm(s.kind, s.pp, s.microbatches, s.virtual_stages);
}

std::optional<int> PeakInFlightClosedForm(const ScheduleSpec& s, int rank) {
  const ScheduleRow* row = FindRow(s.kind);
  if (row == nullptr || row->peak_in_flight == nullptr) return std::nullopt;
  return row->peak_in_flight(s.pp, s.microbatches, s.virtual_stages, rank);
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

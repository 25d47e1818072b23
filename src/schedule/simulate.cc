// The dry-run simulator, the completeness and pairing checks, and the derived p2p transfers.
// Invariant: start(action) = max(end of the rank's previous action, end of each dependency
// [+ p2p latency when remote]); the order in which ranks are visited cannot change any time.
#include "schedule/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/check.h"
#include "schedule/format.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {
namespace {

constexpr double kNotDone = -1.0;

struct Dep {
  ActionKind kind;
  int microbatch;
  int stage;
};

// The actions `a` (at stage s) waits for. Returns how many were written to deps.
int Dependencies(const Action& a, int stage, int stages, Dep deps[2]) {
  switch (a.kind) {
    case ActionKind::kForward:
      if (stage == 0) return 0;
      deps[0] = {ActionKind::kForward, a.microbatch, stage - 1};
      return 1;
    case ActionKind::kBackward:
      deps[0] = {ActionKind::kForward, a.microbatch, stage};
      if (stage == stages - 1) return 1;
      deps[1] = {ActionKind::kBackward, a.microbatch, stage + 1};
      return 2;
    case ActionKind::kWeight:
      deps[0] = {ActionKind::kBackward, a.microbatch, stage};
      return 1;
  }
  return 0;
}

size_t Slot(const Topology& t, int microbatch, int stage) {
  return static_cast<size_t>(microbatch) * static_cast<size_t>(t.stages()) +
         static_cast<size_t>(stage);
}

// Ranges, duplicates and cost shapes. Fills has_w[(mb, stage)] for the B/W split.
core::Status CheckInputs(const std::vector<Program>& programs, const Topology& t,
                         const Costs& costs, std::vector<uint8_t>& has_w) {
  if (t.pp < 1 || t.virtual_stages < 1 || t.microbatches < 1) {
    return core::Status::Error(fmt::format("simulate: pp={} V={} m={} must all be >= 1", t.pp,
                                           t.virtual_stages, t.microbatches));
  }
  if (t.placement == Placement::kVShape && t.virtual_stages != 2) {
    return core::Status::Error(
        fmt::format("simulate: the V-shaped placement needs V=2 (V={})", t.virtual_stages));
  }
  if (static_cast<int>(programs.size()) != t.pp) {
    return core::Status::Error(
        fmt::format("simulate: {} programs given for pp={}", programs.size(), t.pp));
  }
  const int64_t pairs = int64_t{t.microbatches} * t.pp * t.virtual_stages;
  if (pairs > kMaxScheduledPairs) {
    return core::Status::Error(
        fmt::format("simulate: m * pp * V = {} exceeds {}", pairs, kMaxScheduledPairs));
  }
  if (costs.per_stage.size() != 1 && static_cast<int>(costs.per_stage.size()) != t.stages()) {
    return core::Status::Error(fmt::format("simulate: costs.per_stage has {} entries, need 1 or {}",
                                           costs.per_stage.size(), t.stages()));
  }
  for (const ActionCosts& c : costs.per_stage) {
    for (double v : {c.time_f_s, c.time_b_s, c.time_w_s}) {
      if (!std::isfinite(v) || v < 0) {
        return core::Status::Error(
            fmt::format("simulate: action cost {} must be finite and >= 0", v));
      }
    }
  }
  if (!std::isfinite(costs.time_p2p_s) || costs.time_p2p_s < 0) {
    return core::Status::Error(
        fmt::format("simulate: time_p2p_s={} must be finite and >= 0", costs.time_p2p_s));
  }
  const size_t n = static_cast<size_t>(t.microbatches) * static_cast<size_t>(t.stages());
  std::vector<uint8_t> seen(3 * n, 0);
  has_w.assign(n, 0);
  for (int rank = 0; rank < t.pp; ++rank) {
    for (size_t i = 0; i < programs[rank].size(); ++i) {
      const Action& a = programs[rank][i];
      if (a.chunk < 0 || a.chunk >= t.virtual_stages || a.microbatch < 0 ||
          a.microbatch >= t.microbatches) {
        return core::Status::Error(fmt::format(
            "simulate: rank {} action #{} {}: chunk must be in [0, {}) and micro-batch in [0, {})",
            rank, i, ToString(a, true), t.virtual_stages, t.microbatches));
      }
      const size_t slot = Slot(t, a.microbatch, t.Stage(rank, a.chunk));
      uint8_t& count = seen[static_cast<size_t>(a.kind) * n + slot];
      if (count++ != 0) {
        return core::Status::Error(fmt::format("simulate: rank {} action #{} {} is listed twice",
                                               rank, i, ToString(a, true)));
      }
      if (a.kind == ActionKind::kWeight) has_w[slot] = 1;
    }
  }
  return core::Status::Ok();
}

double Cost(const Action& a, int stage, bool split, const Costs& costs) {
  const ActionCosts& c = costs.at(stage);
  switch (a.kind) {
    case ActionKind::kForward:
      return c.time_f_s;
    case ActionKind::kBackward:
      return split ? c.time_b_s : c.time_b_s + c.time_w_s;
    case ActionKind::kWeight:
      return c.time_w_s;
  }
  return 0.0;
}

// Who waits on what, for every rank that could not finish.
std::string DeadlockReport(const std::vector<Program>& programs, const Topology& t,
                           const std::vector<size_t>& pos, const std::vector<double>& done,
                           const SimResult& partial) {
  const bool chunks = t.virtual_stages > 1;
  const size_t n = static_cast<size_t>(t.microbatches) * static_cast<size_t>(t.stages());
  std::string out = "deadlock: no rank can make progress\n";
  for (int rank = 0; rank < t.pp; ++rank) {
    if (pos[rank] >= programs[rank].size()) continue;
    const Action& a = programs[rank][pos[rank]];
    const int stage = t.Stage(rank, a.chunk);
    Dep deps[2];
    const int count = Dependencies(a, stage, t.stages(), deps);
    out += fmt::format("  rank {} stuck at action #{} {} (stage {}), waiting for", rank, pos[rank],
                       ToString(a, chunks), stage);
    for (int d = 0; d < count; ++d) {
      if (done[static_cast<size_t>(deps[d].kind) * n +
               Slot(t, deps[d].microbatch, deps[d].stage)] >= 0) {
        continue;
      }
      const int dep_rank = t.RankOf(deps[d].stage);
      const Action dep{deps[d].kind, t.ChunkOf(deps[d].stage), deps[d].microbatch};
      out += fmt::format(" {} on rank {}", ToString(dep, chunks), dep_rank);
      if (pos[dep_rank] < programs[dep_rank].size()) {
        out += fmt::format(" (which is at #{} {})", pos[dep_rank],
                           ToString(programs[dep_rank][pos[dep_rank]], chunks));
      } else {
        out += " (which has finished its program without it)";
      }
    }
    out += "\n";
  }
  out += "executed so far:\n" + FormatGrid(partial, t.virtual_stages);
  return out;
}

void FillStats(const std::vector<Program>& programs, const Topology& t, SimResult& result) {
  result.makespan_s = 0.0;
  for (const auto& rank_timeline : result.timeline) {
    if (!rank_timeline.empty())
      result.makespan_s = std::max(result.makespan_s, rank_timeline.back().end_s);
  }
  double idle_total = 0.0, busy_total = 0.0, fraction_sum = 0.0;
  result.ranks.assign(static_cast<size_t>(t.pp), RankStats{});
  for (int rank = 0; rank < t.pp; ++rank) {
    RankStats& stats = result.ranks[rank];
    for (const Timing& timing : result.timeline[rank])
      stats.busy_s += timing.end_s - timing.start_s;
    stats.idle_s = result.makespan_s - stats.busy_s;
    stats.actions_done = static_cast<int>(result.timeline[rank].size());
    stats.peak_in_flight = PeakInFlight(programs[rank], t.virtual_stages, t.microbatches);
    idle_total += stats.idle_s;
    busy_total += stats.busy_s;
    if (result.makespan_s > 0) fraction_sum += stats.idle_s / result.makespan_s;
  }
  result.bubble_fraction = fraction_sum / t.pp;
  result.bubble_ratio = busy_total > 0 ? idle_total / busy_total : 0.0;
}

}  // namespace

core::Result<SimResult> Simulate(const std::vector<Program>& programs, const Topology& t,
                                 const Costs& costs) {
  std::vector<uint8_t> has_w;
  PM_RETURN_IF_ERROR(CheckInputs(programs, t, costs, has_w));
  const size_t n = static_cast<size_t>(t.microbatches) * static_cast<size_t>(t.stages());
  std::vector<double> done(3 * n, kNotDone);  // end time per (kind, mb, stage)
  std::vector<size_t> pos(static_cast<size_t>(t.pp), 0);
  std::vector<double> free_s(static_cast<size_t>(t.pp), 0.0);
  SimResult result;
  result.timeline.resize(static_cast<size_t>(t.pp));
  size_t remaining = 0;
  for (const Program& p : programs) remaining += p.size();
  for (bool progress = true; progress && remaining > 0;) {
    progress = false;
    for (int rank = 0; rank < t.pp; ++rank) {
      const Program& program = programs[rank];
      while (pos[rank] < program.size()) {
        const Action& a = program[pos[rank]];
        const int stage = t.Stage(rank, a.chunk);
        Dep deps[2];
        const int count = Dependencies(a, stage, t.stages(), deps);
        double start_s = free_s[rank];
        bool ready = true;
        for (int d = 0; d < count && ready; ++d) {
          const double end_s = done[static_cast<size_t>(deps[d].kind) * n +
                                    Slot(t, deps[d].microbatch, deps[d].stage)];
          ready = end_s >= 0;
          const double latency_s = t.RankOf(deps[d].stage) != rank ? costs.time_p2p_s : 0.0;
          start_s = std::max(start_s, end_s + latency_s);
        }
        if (!ready) break;
        const size_t slot = Slot(t, a.microbatch, stage);
        const double end_s = start_s + Cost(a, stage, has_w[slot] != 0, costs);
        done[static_cast<size_t>(a.kind) * n + slot] = end_s;
        free_s[rank] = end_s;
        result.timeline[rank].push_back({a, start_s, end_s});
        ++pos[rank];
        --remaining;
        progress = true;
      }
    }
  }
  result.complete = remaining == 0;
  FillStats(programs, t, result);
  if (!result.complete) result.deadlock = DeadlockReport(programs, t, pos, done, result);
  return result;
}

int PeakInFlight(const Program& program, int virtual_stages, int microbatches) {
  const size_t n = static_cast<size_t>(virtual_stages) * static_cast<size_t>(microbatches);
  std::vector<uint8_t> split(n, 0);
  auto index = [&](const Action& a) {
    PM_CHECK(a.chunk >= 0 && a.chunk < virtual_stages)
        << ToString(a, true) << " V=" << virtual_stages;
    PM_CHECK(a.microbatch >= 0 && a.microbatch < microbatches)
        << ToString(a, true) << " m=" << microbatches;
    return static_cast<size_t>(a.microbatch) * static_cast<size_t>(virtual_stages) +
           static_cast<size_t>(a.chunk);
  };
  for (const Action& a : program) {
    const size_t i = index(a);  // checks every action's range
    if (a.kind == ActionKind::kWeight) split[i] = 1;
  }
  int in_flight = 0, peak = 0;
  for (const Action& a : program) {
    if (a.kind == ActionKind::kForward) {
      peak = std::max(peak, ++in_flight);
    } else if ((a.kind == ActionKind::kWeight) == (split[index(a)] != 0)) {
      --in_flight;  // freed by W when split, by B otherwise
    }
  }
  return peak;
}

std::vector<CommOp> ExpandComm(const Program& program, const Topology& t, int rank) {
  std::vector<CommOp> ops;
  const int last = t.stages() - 1;
  for (size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    const int s = t.Stage(rank, a.chunk);
    const int index = static_cast<int>(i);
    if (a.kind == ActionKind::kForward) {
      if (s > 0) ops.push_back({CommKind::kRecvF, t.RankOf(s - 1), a.microbatch, s - 1, index});
      if (s < last) ops.push_back({CommKind::kSendF, t.RankOf(s + 1), a.microbatch, s, index});
    } else if (a.kind == ActionKind::kBackward) {
      if (s < last) ops.push_back({CommKind::kRecvB, t.RankOf(s + 1), a.microbatch, s + 1, index});
      if (s > 0) ops.push_back({CommKind::kSendB, t.RankOf(s - 1), a.microbatch, s, index});
    }
  }
  return ops;
}

}  // namespace pentamesh::schedule

// Dry run of a pipeline schedule: every rank executes its Program in order; an action starts when
// the rank is free and its data dependencies are done (plus an optional p2p latency when the
// producer is on another rank). Sends are asynchronous (buffered), so a rank only ever waits on a
// receive: a deadlock is a cycle of data dependencies through the program orders, which the
// simulator detects and reports (which rank is stuck on which action, waiting for what).
//
// Dependencies, with s = Topology::Stage(rank, chunk) and S = pp * V stages:
//   F(mb, s)  needs F(mb, s-1)                         (activation from the previous stage)
//   B(mb, s)  needs F(mb, s) and B(mb, s+1), or only F(mb, S-1) on the last stage (the loss)
//   W(mb, s)  needs B(mb, s)                           (same rank)
// Costs: F costs time_f_s; B costs time_b_s when the rank's program also holds W(mb, chunk)
// (input-gradient half), else time_b_s + time_w_s (full backward); W costs time_w_s.
// In-flight activations: (mb, chunk) counts from the start of its F until the end of its W when
// split, else until the end of its B. Counted in chunk activations (1/V of a rank's layers).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "schedule/action.h"

namespace pentamesh::schedule {

struct ActionCosts {
  double time_f_s = 1.0;  // forward of one micro-batch through one chunk
  double time_b_s = 1.0;  // input-gradient backward (the whole backward is time_b_s + time_w_s)
  double time_w_s = 1.0;  // weight-gradient backward
};

struct Costs {
  // One entry for every stage, or a single entry used for all stages (uniform split).
  std::vector<ActionCosts> per_stage = std::vector<ActionCosts>(1);
  double time_p2p_s = 0.0;  // added when an input comes from another rank

  const ActionCosts& at(int stage) const {
    return per_stage.size() == 1 ? per_stage[0] : per_stage[stage];
  }
  // F = B = W = 1: the equal-cost model the closed forms use (full backward = 2).
  static Costs Equal() { return Costs{}; }
};

struct Timing {
  Action action;
  double start_s = 0.0;
  double end_s = 0.0;
};

struct RankStats {
  double busy_s = 0.0;
  double idle_s = 0.0;     // makespan - busy (waiting at the start, middle and end)
  int peak_in_flight = 0;  // chunk activations stashed at once (see header comment)
  int actions_done = 0;
};

struct SimResult {
  bool complete = false;         // every action of every rank ran (false: deadlock)
  double makespan_s = 0.0;       // end of the last action (start is 0)
  double bubble_fraction = 0.0;  // mean over ranks of idle / makespan
  double bubble_ratio = 0.0;     // total idle / total busy (Megatron's bubble time / ideal time)
  std::vector<RankStats> ranks;
  std::vector<std::vector<Timing>> timeline;  // per rank, the actions that ran, in order
  std::string deadlock;  // when !complete: who waits on what, and the grid so far
};

// REQUIRES nothing: malformed programs (wrong rank count, chunk or micro-batch out of range, an
// action listed twice, a cost vector of the wrong length) return an error naming the rank and
// action.
core::Result<SimResult> Simulate(const std::vector<Program>& programs, const Topology& topology,
                                 const Costs& costs = Costs::Equal());

// Peak in-flight chunk activations of one rank's program (program order = time order on a rank).
int PeakInFlight(const Program& program, int virtual_stages, int microbatches);

// The point-to-point transfers a rank performs, derived from its program: RecvF before F(s > 0),
// SendF after F(s < S-1), RecvB before B(s < S-1), SendB after B(s > 0). Stages s and s+1 live on
// different ranks whenever pp >= 2, so peer != rank there (a single-rank pipeline has no transfers
// across ranks: peer == rank, a local copy).
enum class CommKind : uint8_t { kSendF, kRecvF, kSendB, kRecvB };
struct CommOp {
  CommKind kind;
  int peer;  // the other pp rank
  int microbatch;
  int stage;         // the virtual stage that produced the tensor
  int action_index;  // the program action it serves: receives run before it, sends after it
  bool operator==(const CommOp&) const = default;
};
std::vector<CommOp> ExpandComm(const Program& program, const Topology& topology, int rank);

// Completeness: each (mb, stage) has exactly one F and one B on its rank and either every or no
// (mb, stage) has exactly one W; `require_w` demands the split. Errors name the first violation.
core::Status CheckComplete(const std::vector<Program>& programs, const Topology& topology,
                           bool require_w);
// Pairing: for every ordered rank pair and direction, the sequence of sends equals the sequence of
// receives (same micro-batch and stage, in the same order: FIFO matching needs no tags).
core::Status CheckCommPairing(const std::vector<Program>& programs, const Topology& topology);

}  // namespace pentamesh::schedule

// Pipeline schedule generators: pure functions (pp, rank, micro-batches, V) -> the Program of one
// pp rank. One short generator per schedule, written as named phases (warmup, steady, cooldown).
//
// Validity rules (ValidateSchedule returns the first violated rule, naming the field); the
// per-schedule ones are the rows of table.cc:
//   all:          1 <= pp <= 1024, 1 <= microbatches <= 65536, 0 <= rank < pp
//   gpipe, 1f1b:  virtual_stages == 1
//   zb:           virtual_stages == 1 (ZB-H1) or 2 (ZB-V, V-shaped placement)
//   interleaved:  pp >= 2, 2 <= virtual_stages <= 64, microbatches % pp == 0 (Megatron-LM's
//                 rules; the same ones spec::Validate applies to a Layout)
// Invariant: for a valid spec every generated program set is complete (one F and one B per
// (micro-batch, virtual stage), plus one W for zb/zbv) and deadlock-free; tests/schedule proves
// it for pp <= 8, m <= 32, V <= 4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "schedule/action.h"
#include "spec/layout.h"

namespace pentamesh::schedule {

using spec::Schedule;

inline constexpr int kMaxPp = 1024;
inline constexpr int kMaxMicrobatches = 65536;
inline constexpr int kMaxVirtualStages = 64;
// Bound on the (micro-batch, stage) pairs MakeAll and Simulate materialise (about 100 MB).
inline constexpr int64_t kMaxScheduledPairs = int64_t{1} << 22;

struct ScheduleSpec {
  Schedule kind = Schedule::kOneFOneB;
  int pp = 1;
  int microbatches = 1;
  int virtual_stages = 1;

  // ZB-V is kZeroBubble with two chunks per rank, placed in a V.
  bool v_shape() const { return kind == Schedule::kZeroBubble && virtual_stages == 2; }
  Topology topology() const {
    return {pp, virtual_stages, microbatches, v_shape() ? Placement::kVShape : Placement::kLoop};
  }
};

// "gpipe", "1f1b", "interleaved:V", "zb" (ZB-H1), "zbv" (ZB-V).
std::string ToString(const ScheduleSpec& spec);
// Parses the CLI/Layout spelling: gpipe | 1f1b | interleaved:V | zb | zbv (pp and m are set by
// the caller).
core::Result<ScheduleSpec> ParseScheduleKind(const std::string& text);

core::Status ValidateSchedule(const ScheduleSpec& spec);

// The pipeline part of a Layout (pp, schedule, virtual_stages) with the step's micro-batch count
// (spec::MicroBatches(train, layout)), validated.
core::Result<ScheduleSpec> FromLayout(const spec::Layout& layout, int64_t microbatches);

// The generators. REQUIRES: ValidateSchedule(spec).ok() and 0 <= rank < pp (PM_CHECKed).
Program GPipe(int pp, int rank, int microbatches);
Program OneFOneB(int pp, int rank, int microbatches);
Program Interleaved(int pp, int rank, int microbatches, int virtual_stages);
Program ZeroBubbleH1(int pp, int rank, int microbatches);
Program ZeroBubbleV(int pp, int rank, int microbatches);

// Validates, then calls the generator of `kind`'s row (table.h).
core::Result<Program> Make(Schedule kind, int pp, int rank, int microbatches,
                           int virtual_stages = 1);
// Every rank's program, index = pp rank. Also requires m * pp * V <= kMaxScheduledPairs (memory).
core::Result<std::vector<Program>> MakeAll(const ScheduleSpec& spec);

// Megatron's interleaved order: the (micro-batch, chunk) of the k-th forward / backward of a rank.
Action InterleavedForward(int pp, int virtual_stages, int k);
Action InterleavedBackward(int pp, int virtual_stages, int k);

// The pipeline arithmetic the generators above are built on, in 64-bit for cost/'s activation
// memory (cost/stage.cc), which asks here instead of repeating it (order.cc).
// Forwards rank `rank` runs before its first backward, from the schedule's row (table.cc: gpipe
// all m; 1f1b and zb (ZB-H1) p - r - 1; interleaved 2(p - r - 1) + (V - 1)p; each at most the
// rank's m x V forwards). Its peak of stashed micro-batch chunks is min(m x V, warm-up + 1).
// REQUIRES: a kind with a row, not ZB-V (its phases are in zero_bubble_v.cc), 0 <= rank < pp.
int64_t WarmupForwards(Schedule kind, int64_t pp, int64_t rank, int64_t microbatches,
                       int64_t virtual_stages);
// ZB-H1: the W passes rank r defers to fill its cooldown bubble (r of them), so at most
// min(r, m - 1) micro-batches wait for W while B walks the next one.
int64_t ZeroBubbleDeferredW(int64_t rank);
// Megatron's interleaved order: the chunk (0..V-1) of the k-th forward of a rank (backwards walk
// the chunks in reverse: V - 1 - this of the k-th backward).
int64_t InterleavedForwardChunk(int64_t pp, int64_t virtual_stages, int64_t k);

}  // namespace pentamesh::schedule

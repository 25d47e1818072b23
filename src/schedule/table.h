// The schedule table: one row per spec::Schedule value holding every fact of a schedule that is
// not its generator's body. Its readers:
//   make.cc      ValidateSchedule (the row's rules), Make (the row's generator)
//   order.cc     WarmupForwards (generators, and cost/'s activation memory through it)
//   estimate.cc  BubbleFraction, PeakInFlight: the row's closed form, or the simulator when the
//                row has none
//   plan/space   the schedules the planner searches, with their virtual stages
// A schedule's words ("1f1b", "zero-bubble") and printed name are spec/'s (spec/layout.cc
// kScheduleWords; spec is below schedule), so `--layout`, `--allow` and `pentamesh schedule` read
// them there. tests/schedule (TableTest.*, the sweep) and tests/cost (StageInflight.*) walk this
// table: every row generates complete, deadlock-free programs whose bubble and peak in-flight
// count equal its closed forms, and whose words both parsers accept.
//
// Adding a schedule (docs/ARCHITECTURE.md, "How to add"): its enum value (spec/layout.h) and
// words (spec/layout.cc), its generator (schedule/NAME.cc, declared in generate.h), and its row
// below (table.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/status.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {

// Whether `plan` searches a schedule.
enum class Searched : uint8_t {
  kNo,
  kUnlessNoGpipe,  // searched unless the plan is told --no-gpipe (SpaceOptions::include_gpipe)
  kYes,
};

// A variant with its own chunk count that only `pentamesh schedule` draws, named by its own words
// (ZB-V: "zbv" or "zb-v" for the zero-bubble row with two chunks). No words: none.
struct ScheduleVariant {
  const char* words[2] = {nullptr, nullptr};  // the first is the printed name
  int virtual_stages = 0;
};

struct ScheduleRow {
  Schedule kind;
  // One rank's program. REQUIRES: ValidateSchedule(spec).ok() and 0 <= rank < pp.
  Program (*generate)(int pp, int rank, int microbatches, int virtual_stages);
  // The schedule's own rules on virtual_stages and pp (ValidateSchedule checks the ranges every
  // schedule shares first, then these, then microbatches_in_groups_of_pp). Ok: valid.
  core::Status (*validate)(const ScheduleSpec& spec);
  // Whether the backward is split into B (input gradient) and W (weight gradient) passes.
  bool weight_passes;
  // Megatron's interleaved rule: micro-batches run in groups of pp (m % pp == 0).
  bool microbatches_in_groups_of_pp;
  // Forwards rank `rank` runs before its first backward (generate.h WarmupForwards).
  int64_t (*warmup_forwards)(int64_t pp, int64_t rank, int64_t microbatches,
                             int64_t virtual_stages);
  // Closed forms under equal action costs (estimate.h); nullptr, or nullopt for a size, means
  // none is proven: the simulator answers. REQUIRES: a valid spec (and 0 <= rank < pp).
  std::optional<double> (*bubble_fraction)(double pp, double microbatches, double virtual_stages);
  std::optional<int> (*peak_in_flight)(int pp, int microbatches, int virtual_stages, int rank);
  // Whether the planner searches it.
  Searched searched;
  // The virtual stages a layout gives it: 1, or (when 2) any V >= 2, of which the planner
  // searches every V whose pp * V chunks split the model's layers (spec::ChunkLayers). A row with
  // V >= 2 is named with its V: "interleaved:3" (make.cc ToString, ParseScheduleKind).
  int layout_virtual_stages_min;
  ScheduleVariant variant = {};
};

// Every row, in the order the planner searches them (1F1B first: the canonical pp = 1 schedule).
std::span<const ScheduleRow> Schedules();
// The row of `kind`; nullptr when the table has none (ValidateSchedule refuses such a kind).
const ScheduleRow* FindRow(Schedule kind);

}  // namespace pentamesh::schedule

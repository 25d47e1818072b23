// The schedule table (table.h): each schedule's rules, warm-up, closed forms and search, one row
// per schedule. p = pp, m = micro-batches, V = virtual stages, r = pp rank.
#include "schedule/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "core/check.h"

namespace pentamesh::schedule {
namespace {

core::Status Fail(const ScheduleSpec& s, const std::string& reason) {
  return core::Status::Error(fmt::format("schedule {}: {}", ToString(s), reason));
}

// Validity rules (cheap on the accepted path: the planner asks millions of times).
core::Status OneChunk(const ScheduleSpec& s) {
  if (s.virtual_stages == 1) return core::Status::Ok();
  return Fail(s, fmt::format("virtual_stages={} must be 1 (only interleaved has virtual stages)",
                             s.virtual_stages));
}
core::Status ZeroBubbleChunks(const ScheduleSpec& s) {
  if (s.virtual_stages == 1 || s.virtual_stages == 2) return core::Status::Ok();
  return Fail(s, fmt::format("virtual_stages={} must be 1 (ZB-H1) or 2 (ZB-V)", s.virtual_stages));
}
// Megatron-LM's rules, the same ones spec::Validate applies to a Layout.
core::Status InterleavedChunks(const ScheduleSpec& s) {
  if (s.virtual_stages < 2 || s.virtual_stages > kMaxVirtualStages) {
    return Fail(s, fmt::format("virtual_stages={} must be in [2, {}]", s.virtual_stages,
                               kMaxVirtualStages));
  }
  if (s.pp < 2) return Fail(s, fmt::format("interleaved needs pp >= 2 (pp={})", s.pp));
  return core::Status::Ok();
}

// Warm-up forwards: GPipe runs all m; 1F1B and ZB-H1 p - r - 1; interleaved 2(p - r - 1) +
// (V - 1)p; each at most the rank's m x V forwards.
int64_t AllForwards(int64_t, int64_t, int64_t m, int64_t) { return m; }
int64_t DepthBelow(int64_t p, int64_t r, int64_t m, int64_t) { return std::min(p - r - 1, m); }
int64_t ZeroBubbleWarmup(int64_t p, int64_t r, int64_t m, int64_t v) {
  PM_CHECK(v == 1) << "ZB-V's warm-up is its own phases (zero_bubble_v.cc)";
  return DepthBelow(p, r, m, v);
}
int64_t InterleavedWarmup(int64_t p, int64_t r, int64_t m, int64_t v) {
  return std::min(2 * (p - r - 1) + (v - 1) * p, m * v);
}

// Bubble fractions (mean idle / makespan, F = B = W = 1, full backward = 2).
std::optional<double> FlushBubble(double p, double m, double) { return (p - 1) / (m + p - 1); }
std::optional<double> InterleavedBubble(double p, double m, double v) {
  return (p - 1) / (v * m + p - 1);
}
std::optional<double> ZeroBubbleBubble(double p, double m, double v) {
  if (v == 2) {  // ZB-V
    if (m < 2 * p - 1) return std::nullopt;
    return (p - 1) / (6 * m + p - 1);
  }
  // ZB-H1: makespan 3m + p - 1, plus p - m when m < p (the last stage waits for the first F of
  // every micro-batch to cross the pipeline); busy 3m.
  return (p - 1 + std::max(0.0, p - m)) / (3 * m + p - 1 + std::max(0.0, p - m));
}

// Peak in-flight (micro-batch, chunk) activations of rank r.
std::optional<int> GPipePeak(int, int m, int, int) { return m; }
std::optional<int> OneFOneBPeak(int p, int m, int, int r) { return std::min(m, p - r); }
std::optional<int> InterleavedPeak(int p, int m, int v, int r) {
  return std::min(2 * (p - r - 1) + (v - 1) * p + 1, v * m);
}
std::optional<int> ZeroBubblePeak(int p, int m, int v, int) {
  if (v == 1) return std::min(m, p);
  if (m >= 2 * p - 1) return 2 * p;  // ZB-V
  return std::nullopt;
}

constexpr ScheduleRow kRows[] = {
    {.kind = Schedule::kOneFOneB,
     .generate = [](int p, int r, int m, int) { return OneFOneB(p, r, m); },
     .validate = OneChunk,
     .weight_passes = false,
     .microbatches_in_groups_of_pp = false,
     .warmup_forwards = DepthBelow,
     .bubble_fraction = FlushBubble,
     .peak_in_flight = OneFOneBPeak,
     .searched = Searched::kYes,
     .layout_virtual_stages_min = 1},
    {.kind = Schedule::kGPipe,
     .generate = [](int p, int r, int m, int) { return GPipe(p, r, m); },
     .validate = OneChunk,
     .weight_passes = false,
     .microbatches_in_groups_of_pp = false,
     .warmup_forwards = AllForwards,
     .bubble_fraction = FlushBubble,
     .peak_in_flight = GPipePeak,
     .searched = Searched::kUnlessNoGpipe,
     .layout_virtual_stages_min = 1},
    {.kind = Schedule::kZeroBubble,  // ZB-H1, or ZB-V with two chunks (not a layout schedule)
     .generate = [](int p, int r, int m,
                    int v) { return v == 2 ? ZeroBubbleV(p, r, m) : ZeroBubbleH1(p, r, m); },
     .validate = ZeroBubbleChunks,
     .weight_passes = true,
     .microbatches_in_groups_of_pp = false,
     .warmup_forwards = ZeroBubbleWarmup,
     .bubble_fraction = ZeroBubbleBubble,
     .peak_in_flight = ZeroBubblePeak,
     .searched = Searched::kYes,
     .layout_virtual_stages_min = 1,
     .variant = {.words = {"zbv", "zb-v"}, .virtual_stages = 2}},
    {.kind = Schedule::kInterleaved,
     .generate = Interleaved,
     .validate = InterleavedChunks,
     .weight_passes = false,
     .microbatches_in_groups_of_pp = true,
     .warmup_forwards = InterleavedWarmup,
     .bubble_fraction = InterleavedBubble,
     .peak_in_flight = InterleavedPeak,
     .searched = Searched::kYes,
     .layout_virtual_stages_min = 2},
};

constexpr bool OneRowPerKind() {
  for (size_t i = 0; i < std::size(kRows); ++i) {
    for (size_t j = i + 1; j < std::size(kRows); ++j) {
      if (kRows[i].kind == kRows[j].kind) return false;
    }
  }
  return true;
}
static_assert(OneRowPerKind());

}  // namespace

std::span<const ScheduleRow> Schedules() { return kRows; }

const ScheduleRow* FindRow(Schedule kind) {
  for (const ScheduleRow& row : kRows) {
    if (row.kind == kind) return &row;
  }
  return nullptr;
}

}  // namespace pentamesh::schedule

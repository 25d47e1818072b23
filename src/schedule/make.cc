// Validity rules and the dispatch from a schedule kind to its generator: the shared ranges here,
// each schedule's own rules and generator in its row (table.cc).
#include <fmt/format.h>

#include <charconv>

#include "schedule/generate.h"
#include "schedule/table.h"

namespace pentamesh::schedule {
namespace {

std::string ScheduleWords() {
  std::string out;
  for (const spec::FieldWord& w : spec::FieldInfo(spec::LayoutField::kSchedule).words) {
    out += (out.empty() ? "" : ", ") + std::string(w.word);
  }
  return out;
}

}  // namespace

std::string ToString(const ScheduleSpec& spec) {
  if (spec.kind == Schedule::kInterleaved) {
    return fmt::format("interleaved:{}", spec.virtual_stages);
  }
  if (spec.kind == Schedule::kZeroBubble && spec.virtual_stages != 1) {
    return spec.virtual_stages == 2 ? "zbv" : fmt::format("zb:{}", spec.virtual_stages);
  }
  return spec::ToString(spec.kind);
}

// The layout's schedule words (spec::LayoutFields(): gpipe, 1f1b, interleaved, zb and their
// aliases), with interleaved's chunk count required (interleaved:V), plus the V-shaped zero-bubble
// schedule, which only `pentamesh schedule` draws (zbv, zb-v).
core::Result<ScheduleSpec> ParseScheduleKind(const std::string& text) {
  ScheduleSpec spec;
  auto fail = [&text] {
    return core::Status::Error(fmt::format(
        "schedule: kind='{}' is not one of {}, interleaved:V, zbv", text, ScheduleWords()));
  };
  if (text == "zbv" || text == "zb-v") {
    spec.kind = Schedule::kZeroBubble;
    spec.virtual_stages = 2;
    return spec;
  }
  const std::string::size_type colon = text.find(':');
  auto kind = spec::ParseFieldWord(spec::LayoutField::kSchedule, text.substr(0, colon));
  if (!kind.ok()) return fail();
  spec.kind = static_cast<Schedule>(*kind);
  if (spec.kind != Schedule::kInterleaved) {
    if (colon != std::string::npos) return fail();
    return spec;
  }
  const std::string v = colon == std::string::npos ? "" : text.substr(colon + 1);
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), spec.virtual_stages);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    return core::Status::Error(
        fmt::format("schedule: kind='{}': V='{}' is not an integer (interleaved:V)", text, v));
  }
  return spec;
}

// Cheap on the accepted path (no allocation): the planner calls it millions of times.
core::Status ValidateSchedule(const ScheduleSpec& s) {
  auto fail = [&s](const std::string& reason) {
    return core::Status::Error(fmt::format("schedule {}: {}", ToString(s), reason));
  };
  if (s.pp < 1 || s.pp > kMaxPp) return fail(fmt::format("pp={} must be in [1, {}]", s.pp, kMaxPp));
  if (s.microbatches < 1 || s.microbatches > kMaxMicrobatches) {
    return fail(
        fmt::format("microbatches={} must be in [1, {}]", s.microbatches, kMaxMicrobatches));
  }
  const ScheduleRow* row = FindRow(s.kind);
  if (row == nullptr) return fail("the schedule has no row in schedule/table.cc");
  PM_RETURN_IF_ERROR(row->validate(s));
  if (row->microbatches_in_groups_of_pp && s.microbatches % s.pp != 0) {
    return fail(fmt::format(
        "microbatches={} must be divisible by pp={} (Megatron's interleaved schedule runs "
        "micro-batches in groups of pp)",
        s.microbatches, s.pp));
  }
  return core::Status::Ok();
}

core::Result<ScheduleSpec> FromLayout(const spec::Layout& layout, int64_t microbatches) {
  auto narrow = [](int64_t v, int64_t limit) {
    return v < 0 || v > limit ? -1 : static_cast<int>(v);
  };
  const ScheduleSpec spec{layout.schedule, narrow(layout.pp, kMaxPp),
                          narrow(microbatches, kMaxMicrobatches),
                          narrow(layout.virtual_stages, kMaxVirtualStages)};
  if (spec.pp < 0 || spec.microbatches < 0 || spec.virtual_stages < 0) {
    return core::Status::Error(fmt::format(
        "schedule: layout pp={} virtual_stages={} with microbatches={} is out of range (pp <= {}, "
        "virtual_stages <= {}, microbatches <= {})",
        layout.pp, layout.virtual_stages, microbatches, kMaxPp, kMaxVirtualStages,
        kMaxMicrobatches));
  }
  PM_RETURN_IF_ERROR(ValidateSchedule(spec));
  return spec;
}

core::Result<Program> Make(Schedule kind, int pp, int rank, int microbatches, int virtual_stages) {
  const ScheduleSpec spec{kind, pp, microbatches, virtual_stages};
  PM_RETURN_IF_ERROR(ValidateSchedule(spec));
  if (rank < 0 || rank >= pp) {
    return core::Status::Error(
        fmt::format("schedule {}: rank={} must be in [0, pp={})", ToString(spec), rank, pp));
  }
  return FindRow(kind)->generate(pp, rank, microbatches, virtual_stages);
}

core::Result<std::vector<Program>> MakeAll(const ScheduleSpec& spec) {
  PM_RETURN_IF_ERROR(ValidateSchedule(spec));
  const int64_t pairs = int64_t{spec.microbatches} * spec.pp * spec.virtual_stages;
  if (pairs > kMaxScheduledPairs) {
    return core::Status::Error(fmt::format(
        "schedule {}: microbatches * pp * virtual_stages = {} exceeds {} (too large to generate "
        "and simulate; the closed forms in estimate.h have no limit)",
        ToString(spec), pairs, kMaxScheduledPairs));
  }
  std::vector<Program> programs;
  programs.reserve(static_cast<size_t>(spec.pp));
  for (int rank = 0; rank < spec.pp; ++rank) {
    PM_ASSIGN_OR_RETURN(Program program,
                        Make(spec.kind, spec.pp, rank, spec.microbatches, spec.virtual_stages));
    programs.push_back(std::move(program));
  }
  return programs;
}

}  // namespace pentamesh::schedule

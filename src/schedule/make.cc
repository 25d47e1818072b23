// Validity rules and the dispatch from a schedule kind to its generator: the shared ranges here,
// each schedule's own rules and generator in its row (table.cc).
#include <fmt/format.h>

#include <charconv>

#include "schedule/generate.h"
#include "schedule/table.h"

namespace pentamesh::schedule {
namespace {

// What ParseScheduleKind accepts, for its error: the layout's words, a chunked row's "word:V" and
// the variants' words.
std::string ScheduleWords() {
  std::string out;
  auto add = [&out](const std::string& word) { out += (out.empty() ? "" : ", ") + word; };
  for (const spec::FieldWord& w : spec::FieldInfo(spec::LayoutField::kSchedule).words) {
    add(w.word);
  }
  for (const ScheduleRow& row : Schedules()) {
    if (row.layout_virtual_stages_min >= 2) add(spec::ToString(row.kind) + std::string(":V"));
    if (row.variant.words[0] != nullptr) add(row.variant.words[0]);
  }
  return out;
}

}  // namespace

std::string ToString(const ScheduleSpec& spec) {
  const ScheduleRow* row = FindRow(spec.kind);
  if (row != nullptr && row->variant.words[0] != nullptr &&
      spec.virtual_stages == row->variant.virtual_stages) {
    return row->variant.words[0];
  }
  if (spec.virtual_stages != 1 || (row != nullptr && row->layout_virtual_stages_min >= 2)) {
    return fmt::format("{}:{}", spec::ToString(spec.kind), spec.virtual_stages);
  }
  return spec::ToString(spec.kind);
}

// The layout's schedule words (spec::LayoutFields(): gpipe, 1f1b, interleaved, zb and their
// aliases), with the chunk count required where the row's layouts have several (interleaved:V),
// plus the rows' variants, which only `pentamesh schedule` draws (zbv, zb-v).
core::Result<ScheduleSpec> ParseScheduleKind(const std::string& text) {
  ScheduleSpec spec;
  auto fail = [&text] {
    return core::Status::Error(
        fmt::format("schedule: kind='{}' is not one of {}", text, ScheduleWords()));
  };
  for (const ScheduleRow& row : Schedules()) {
    for (const char* word : row.variant.words) {
      if (word != nullptr && text == word) {
        spec.kind = row.kind;
        spec.virtual_stages = row.variant.virtual_stages;
        return spec;
      }
    }
  }
  const std::string::size_type colon = text.find(':');
  auto kind = spec::ParseFieldWord(spec::LayoutField::kSchedule, text.substr(0, colon));
  if (!kind.ok()) return fail();
  spec.kind = static_cast<Schedule>(*kind);
  const ScheduleRow* row = FindRow(spec.kind);
  if (row == nullptr || row->layout_virtual_stages_min < 2) {
    if (colon != std::string::npos) return fail();
    return spec;
  }
  const std::string v = colon == std::string::npos ? "" : text.substr(colon + 1);
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), spec.virtual_stages);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    return core::Status::Error(fmt::format("schedule: kind='{}': V='{}' is not an integer ({}:V)",
                                           text, v, spec::ToString(spec.kind)));
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

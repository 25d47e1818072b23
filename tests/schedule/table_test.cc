// The schedule table (schedule/table.h) is the whole list of schedules: every word spec/ knows for
// the schedule field names a row, every row has a word that --layout and `pentamesh schedule`
// parse back to it, a generator whose programs are complete and deadlock-free, and a warm-up
// whose in-flight count (warm-up + 1, as cost/'s activation memory uses it) equals the
// simulator's peak. tests/plan (Constraints.AcceptEveryScheduleOfTheTable) checks --allow and
// tests/cost (StageInflight.EqualsTheGeneratedPrograms) cost/'s count, row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "schedule/estimate.h"
#include "schedule/generate.h"
#include "schedule/simulate.h"
#include "schedule/table.h"
#include "spec/layout.h"

namespace pentamesh::schedule {
namespace {

TEST(ScheduleTable, EveryWordOfTheLayoutNamesARow) {
  const auto words = spec::FieldInfo(spec::LayoutField::kSchedule).words;
  ASSERT_FALSE(words.empty());
  for (const spec::FieldWord& w : words) {
    EXPECT_NE(FindRow(static_cast<Schedule>(w.value)), nullptr) << w.word;
  }
  // Each row once, each with a word (its printed name is the first).
  for (const ScheduleRow& row : Schedules()) {
    EXPECT_EQ(std::count_if(Schedules().begin(), Schedules().end(),
                            [&](const ScheduleRow& r) { return r.kind == row.kind; }),
              1);
    EXPECT_TRUE(std::any_of(words.begin(), words.end(), [&](const spec::FieldWord& w) {
      return w.value == static_cast<int64_t>(row.kind);
    })) << static_cast<int>(row.kind);
  }
  // The four published schedules are rows.
  for (Schedule kind :
       {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kInterleaved, Schedule::kZeroBubble}) {
    EXPECT_NE(FindRow(kind), nullptr) << spec::ToString(kind);
  }
}

TEST(ScheduleTable, EveryRowsWordsParseBackToIt) {
  for (const ScheduleRow& row : Schedules()) {
    for (const spec::FieldWord& w : spec::FieldInfo(spec::LayoutField::kSchedule).words) {
      if (w.value != static_cast<int64_t>(row.kind)) continue;
      const std::string v = row.layout_virtual_stages_min >= 2
                                ? ":" + std::to_string(row.layout_virtual_stages_min)
                                : "";
      const std::string text = "pp=4 schedule=" + std::string(w.word) + v;
      auto layout = spec::ParseLayout(text);
      ASSERT_TRUE(layout.ok()) << text << ": " << layout.status().message();
      EXPECT_EQ(layout->schedule, row.kind) << text;
      EXPECT_EQ(layout->virtual_stages, row.layout_virtual_stages_min) << text;
      auto kind = ParseScheduleKind(std::string(w.word) + v);
      ASSERT_TRUE(kind.ok()) << w.word << ": " << kind.status().message();
      EXPECT_EQ(kind->kind, row.kind) << w.word;
      EXPECT_TRUE(ValidateSchedule({row.kind, 4, 8, row.layout_virtual_stages_min}).ok()) << w.word;
    }
  }
}

// The names `pentamesh schedule` prints and reads come from the rows too: a chunked row's "word:V"
// and a variant's words (ZB-V) parse back to the row and chunk count ToString printed.
TEST(ScheduleTable, PrintedNamesParseBack) {
  int variants = 0;
  for (const ScheduleRow& row : Schedules()) {
    std::vector<ScheduleSpec> specs = {{row.kind, 4, 8, row.layout_virtual_stages_min}};
    if (row.layout_virtual_stages_min >= 2) specs.push_back({row.kind, 4, 8, 5});
    if (row.variant.words[0] != nullptr) {
      ++variants;
      specs.push_back({row.kind, 4, 8, row.variant.virtual_stages});
      for (const char* word : row.variant.words) {
        if (word == nullptr) continue;
        auto parsed = ParseScheduleKind(word);
        ASSERT_TRUE(parsed.ok()) << word;
        EXPECT_EQ(parsed->kind, row.kind) << word;
        EXPECT_EQ(parsed->virtual_stages, row.variant.virtual_stages) << word;
      }
    }
    for (const ScheduleSpec& s : specs) {
      const std::string name = ToString(s);
      auto parsed = ParseScheduleKind(name);
      ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status().message();
      EXPECT_EQ(parsed->kind, s.kind) << name;
      EXPECT_EQ(parsed->virtual_stages, s.virtual_stages) << name;
      EXPECT_TRUE(ValidateSchedule(s).ok()) << name;
    }
  }
  EXPECT_EQ(variants, 1);  // ZB-V
  EXPECT_EQ(ToString({Schedule::kInterleaved, 4, 8, 3}), "interleaved:3");
  EXPECT_EQ(ToString({Schedule::kZeroBubble, 4, 8, 2}), "zbv");
  EXPECT_FALSE(ParseScheduleKind("1f1b:2").ok());  // one chunk: no V
  auto missing = ParseScheduleKind("interleaved");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("(interleaved:V)"), std::string::npos)
      << missing.status().message();
}

// Every row's programs for pp 1..6, m 1..12 and its searched virtual stages (and one more):
// complete, paired, deadlock-free; the warm-up + 1 (capped at m x V) is the peak of micro-batch
// chunks between F and B; the closed forms, where the row has them, equal the simulation.
TEST(ScheduleTable, EveryRowGeneratesProgramsItsWarmupAndClosedFormsDescribe) {
  for (const ScheduleRow& row : Schedules()) {
    int checked = 0;
    for (int pp = 1; pp <= 6; ++pp) {
      for (int m = 1; m <= 12; ++m) {
        const int v_min = row.layout_virtual_stages_min;
        for (int v = v_min; v <= v_min + 1; ++v) {
          const ScheduleSpec s{row.kind, pp, m, v};
          if (!ValidateSchedule(s).ok() || s.v_shape()) continue;  // ZB-V: its own phases
          const std::string where =
              ToString(s) + " pp=" + std::to_string(pp) + " m=" + std::to_string(m);
          auto programs = MakeAll(s);
          ASSERT_TRUE(programs.ok()) << where << ": " << programs.status().message();
          EXPECT_TRUE(CheckComplete(*programs, s.topology(), row.weight_passes).ok()) << where;
          EXPECT_TRUE(CheckCommPairing(*programs, s.topology()).ok()) << where;
          auto sim = Simulate(*programs, s.topology(), Costs::Equal());
          ASSERT_TRUE(sim.ok()) << where;
          EXPECT_TRUE(sim->complete) << where << ": " << sim->deadlock;
          if (const auto closed = BubbleFractionClosedForm(s)) {
            EXPECT_NEAR(sim->bubble_fraction, *closed, 1e-12) << where;
          }
          for (int rank = 0; rank < pp; ++rank) {
            Program fb;  // F..B: without W passes (B frees the forward stash)
            for (const Action& a : (*programs)[rank]) {
              if (a.kind != ActionKind::kWeight) fb.push_back(a);
            }
            const int64_t warmup = WarmupForwards(row.kind, pp, rank, m, v);
            EXPECT_EQ(std::min<int64_t>(int64_t{m} * v, warmup + 1), PeakInFlight(fb, v, m))
                << where << " rank " << rank;
            if (const auto closed = PeakInFlightClosedForm(s, rank)) {
              EXPECT_EQ(sim->ranks[rank].peak_in_flight, *closed) << where << " rank " << rank;
            }
          }
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 0) << spec::ToString(row.kind);
  }
}

}  // namespace
}  // namespace pentamesh::schedule

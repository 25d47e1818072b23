#include "plan/allow.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedule/table.h"

namespace pentamesh::plan {
namespace {

using spec::Layout;
using spec::Recompute;
using spec::Schedule;

TEST(Constraints, EmptyAllowsEverything) {
  auto c = Constraints::Parse("");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->empty());
  EXPECT_TRUE(c->AllowsLayout(Layout{.dp = 3, .tp = 7}));
}

TEST(Constraints, NumericComparisons) {
  auto c = Constraints::Parse("tp<=4 pp>=2 cp<4 ep>1 dp!=8 zero=1|3 mbs==2");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const Layout ok{.dp = 4, .tp = 4, .pp = 2, .cp = 2, .ep = 2, .zero = 3, .mbs = 2};
  EXPECT_TRUE(c->AllowsLayout(ok));
  auto with = [&](auto edit) {
    Layout l = ok;
    edit(l);
    return c->AllowsLayout(l);
  };
  EXPECT_FALSE(with([](Layout& l) { l.tp = 8; }));
  EXPECT_FALSE(with([](Layout& l) { l.pp = 1; }));
  EXPECT_FALSE(with([](Layout& l) { l.cp = 4; }));
  EXPECT_FALSE(with([](Layout& l) { l.ep = 1; }));
  EXPECT_FALSE(with([](Layout& l) { l.dp = 8; }));
  EXPECT_FALSE(with([](Layout& l) { l.zero = 2; }));
  EXPECT_TRUE(with([](Layout& l) { l.zero = 1; }));
  EXPECT_FALSE(with([](Layout& l) { l.mbs = 1; }));
}

TEST(Constraints, EnumeratedKeys) {
  auto c = Constraints::Parse(
      "schedule=1f1b|zb recompute!=none sp=on cp_kind=ring "
      "ep_placement=folded v=1");
  ASSERT_TRUE(c.ok()) << c.status().message();
  Layout l{.recompute = Recompute::kFull,
           .schedule = Schedule::kZeroBubble,
           .ep_placement = spec::EpPlacement::kFolded};
  EXPECT_TRUE(c->AllowsLayout(l));
  l.recompute = Recompute::kNone;
  EXPECT_FALSE(c->AllowsLayout(l));
  l.recompute = Recompute::kSelective;
  l.schedule = Schedule::kGPipe;
  EXPECT_FALSE(c->AllowsLayout(l));
  l.schedule = Schedule::kOneFOneB;
  l.sp = false;
  EXPECT_FALSE(c->AllowsLayout(l));
}

TEST(Constraints, ErrorsNameTheClause) {
  struct Case {
    const char* text;
    const char* part;
  } cases[] = {
      {"tq<=8", "unknown key 'tq'"},
      {"tp<=x", "'x' is not a non-negative integer"},
      {"tp=>8", "unknown operator '=>'"},
      {"recompute<=full", "'recompute' takes only = or !="},
      {"schedule=fast", "'fast' is not one of gpipe, 1f1b"},
      {"tp<=4|8", "alternatives"},
      {"tp", "expected KEY OP VALUE"},
      {"tp<=", "missing value"},
  };
  for (const auto& c : cases) {
    auto r = Constraints::Parse(std::string("pp>=1 ") + c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.part), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("--allow"), std::string::npos);
  }
}

// --layout (spec::ParseLayout) and --allow take the same keys and words, and read each word as
// the same value: for every field of spec::LayoutFields(), under its key and its alias, every word
// (enumerated fields) or a degree (integer fields) parses in both, and the clause `key=word`
// allows the layout `key=word` parsed to. A word neither knows is refused by both.
// --allow recompute_modules=...: the set compared whole, = and != only; core_attn alone is the
// default list.
TEST(Constraints, RecomputeModulesInAllow) {
  auto mods = spec::ParseLayout("dp=8 recompute=selective recompute_modules=moe_act+layernorm");
  auto def = spec::ParseLayout("dp=8 recompute=selective");
  ASSERT_TRUE(mods.ok() && def.ok());
  auto same = Constraints::Parse("recompute_modules=layernorm+moe_act");
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_TRUE(same->AllowsLayout(*mods));
  EXPECT_FALSE(same->AllowsLayout(*def));
  auto core = Constraints::Parse("recompute_modules=core_attn|moe_act");
  ASSERT_TRUE(core.ok());
  EXPECT_TRUE(core->AllowsLayout(*def));
  EXPECT_FALSE(core->AllowsLayout(*mods));
  EXPECT_FALSE(Constraints::Parse("recompute_modules<=moe_act").ok());
  auto bad = Constraints::Parse("recompute_modules=moe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'moe'"), std::string::npos);
}

TEST(Constraints, AcceptTheWordsLayoutAccepts) {
  int checked = 0;
  for (const spec::LayoutFieldInfo& f : spec::LayoutFields()) {
    // recompute_modules is a set of words, not one (RecomputeModulesInAllow below).
    if (f.field == spec::LayoutField::kRecomputeModules) continue;
    std::vector<std::string> words;
    for (const spec::FieldWord& w : f.words) words.push_back(w.word);
    if (words.empty()) words = {"2"};
    for (const char* key : {f.key, f.alias}) {
      if (key == nullptr) continue;
      for (const std::string& word : words) {
        const std::string clause = std::string(key) + "=" + word;
        // Virtual stages need the interleaved schedule to be a valid layout.
        const std::string layout_text = f.field == spec::LayoutField::kVirtualStages
                                            ? clause + " schedule=interleaved"
                                            : clause;
        auto layout = spec::ParseLayout(layout_text);
        ASSERT_TRUE(layout.ok()) << layout_text << ": " << layout.status().message();
        auto allow = Constraints::Parse(clause);
        ASSERT_TRUE(allow.ok()) << clause << ": " << allow.status().message();
        EXPECT_TRUE(allow->AllowsLayout(*layout)) << clause;
        EXPECT_EQ(spec::FieldValue(*layout, f.field),
                  word == "2" ? 2 : *spec::ParseFieldWord(f.field, word))
            << clause;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 29);  // 14 fields (virtual_stages also as v), every word of the enumerated
  for (const char* bad : {"schedule=zbq", "sp=yes", "cp_kind=rings", "recompute=half", "q=1"}) {
    EXPECT_FALSE(spec::ParseLayout(bad).ok()) << bad;
    EXPECT_FALSE(Constraints::Parse(bad).ok()) << bad;
  }
  // The ones that used to differ: --allow refused both.
  EXPECT_TRUE(Constraints::Parse("schedule=zero-bubble sp=true").ok());
}

// Every schedule of schedule/'s table (table.h) under every word spec/ has for it: --allow takes
// the word, and the clause allows exactly the layouts --layout reads the word as.
TEST(Constraints, AcceptEveryScheduleOfTheTable) {
  for (const schedule::ScheduleRow& row : schedule::Schedules()) {
    int words = 0;
    for (const spec::FieldWord& w : spec::FieldInfo(spec::LayoutField::kSchedule).words) {
      if (w.value != static_cast<int64_t>(row.kind)) continue;
      ++words;
      const std::string clause = std::string("schedule=") + w.word;
      auto layout = spec::ParseLayout("pp=4 " + clause);
      ASSERT_TRUE(layout.ok()) << clause << ": " << layout.status().message();
      EXPECT_EQ(layout->schedule, row.kind) << clause;
      auto allow = Constraints::Parse(clause);
      ASSERT_TRUE(allow.ok()) << clause << ": " << allow.status().message();
      EXPECT_TRUE(allow->AllowsLayout(*layout)) << clause;
      for (const schedule::ScheduleRow& other : schedule::Schedules()) {
        EXPECT_EQ(allow->Allows(Field::kSchedule, static_cast<int64_t>(other.kind)),
                  other.kind == row.kind)
            << clause << " vs " << spec::ToString(other.kind);
      }
    }
    EXPECT_GT(words, 0) << "schedule " << static_cast<int>(row.kind) << " has no word";
  }
}

}  // namespace
}  // namespace pentamesh::plan

#include "plan/allow.h"

#include <gtest/gtest.h>

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
      {"schedule=fast", "'fast' is not valid"},
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

}  // namespace
}  // namespace pentamesh::plan

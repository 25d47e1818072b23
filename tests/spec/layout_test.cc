#include "spec/layout.h"

#include <gtest/gtest.h>

namespace pentamesh::spec {
namespace {

TEST(ParseLayout, ReadsEveryKey) {
  auto r = ParseLayout(
      "dp=8 tp=4 pp=4 cp=2 ep=8 zero=1 mbs=2 recompute=selective schedule=interleaved:3 "
      "cp_kind=ulysses ep_placement=folded sp=off");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Layout& l = *r;
  EXPECT_EQ(l.dp, 8);
  EXPECT_EQ(l.tp, 4);
  EXPECT_EQ(l.pp, 4);
  EXPECT_EQ(l.cp, 2);
  EXPECT_EQ(l.ep, 8);
  EXPECT_EQ(l.zero, 1);
  EXPECT_EQ(l.mbs, 2);
  EXPECT_EQ(l.recompute, Recompute::kSelective);
  EXPECT_EQ(l.schedule, Schedule::kInterleaved);
  EXPECT_EQ(l.virtual_stages, 3);
  EXPECT_EQ(l.cp_kind, CpKind::kUlysses);
  EXPECT_EQ(l.ep_placement, EpPlacement::kFolded);
  EXPECT_FALSE(l.sp);
  EXPECT_EQ(l.gpus(), 8 * 4 * 4 * 2);  // folded: ep not in the product
}

TEST(ParseLayout, DefaultsAndCommas) {
  auto r = ParseLayout("dp=2,tp=2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pp, 1);
  EXPECT_EQ(r->schedule, Schedule::kOneFOneB);
  EXPECT_EQ(r->gpus(), 4);
}

TEST(ParseLayout, RoundTrips) {
  Layout l{.dp = 4,
           .tp = 8,
           .pp = 2,
           .cp = 2,
           .ep = 4,
           .zero = 3,
           .mbs = 1,
           .recompute = Recompute::kFull,
           .schedule = Schedule::kZeroBubble};
  auto r = ParseLayout(FormatLayout(l));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, l);
  l.schedule = Schedule::kInterleaved;
  l.virtual_stages = 4;
  EXPECT_EQ(*ParseLayout(FormatLayout(l)), l);
}

// Virtual stages: schedule=interleaved:V, or the field's own key (virtual_stages, alias v, as
// --allow takes it) beside schedule=interleaved.
TEST(ParseLayout, VirtualStagesByKeyOrSchedule) {
  for (const char* text :
       {"pp=4 schedule=interleaved:3", "pp=4 schedule=interleaved v=3",
        "pp=4 v=3 schedule=interleaved", "pp=4 virtual_stages=3 schedule=interleaved:3"}) {
    auto l = ParseLayout(text);
    ASSERT_TRUE(l.ok()) << text << ": " << l.status().message();
    EXPECT_EQ(l->virtual_stages, 3) << text;
    EXPECT_EQ(l->schedule, Schedule::kInterleaved) << text;
  }
  EXPECT_EQ(ParseLayout("schedule=interleaved")->virtual_stages, 2);
}

TEST(ParseLayout, ErrorsNameTheKey) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c :
       {Case{"dp=0", "dp=0 must be positive"}, Case{"dp=-2", "dp=-2 must be positive"},
        Case{"tp=abc", "tp='abc' is not an integer"},
        Case{"zero=4", "zero='4' must be 0, 1, 2 or 3"}, Case{"dq=2", "unknown key 'dq'"},
        Case{"dp", "not of the form key=value"}, Case{"", "empty layout"},
        Case{"schedule=foo", "schedule='foo'"},
        Case{"schedule=interleaved:0", "schedule=0 must be positive"},
        Case{"recompute=some", "recompute='some'"}, Case{"sp=maybe", "sp='maybe'"},
        Case{"schedule=zb:2", "only interleaved takes :V"},
        Case{"schedule=interleaved:4 v=2", "virtual_stages=2 contradicts schedule=interleaved:4"},
        Case{"v=2 virtual_stages=2 schedule=interleaved", "key 'virtual_stages' given twice"},
        Case{"v=3", "virtual stages need schedule=interleaved:V"}}) {
    auto r = ParseLayout(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace pentamesh::spec

namespace pentamesh::spec {
namespace {

// recompute_modules: '+'-joined Megatron words with recompute=selective; core_attn alone is the
// default (not printed); errors name the key and the reason.
TEST(Layout, RecomputeModules) {
  auto l = ParseLayout("dp=8 recompute=selective recompute_modules=moe_act+layernorm");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->recompute_modules, kRecomputeMoeAct | kRecomputeLayerNorm);
  EXPECT_FALSE(l->recomputes(kRecomputeCoreAttn));
  EXPECT_TRUE(l->recomputes(kRecomputeMoeAct));
  EXPECT_NE(FormatLayout(*l).find("recompute_modules=layernorm+moe_act"), std::string::npos);
  EXPECT_EQ(*ParseLayout(FormatLayout(*l)), *l);
  EXPECT_NE(ShortLayout(*l).find("sel:layernorm+moe_act"), std::string::npos);
  auto def = ParseLayout("dp=8 recompute=selective recompute_modules=core_attn");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->recompute_modules, 0u);
  EXPECT_TRUE(def->recomputes(kRecomputeCoreAttn));
  EXPECT_EQ(FormatLayout(*def).find("recompute_modules"), std::string::npos);
  EXPECT_FALSE(ParseLayout("dp=8 recompute=full").value().recomputes(kRecomputeCoreAttn));
  auto full = ParseLayout("dp=8 recompute=full recompute_modules=mlp");
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("needs recompute=selective"), std::string::npos);
  auto bad = ParseLayout("dp=8 recompute=selective recompute_modules=moe_act+moe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("recompute_modules='moe_act+moe': module 'moe'"),
            std::string::npos);
  EXPECT_FALSE(ParseLayout("dp=8 recompute=selective recompute_modules=").ok());
}

}  // namespace
}  // namespace pentamesh::spec

// Hand-written programs (from the papers' figures) and the validity rules, accepted and rejected.
#include "schedule/generate.h"

#include <gtest/gtest.h>

#include "schedule/format.h"

namespace pentamesh::schedule {
namespace {

std::string Print(Schedule kind, int pp, int rank, int m, int v = 1) {
  auto program = Make(kind, pp, rank, m, v);
  EXPECT_TRUE(program.ok()) << program.status().message();
  return program.ok() ? FormatProgram(*program, v > 1) : "";
}

TEST(Generate, GPipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(Print(Schedule::kGPipe, 4, 2, 3), "F0 F1 F2 B0 B1 B2");
}

TEST(Generate, OneFOneBHasWarmupSteadyCooldown) {
  // pp=4: rank r warms up with p-r-1 forwards (PipeDream-Flush, Narayanan et al. 2021).
  EXPECT_EQ(Print(Schedule::kOneFOneB, 4, 0, 6), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(Print(Schedule::kOneFOneB, 4, 1, 6), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(Print(Schedule::kOneFOneB, 4, 3, 3), "F0 B0 F1 B1 F2 B2");
  // Fewer micro-batches than the warmup: all forwards, then all backwards.
  EXPECT_EQ(Print(Schedule::kOneFOneB, 8, 0, 2), "F0 F1 B0 B1");
}

TEST(Generate, InterleavedFollowsMegatronOrder) {
  // pp=2, V=2, m=4, rank 0: warmup 2*(p-r-1) + (V-1)*p = 4; groups of pp micro-batches per chunk.
  EXPECT_EQ(Print(Schedule::kInterleaved, 2, 0, 4, 2),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  // rank 1 (the last rank): warmup (V-1)*p = 2.
  EXPECT_EQ(Print(Schedule::kInterleaved, 2, 1, 4, 2),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST(Generate, ZeroBubbleH1DefersRWeightPasses) {
  // The handcrafted ZB-H1 of Qi et al. 2023, p=4, m=8: the first rank is 1F1B with W right after
  // B; the last rank defers its first p-1 W passes and drains them at the end.
  EXPECT_EQ(Print(Schedule::kZeroBubble, 4, 0, 8),
            "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7");
  EXPECT_EQ(Print(Schedule::kZeroBubble, 4, 3, 8),
            "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7");
}

TEST(Generate, ZeroBubbleVFollowsTheVShape) {
  // pp=2, m=4, rank 0 (holds stages 0 and 3): 2(p-r)-1 = 3 chunk-0 forwards, p-r = 2 chunk-1
  // F B W steps, steady F B W on chunk 0 then chunk 1, cooldown B W on chunk 0.
  EXPECT_EQ(Print(Schedule::kZeroBubble, 2, 0, 4, 2),
            "F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F3.0 B0.0 W0.0 F2.1 B2.1 W2.1 B1.0 W1.0 "
            "F3.1 B3.1 W3.1 B2.0 W2.0 B3.0 W3.0");
  auto zbv = ParseScheduleKind("zbv");
  ASSERT_TRUE(zbv.ok());
  EXPECT_EQ(zbv->kind, Schedule::kZeroBubble);
  EXPECT_EQ(zbv->virtual_stages, 2);
  EXPECT_TRUE(zbv->v_shape());
  EXPECT_EQ(ToString(*zbv), "zbv");
  EXPECT_EQ(zbv->topology().placement, Placement::kVShape);
  EXPECT_EQ(ScheduleSpec{}.topology().placement, Placement::kLoop);
}

TEST(Generate, MakeRejectsInvalidSpecsNamingTheField) {
  struct Case {
    Schedule kind;
    int pp, rank, m, v;
    const char* expect;
  };
  for (const Case& c : {
           Case{Schedule::kOneFOneB, 0, 0, 4, 1, "pp=0 must be in [1, 1024]"},
           Case{Schedule::kOneFOneB, 2000, 0, 4, 1, "pp=2000 must be in [1, 1024]"},
           Case{Schedule::kGPipe, 2, 0, 0, 1, "microbatches=0 must be in [1, 65536]"},
           Case{Schedule::kOneFOneB, 2, 0, 4, 2, "virtual_stages=2 must be 1"},
           Case{Schedule::kZeroBubble, 2, 0, 4, 3,
                "virtual_stages=3 must be 1 (ZB-H1) or 2 (ZB-V)"},
           Case{Schedule::kInterleaved, 2, 0, 4, 1, "virtual_stages=1 must be in [2, 64]"},
           Case{Schedule::kInterleaved, 2, 0, 4, 65, "virtual_stages=65 must be in [2, 64]"},
           Case{Schedule::kInterleaved, 1, 0, 4, 2, "interleaved needs pp >= 2"},
           Case{Schedule::kInterleaved, 4, 0, 6, 2, "microbatches=6 must be divisible by pp=4"},
           Case{Schedule::kOneFOneB, 4, 4, 8, 1, "rank=4 must be in [0, pp=4)"},
           Case{Schedule::kOneFOneB, 4, -1, 8, 1, "rank=-1 must be in [0, pp=4)"},
       }) {
    auto program = Make(c.kind, c.pp, c.rank, c.m, c.v);
    ASSERT_FALSE(program.ok()) << c.expect;
    EXPECT_NE(program.status().message().find(c.expect), std::string::npos)
        << program.status().message();
    EXPECT_EQ(program.status().message().rfind("schedule ", 0), 0u) << program.status().message();
  }
}

TEST(Generate, MakeAllBoundsMemoryButClosedFormsDoNot) {
  auto huge = MakeAll({Schedule::kOneFOneB, 1024, 65536, 1});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("microbatches * pp * virtual_stages = 67108864 exceeds"),
            std::string::npos)
      << huge.status().message();
  EXPECT_TRUE(Make(Schedule::kOneFOneB, 1024, 0, 65536).ok());  // one rank is small
  EXPECT_TRUE(MakeAll({Schedule::kOneFOneB, 64, 4096, 1}).ok());
}

TEST(Generate, ParsesScheduleKinds) {
  EXPECT_EQ(ParseScheduleKind("gpipe")->kind, Schedule::kGPipe);
  EXPECT_EQ(ParseScheduleKind("1f1b")->kind, Schedule::kOneFOneB);
  EXPECT_EQ(ParseScheduleKind("zb")->kind, Schedule::kZeroBubble);
  auto inter = ParseScheduleKind("interleaved:3");
  ASSERT_TRUE(inter.ok());
  EXPECT_EQ(inter->kind, Schedule::kInterleaved);
  EXPECT_EQ(inter->virtual_stages, 3);
  EXPECT_EQ(ToString(*inter), "interleaved:3");
  for (const char* bad : {"interleaved:", "interleaved:x", "interleaved:2x", "1F1B", "zb-h2", ""}) {
    auto r = ParseScheduleKind(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("schedule: kind="), std::string::npos);
  }
}

TEST(Generate, FromLayoutTakesThePipelineFields) {
  auto layout = spec::ParseLayout("dp=2 pp=4 schedule=interleaved:3");
  ASSERT_TRUE(layout.ok());
  auto s = FromLayout(*layout, 8);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->kind, Schedule::kInterleaved);
  EXPECT_EQ(s->pp, 4);
  EXPECT_EQ(s->virtual_stages, 3);
  EXPECT_EQ(s->microbatches, 8);
  auto odd = FromLayout(*layout, 6);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("microbatches=6 must be divisible by pp=4"),
            std::string::npos);
  auto huge = FromLayout(*layout, int64_t{1} << 40);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("out of range"), std::string::npos);
  EXPECT_EQ(FromLayout(spec::Layout{.pp = 2}, 4)->kind, Schedule::kOneFOneB);
}

}  // namespace
}  // namespace pentamesh::schedule

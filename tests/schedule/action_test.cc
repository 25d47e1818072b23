#include "schedule/action.h"

#include <gtest/gtest.h>

namespace pentamesh::schedule {
namespace {

TEST(Action, PrintsCompactly) {
  EXPECT_EQ(ToString(F(3)), "F3");
  EXPECT_EQ(ToString(B(1)), "B1");
  EXPECT_EQ(ToString(W(1)), "W1");
  EXPECT_EQ(ToString(F(3, 1), /*show_chunk=*/true), "F3.1");
  EXPECT_EQ(ToString(B(0, 2), true), "B0.2");
  EXPECT_NE(F(1), B(1));
  EXPECT_EQ(F(2, 1), (Action{ActionKind::kForward, 1, 2}));
}

TEST(Topology, ChunkCOfRankRHoldsStageCTimesPpPlusR) {
  const Topology t{.pp = 4, .virtual_stages = 2, .microbatches = 8};
  EXPECT_EQ(t.stages(), 8);
  EXPECT_EQ(t.Stage(/*rank=*/1, /*chunk=*/0), 1);
  EXPECT_EQ(t.Stage(1, 1), 5);
  EXPECT_EQ(t.Stage(3, 1), 7);
  for (int s = 0; s < t.stages(); ++s) EXPECT_EQ(t.Stage(t.RankOf(s), t.ChunkOf(s)), s);
}

TEST(Topology, VShapeFoldsTheSecondChunkBack) {
  const Topology t{
      .pp = 4, .virtual_stages = 2, .microbatches = 8, .placement = Placement::kVShape};
  EXPECT_EQ(t.Stage(0, 0), 0);
  EXPECT_EQ(t.Stage(0, 1), 7);  // rank 0 holds the first and the last stage
  EXPECT_EQ(t.Stage(3, 1), 4);  // the turn 3 -> 4 stays on rank 3
  EXPECT_EQ(t.RankOf(4), 3);
  EXPECT_EQ(t.RankOf(6), 1);
  for (int s = 0; s < t.stages(); ++s) EXPECT_EQ(t.Stage(t.RankOf(s), t.ChunkOf(s)), s);
}

}  // namespace
}  // namespace pentamesh::schedule

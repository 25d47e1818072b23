// RankGrid and LayoutGrid against hand-written tables, plus properties over many meshes:
// groups partition the world, have the right sizes, tp groups are contiguous, coords round-trip.
#include "mesh/rank_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>

namespace pentamesh::mesh {
namespace {

using Groups = std::vector<std::vector<int>>;
using spec::EpPlacement;

LayoutGrid MakeGrid(Degrees d, EpPlacement placement = EpPlacement::kSeparate, int etp = 0) {
  auto grid = LayoutGrid::Create(d, placement, etp);
  EXPECT_TRUE(grid.ok()) << grid.status().message();
  return *grid;
}

TEST(RankGrid, Pp2Dp2Tp2Table) {
  const LayoutGrid g = MakeGrid({.pp = 2, .dp = 2, .tp = 2});
  EXPECT_EQ(g.world_size(), 8);
  // rank: pp dp tp
  const std::vector<Coords> expected = {{.pp = 0, .dp = 0, .tp = 0}, {.pp = 0, .dp = 0, .tp = 1},
                                        {.pp = 0, .dp = 1, .tp = 0}, {.pp = 0, .dp = 1, .tp = 1},
                                        {.pp = 1, .dp = 0, .tp = 0}, {.pp = 1, .dp = 0, .tp = 1},
                                        {.pp = 1, .dp = 1, .tp = 0}, {.pp = 1, .dp = 1, .tp = 1}};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(g.dense().coords(r), expected[static_cast<size_t>(r)]) << r;
    EXPECT_EQ(g.dense().rank(expected[static_cast<size_t>(r)]), r);
  }
  EXPECT_EQ(g.groups(GroupKind::kTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kPp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kCp), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(g.groups(GroupKind::kEp), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.dense().group({Axis::kDp, Axis::kTp}, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(g.dense().group({Axis::kPp, Axis::kTp}, 2), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(g.group(GroupKind::kPp, 6), (std::vector<int>{2, 6}));
}

TEST(RankGrid, Dp2Cp2Tp2Table) {
  // rank = (dp*2 + cp)*2 + tp
  const LayoutGrid g = MakeGrid({.dp = 2, .cp = 2, .tp = 2});
  EXPECT_EQ(g.groups(GroupKind::kTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kCp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(g.dense().coords(6), (Coords{.dp = 1, .cp = 1, .tp = 0}));
}

TEST(RankGrid, SeparateEpTable) {
  // {dp=2, ep=2, cp=2}, separate: rank = (dp*2 + ep)*2 + cp.
  const LayoutGrid g = MakeGrid({.dp = 2, .ep = 2, .cp = 2});
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.groups(GroupKind::kCp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kEp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  const MeshCoords c = g.coords(6);  // dp 1, ep 1, cp 0
  EXPECT_EQ(c.dense, (Coords{.dp = 1, .ep = 1, .cp = 0}));
  EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(c.expert_dp, 2);  // position among {2,3,6,7}
}

TEST(RankGrid, FoldedEpTakesCpFirst) {
  // {dp=2, cp=2, tp=2, ep=2} folded: 8 ranks, j = dp*2 + cp, ep = j % 2, expert_dp = j / 2.
  const LayoutGrid g = MakeGrid({.dp = 2, .ep = 2, .cp = 2, .tp = 2}, EpPlacement::kFolded);
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.groups(GroupKind::kTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kCp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kEp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  const MeshCoords c = g.coords(5);  // dp 1, cp 0, tp 1 -> j = 2: ep 0, expert_dp 1
  EXPECT_EQ(c.dense, (Coords{.dp = 1, .cp = 0, .tp = 1}));
  EXPECT_EQ(c.ep, 0);
  EXPECT_EQ(c.expert_dp, 1);
}

TEST(RankGrid, FoldedEpSpansDpAndCp) {
  // {dp=4, cp=2, ep=4} folded, 8 ranks, rank = dp*2 + cp = j. ep groups are runs of 4 in j.
  const LayoutGrid g = MakeGrid({.dp = 4, .ep = 4, .cp = 2}, EpPlacement::kFolded);
  EXPECT_EQ(g.groups(GroupKind::kEp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kCp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(RankGrid, FoldedWithPpAndTp) {
  // {pp=2, dp=2, tp=2, ep=2} folded: rank = (pp*2 + dp)*2 + tp; ep spans dp (cp = 1), so the
  // whole dp group is one ep group and expert-dp is trivial, as in Megatron with ep = dp.
  const LayoutGrid g = MakeGrid({.pp = 2, .dp = 2, .ep = 2, .tp = 2}, EpPlacement::kFolded);
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.groups(GroupKind::kEp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(g.groups(GroupKind::kPp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(RankGrid, FoldedWholeExpertsSpanTp) {
  // {pp=2, dp=2, tp=2, ep=4, etp=1} folded: rank = (pp*2 + dp)*2 + tp; j = dp*2 + tp inside a
  // stage, ep = j % 4: one stage's four dp x tp ranks are one ep group, each expert held once.
  const LayoutGrid g =
      MakeGrid({.pp = 2, .dp = 2, .ep = 4, .tp = 2}, EpPlacement::kFolded, /*etp=*/1);
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.groups(GroupKind::kEp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kExpertDp), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(g.groups(GroupKind::kTp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(GroupKind::kDpCp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.coords(6).ep, 2);
  // {dp=4, tp=2, ep=4, etp=1}: j = rank, ep = j % 4, expert_dp = j / 4.
  const LayoutGrid h = MakeGrid({.dp = 4, .ep = 4, .tp = 2}, EpPlacement::kFolded, /*etp=*/1);
  EXPECT_EQ(h.groups(GroupKind::kEp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(h.groups(GroupKind::kExpertDp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(h.coords(5).expert_dp, 1);
  // etp = tp keeps the old grid: ep over dp only.
  const LayoutGrid same = MakeGrid({.dp = 4, .ep = 4, .tp = 2}, EpPlacement::kFolded, /*etp=*/2);
  EXPECT_EQ(same.groups(GroupKind::kEp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // The planner's Layout reaches the same grid.
  auto layout = spec::ParseLayout("dp=4 tp=2 ep=4 etp=1 ep_placement=folded");
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  auto from_layout = LayoutGrid::FromLayout(*layout);
  ASSERT_TRUE(from_layout.ok()) << from_layout.status().message();
  EXPECT_EQ(from_layout->groups(GroupKind::kEp), h.groups(GroupKind::kEp));
}

TEST(RankGrid, RejectsBadDegrees) {
  auto zero = LayoutGrid::Create({.dp = 0}, EpPlacement::kSeparate);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("dp=0"), std::string::npos);
  auto folded = LayoutGrid::Create({.dp = 2, .ep = 4, .cp = 1}, EpPlacement::kFolded);
  ASSERT_FALSE(folded.ok());
  EXPECT_NE(folded.status().message().find("ep=4 must divide dp*cp=2"), std::string::npos);
  auto whole = LayoutGrid::Create({.dp = 2, .ep = 8, .tp = 2}, EpPlacement::kFolded, 1);
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("ep=8 must divide dp*cp*tp=4"), std::string::npos);
  auto separate = LayoutGrid::Create({.dp = 2, .ep = 2, .tp = 2}, EpPlacement::kSeparate, 1);
  ASSERT_FALSE(separate.ok());
  EXPECT_NE(separate.status().message().find("needs ep_placement=folded"), std::string::npos);
  auto three = LayoutGrid::Create({.dp = 2, .tp = 4}, EpPlacement::kFolded, 2);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("etp=2 must be 1 or tp=4"), std::string::npos);
  spec::Layout big;
  big.tp = -3;
  auto from_layout = LayoutGrid::FromLayout(big);
  ASSERT_FALSE(from_layout.ok());
  EXPECT_NE(from_layout.status().message().find("tp=-3"), std::string::npos);
}

TEST(RankGrid, FromLayoutMatchesGpus) {
  spec::Layout layout;
  layout.dp = 2;
  layout.cp = 2;
  layout.ep = 4;
  layout.ep_placement = EpPlacement::kFolded;
  auto grid = LayoutGrid::FromLayout(layout);
  ASSERT_TRUE(grid.ok()) << grid.status().message();
  EXPECT_EQ(grid->world_size(), layout.gpus());
  layout.ep_placement = EpPlacement::kSeparate;
  grid = LayoutGrid::FromLayout(layout);
  ASSERT_TRUE(grid.ok());
  EXPECT_EQ(grid->world_size(), layout.gpus());
}

// Properties over every mesh of up to 32 ranks with degrees in {1, 2, 3, 4}.
void CheckProperties(const LayoutGrid& g) {
  const int world = g.world_size();
  const bool whole_experts = g.expert().degrees().tp != g.dense().degrees().tp;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(g.dense().rank(g.dense().coords(r)), r);
    ASSERT_EQ(g.expert().rank(g.expert().coords(r)), r);
    // A rank's position in each group (its communicator rank) is its coordinate on that axis.
    const MeshCoords c = g.coords(r);
    auto position = [&](GroupKind kind) {
      const std::vector<int> group = g.group(kind, r);
      return static_cast<int>(std::find(group.begin(), group.end(), r) - group.begin());
    };
    ASSERT_EQ(position(GroupKind::kTp), c.dense.tp);
    ASSERT_EQ(position(GroupKind::kCp), c.dense.cp);
    ASSERT_EQ(position(GroupKind::kDp), c.dense.dp);
    ASSERT_EQ(position(GroupKind::kPp), c.dense.pp);
    ASSERT_EQ(position(GroupKind::kEp), c.ep);
    ASSERT_EQ(position(GroupKind::kExpertDp), c.expert_dp);
    // Expert shards (ep) times expert replicas (expert_dp) tile the ranks the experts re-split:
    // the dense replicas (dp_cp), and with whole experts (etp = 1) the tp ranks too (the stage's
    // dp x cp x tp ranks); both lie inside them and meet only in the rank itself.
    std::vector<int> dense = g.group(GroupKind::kDpCp, r);
    if (whole_experts) dense = g.dense().group({Axis::kDp, Axis::kEp, Axis::kCp, Axis::kTp}, r);
    const std::vector<int> ep = g.group(GroupKind::kEp, r);
    const std::vector<int> edp = g.group(GroupKind::kExpertDp, r);
    ASSERT_TRUE(std::includes(dense.begin(), dense.end(), ep.begin(), ep.end()));
    ASSERT_TRUE(std::includes(dense.begin(), dense.end(), edp.begin(), edp.end()));
    std::vector<int> both;
    std::set_intersection(ep.begin(), ep.end(), edp.begin(), edp.end(), std::back_inserter(both));
    ASSERT_EQ(both, std::vector<int>{r});
  }
  const Degrees& d = g.dense().degrees();
  const Degrees& e = g.expert().degrees();
  const std::vector<std::pair<GroupKind, int>> sizes = {{GroupKind::kTp, d.tp},
                                                        {GroupKind::kCp, d.cp},
                                                        {GroupKind::kDp, d.dp},
                                                        {GroupKind::kPp, d.pp},
                                                        {GroupKind::kEp, e.ep},
                                                        {GroupKind::kDpCp, d.dp * d.ep * d.cp},
                                                        {GroupKind::kExpertDp, e.dp * e.cp}};
  for (const auto& [kind, size] : sizes) {
    std::vector<int> owner(static_cast<size_t>(world), -1);
    const Groups groups = g.groups(kind);
    ASSERT_EQ(static_cast<int>(groups.size()) * size, world) << GroupName(kind);
    for (size_t i = 0; i < groups.size(); ++i) {
      ASSERT_EQ(static_cast<int>(groups[i].size()), size) << GroupName(kind);
      ASSERT_TRUE(std::is_sorted(groups[i].begin(), groups[i].end()));
      for (int r : groups[i]) {
        ASSERT_EQ(owner[static_cast<size_t>(r)], -1) << GroupName(kind) << " rank " << r;
        owner[static_cast<size_t>(r)] = static_cast<int>(i);
        ASSERT_EQ(g.group(kind, r), groups[i]);  // every member sees the same group
      }
    }
  }
  // tp groups are blocks of consecutive ranks; ep x tp of the expert grid too.
  for (const auto& group : g.groups(GroupKind::kTp)) {
    EXPECT_EQ(group.back() - group.front() + 1, static_cast<int>(group.size()));
  }
  // Expert shards times expert replicas cover each (pp, tp) slice: ep * expert_dp = dp*ep*cp
  // (each pp slice with whole experts: times tp).
  EXPECT_EQ(e.ep * e.dp * e.cp * e.tp, d.dp * d.ep * d.cp * d.tp);
  if (!whole_experts) {
    EXPECT_EQ(e.tp, d.tp);
  }
}

TEST(RankGrid, PropertiesOverManyMeshes) {
  int checked = 0;
  for (int pp = 1; pp <= 4; ++pp) {
    for (int dp = 1; dp <= 4; ++dp) {
      for (int ep = 1; ep <= 4; ++ep) {
        for (int cp = 1; cp <= 3; ++cp) {
          for (int tp = 1; tp <= 4; ++tp) {
            const Degrees d{.pp = pp, .dp = dp, .ep = ep, .cp = cp, .tp = tp};
            if (d.world() <= 64) {
              CheckProperties(MakeGrid(d, EpPlacement::kSeparate));
              ++checked;
            }
            if ((dp * cp) % ep == 0 && pp * dp * cp * tp <= 64) {
              CheckProperties(MakeGrid(d, EpPlacement::kFolded));
              ++checked;
            }
            if (tp > 1 && (dp * cp * tp) % ep == 0 && pp * dp * cp * tp <= 64) {
              CheckProperties(MakeGrid(d, EpPlacement::kFolded, /*etp=*/1));
              ++checked;
            }
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(RankGrid, AxisSetToString) {
  EXPECT_EQ((AxisSet{Axis::kCp, Axis::kDp}).ToString(), "{dp,cp}");
  EXPECT_EQ(AxisSet{}.ToString(), "{}");
}

}  // namespace
}  // namespace pentamesh::mesh

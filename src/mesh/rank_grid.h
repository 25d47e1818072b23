// Rank arithmetic of the 5D mesh: rank <-> (pp, dp, ep, cp, tp) coordinates and the groups of
// ranks that share coordinates. Pure functions, no MPI (library pm_mesh_grid): mesh::Mesh builds
// its groups from them, and tests/mesh/rank_grid_test.cc checks them without MPI.
//
// Invariant: rank order is pp-dp-ep-cp-tp, tp innermost (Megatron-Core's order string
// "tp-cp-ep-dp-pp" read innermost first), so
//   rank = (((pp_i * dp + dp_i) * ep + ep_i) * cp + cp_i) * tp + tp_i
// and a tp group is always a block of consecutive ranks (one node when tp <= gpus_per_node).
//
// Worked example, {pp=2, dp=2, tp=2}, 8 ranks (rank: pp dp tp):
//   0: 0 0 0   1: 0 0 1   2: 0 1 0   3: 0 1 1   4: 1 0 0   5: 1 0 1   6: 1 1 0   7: 1 1 1
//   tp groups {0,1} {2,3} {4,5} {6,7};  dp groups {0,2} {1,3} {4,6} {5,7};
//   pp groups {0,4} {1,5} {2,6} {3,7};  dp x tp groups {0,1,2,3} {4,5,6,7}.
//
// Expert placement (spec::EpPlacement), mirroring Megatron-Core's two RankGenerators (one for
// dense layers, one for experts, both over the same world):
//   kSeparate  ep is an axis of the world: world = pp*dp*ep*cp*tp. The dense and the expert grid
//              are the same grid. Experts are sharded over ep and replicated over dp x cp; dense
//              weights are replicated over dp x ep x cp (every ep rank holds its own tokens).
//   kFolded    world = pp*dp*cp*tp (the dense grid has ep = 1). For MoE layers the dp x cp ranks
//              of one (pp, tp) are re-split into expert-dp x ep, ep innermost: with
//              j = dp_i * cp + cp_i (the rank's index among those dp*cp ranks),
//                ep_i = j % ep,   expert_dp_i = j / ep.
//              That is again the order pp-dp-ep-cp-tp, on the expert grid
//              {pp, dp = dp*cp/ep, ep, cp = 1, tp}; Megatron-Core builds its expert groups the
//              same way (generator order "tp-ep-dp-pp" with expert-dp as its dp).
//   Example {dp=2, cp=2, tp=2, ep=2, folded}: 8 ranks, dense cp groups {0,2} {1,3} {4,6} {5,7},
//   dense dp groups {0,4} {1,5} {2,6} {3,7}; ep groups {0,2} {1,3} {4,6} {5,7} (ep takes the cp
//   ranks first), expert-dp groups {0,4} {1,5} {2,6} {3,7}.
//   kFolded with etp = 1 (whole experts, "MoE parallel folding" over tp too): the stage's
//              dp x cp x tp ranks are re-split, tp innermost: with j = (dp_i * cp + cp_i) * tp +
//              tp_i, ep_i = j % ep, expert_dp_i = j / ep; the expert grid is
//              {pp, dp = dp*cp*tp/ep, ep, cp = 1, tp = 1} (Megatron-Core's expert generator with
//              etp = 1, order "tp-ep-dp-pp" with expert-tp 1).
//   Example {pp=2, dp=2, tp=2, ep=4, etp=1, folded}: 8 ranks (rank = (pp*2 + dp)*2 + tp), tp
//   groups {0,1} {2,3} {4,5} {6,7}; ep groups {0,1,2,3} {4,5,6,7} (one stage's dp x tp ranks),
//   expert-dp groups {0} .. {7} (each expert held once per stage). With dp=4, tp=2, ep=4, etp=1:
//   ep groups {0,1,2,3} {4,5,6,7}, expert-dp groups {0,4} {1,5} {2,6} {3,7}.
//
// Groups the layers need (GroupKind), all built from these two grids:
//   tp, cp, dp, pp      dense grid, one axis each
//   dp_cp               dense grid, axes {dp, ep, cp}: every rank holding the same dense shard,
//                       the dense-gradient reduction (under kFolded the dense ep degree is 1)
//   ep                  expert grid, axis ep: the MoE all-to-all
//   expert_dp           expert grid, axes {dp, cp}: every rank holding the same expert shard,
//                       the expert-gradient reduction
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/status.h"
#include "spec/layout.h"

namespace pentamesh::mesh {

// Mesh axes, outermost first (the rank order).
enum class Axis : uint8_t { kPp = 0, kDp = 1, kEp = 2, kCp = 3, kTp = 4 };
inline constexpr int kAxisCount = 5;
const char* AxisName(Axis axis);

// A set of axes, e.g. AxisSet{Axis::kDp, Axis::kCp}.
class AxisSet {
 public:
  constexpr AxisSet() = default;
  constexpr AxisSet(std::initializer_list<Axis> axes) {
    for (Axis a : axes) bits_ = static_cast<uint8_t>(bits_ | (1u << static_cast<int>(a)));
  }
  constexpr bool contains(Axis a) const { return (bits_ >> static_cast<int>(a)) & 1u; }
  std::string ToString() const;  // "{dp,cp}"

 private:
  uint8_t bits_ = 0;
};

// Size of each axis; all >= 1.
struct Degrees {
  int pp = 1;
  int dp = 1;
  int ep = 1;
  int cp = 1;
  int tp = 1;
  int operator[](Axis a) const;
  int world() const { return pp * dp * ep * cp * tp; }
  bool operator==(const Degrees&) const = default;
};

// Coordinates of one rank; each in [0, degree of its axis).
struct Coords {
  int pp = 0;
  int dp = 0;
  int ep = 0;
  int cp = 0;
  int tp = 0;
  int operator[](Axis a) const;
  int& operator[](Axis a);
  bool operator==(const Coords&) const = default;
};

// One grid over the five axes in the order pp-dp-ep-cp-tp.
class RankGrid {
 public:
  // Errors name the axis when a degree is < 1.
  static core::Result<RankGrid> Create(const Degrees& degrees);

  const Degrees& degrees() const { return degrees_; }
  int world_size() const { return degrees_.world(); }

  // REQUIRES: 0 <= rank < world_size().
  Coords coords(int rank) const;
  // REQUIRES: every coordinate within its degree.
  int rank(const Coords& coords) const;
  // The sorted ranks that share every coordinate of `rank` except those on `axes`.
  std::vector<int> group(AxisSet axes, int rank) const;
  // All groups of `axes`, ordered by their smallest rank; they partition the world.
  std::vector<std::vector<int>> groups(AxisSet axes) const;

 private:
  explicit RankGrid(const Degrees& degrees) : degrees_(degrees) {}
  Degrees degrees_;
};

// The groups a training job uses; see the file comment for their definition.
enum class GroupKind : uint8_t { kTp, kCp, kDp, kPp, kEp, kDpCp, kExpertDp };
inline constexpr int kGroupKindCount = 7;
inline constexpr std::array<GroupKind, kGroupKindCount> kAllGroupKinds = {
    GroupKind::kTp, GroupKind::kCp,   GroupKind::kDp,      GroupKind::kPp,
    GroupKind::kEp, GroupKind::kDpCp, GroupKind::kExpertDp};
// "tp", "cp", "dp", "pp", "ep", "dp_cp", "expert_dp": the names communicators and metrics use.
const char* GroupName(GroupKind kind);

// The coordinates of one rank in both grids.
struct MeshCoords {
  Coords dense;       // dense-grid coordinates (under kFolded dense.ep == 0)
  int ep = 0;         // position in the ep group (the expert-grid ep coordinate)
  int expert_dp = 0;  // position in the expert-dp group
};

// The dense grid and the expert grid of one layout.
class LayoutGrid {
 public:
  // expert_tp: the experts' tensor-parallel degree, tp (0 means tp) or 1 (kFolded only).
  // Errors: a degree < 1, etp neither 1 nor tp, etp = 1 under kSeparate with tp > 1, or under
  // kFolded ep not dividing dp*cp (etp = tp) or dp*cp*tp (etp = 1); each names the field.
  static core::Result<LayoutGrid> Create(const Degrees& degrees, spec::EpPlacement placement,
                                         int expert_tp = 0);
  static core::Result<LayoutGrid> FromLayout(const spec::Layout& layout);

  int world_size() const { return dense_.world_size(); }
  spec::EpPlacement placement() const { return placement_; }
  const RankGrid& dense() const { return dense_; }
  const RankGrid& expert() const { return expert_; }

  MeshCoords coords(int rank) const;
  // The sorted ranks of `rank`'s group of `kind`.
  std::vector<int> group(GroupKind kind, int rank) const;
  // All groups of `kind`, ordered by their smallest rank.
  std::vector<std::vector<int>> groups(GroupKind kind) const;

 private:
  LayoutGrid(RankGrid dense, RankGrid expert, spec::EpPlacement placement)
      : dense_(dense), expert_(expert), placement_(placement) {}
  RankGrid dense_;
  RankGrid expert_;
  spec::EpPlacement placement_;
};

}  // namespace pentamesh::mesh

// Rank <-> coordinate arithmetic for the pp-dp-ep-cp-tp order; see rank_grid.h.
#include "mesh/rank_grid.h"

#include <fmt/format.h>

#include "core/check.h"

namespace pentamesh::mesh {
namespace {

constexpr std::array<Axis, kAxisCount> kAxesOuterFirst = {Axis::kPp, Axis::kDp, Axis::kEp,
                                                          Axis::kCp, Axis::kTp};

}  // namespace

const char* AxisName(Axis axis) {
  switch (axis) {
    case Axis::kPp:
      return "pp";
    case Axis::kDp:
      return "dp";
    case Axis::kEp:
      return "ep";
    case Axis::kCp:
      return "cp";
    case Axis::kTp:
      return "tp";
  }
  return "?";
}

std::string AxisSet::ToString() const {
  std::string out = "{";
  for (Axis a : kAxesOuterFirst) {
    if (!contains(a)) continue;
    if (out.size() > 1) out += ",";
    out += AxisName(a);
  }
  return out + "}";
}

namespace {

// The field of each axis, indexed by Axis (its value is its position in the rank order).
constexpr std::array<int Degrees::*, kAxisCount> kDegreeFields = {
    &Degrees::pp, &Degrees::dp, &Degrees::ep, &Degrees::cp, &Degrees::tp};
constexpr std::array<int Coords::*, kAxisCount> kCoordFields = {
    &Coords::pp, &Coords::dp, &Coords::ep, &Coords::cp, &Coords::tp};

size_t Index(Axis a) {
  PM_CHECK(static_cast<int>(a) < kAxisCount) << "axis " << static_cast<int>(a);
  return static_cast<size_t>(a);
}

}  // namespace

int Degrees::operator[](Axis a) const { return this->*kDegreeFields[Index(a)]; }
int Coords::operator[](Axis a) const { return this->*kCoordFields[Index(a)]; }
int& Coords::operator[](Axis a) { return this->*kCoordFields[Index(a)]; }

core::Result<RankGrid> RankGrid::Create(const Degrees& degrees) {
  for (Axis a : kAxesOuterFirst) {
    if (degrees[a] < 1) {
      return core::Status::Error(fmt::format("mesh: {}={} must be >= 1", AxisName(a), degrees[a]));
    }
  }
  return RankGrid(degrees);
}

Coords RankGrid::coords(int rank) const {
  PM_CHECK(rank >= 0 && rank < world_size()) << "rank=" << rank << " world=" << world_size();
  Coords c;
  int rest = rank;
  for (int i = kAxisCount - 1; i >= 0; --i) {  // innermost (tp) first
    const Axis a = kAxesOuterFirst[static_cast<size_t>(i)];
    c[a] = rest % degrees_[a];
    rest /= degrees_[a];
  }
  return c;
}

int RankGrid::rank(const Coords& coords) const {
  int r = 0;
  for (Axis a : kAxesOuterFirst) {
    PM_CHECK(coords[a] >= 0 && coords[a] < degrees_[a])
        << AxisName(a) << "=" << coords[a] << " degree=" << degrees_[a];
    r = r * degrees_[a] + coords[a];
  }
  return r;
}

std::vector<int> RankGrid::group(AxisSet axes, int rank) const {
  const Coords base = coords(rank);
  // Enumerate the varying axes as a mixed-radix counter, outermost axis most significant, so
  // the ranks come out sorted.
  int size = 1;
  for (Axis a : kAxesOuterFirst) {
    if (axes.contains(a)) size *= degrees_[a];
  }
  std::vector<int> ranks;
  ranks.reserve(static_cast<size_t>(size));
  for (int index = 0; index < size; ++index) {
    Coords c = base;
    int rest = index;
    for (int i = kAxisCount - 1; i >= 0; --i) {
      const Axis a = kAxesOuterFirst[static_cast<size_t>(i)];
      if (!axes.contains(a)) continue;
      c[a] = rest % degrees_[a];
      rest /= degrees_[a];
    }
    ranks.push_back(this->rank(c));
  }
  return ranks;
}

std::vector<std::vector<int>> RankGrid::groups(AxisSet axes) const {
  std::vector<std::vector<int>> out;
  std::vector<bool> seen(static_cast<size_t>(world_size()), false);
  for (int r = 0; r < world_size(); ++r) {
    if (seen[static_cast<size_t>(r)]) continue;
    out.push_back(group(axes, r));
    for (int member : out.back()) seen[static_cast<size_t>(member)] = true;
  }
  return out;
}

const char* GroupName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kEp:
      return "ep";
    case GroupKind::kDpCp:
      return "dp_cp";
    case GroupKind::kExpertDp:
      return "expert_dp";
  }
  return "?";
}

core::Result<LayoutGrid> LayoutGrid::Create(const Degrees& degrees, spec::EpPlacement placement,
                                            int expert_tp) {
  PM_ASSIGN_OR_RETURN(RankGrid full, RankGrid::Create(degrees));
  if (expert_tp == 0) expert_tp = degrees.tp;
  if (expert_tp != degrees.tp && expert_tp != 1) {
    return core::Status::Error(
        fmt::format("mesh: etp={} must be 1 or tp={}", expert_tp, degrees.tp));
  }
  if (placement == spec::EpPlacement::kSeparate) {
    if (expert_tp != degrees.tp) {
      return core::Status::Error(fmt::format(
          "mesh: etp={} (experts not split over tp) needs ep_placement=folded", expert_tp));
    }
    return LayoutGrid(full, full, placement);
  }
  // The ranks of one pipeline stage that the experts re-split: dp x cp, or dp x cp x tp when
  // the experts are whole (etp = 1) and ep may take the tp ranks too.
  const int span = degrees.dp * degrees.cp * (expert_tp == 1 ? degrees.tp : 1);
  if (span % degrees.ep != 0) {
    return core::Status::Error(
        expert_tp == 1 && degrees.tp > 1
            ? fmt::format("mesh: ep={} must divide dp*cp*tp={} when ep_placement=folded and etp=1 "
                          "(dp={}, cp={}, tp={})",
                          degrees.ep, span, degrees.dp, degrees.cp, degrees.tp)
            : fmt::format(
                  "mesh: ep={} must divide dp*cp={} when ep_placement=folded (dp={}, cp={})",
                  degrees.ep, span, degrees.dp, degrees.cp));
  }
  Degrees dense = degrees;
  dense.ep = 1;
  const Degrees expert{.pp = degrees.pp,
                       .dp = span / degrees.ep,
                       .ep = degrees.ep,
                       .cp = 1,
                       .tp = expert_tp == 1 ? 1 : degrees.tp};
  PM_ASSIGN_OR_RETURN(RankGrid dense_grid, RankGrid::Create(dense));
  PM_ASSIGN_OR_RETURN(RankGrid expert_grid, RankGrid::Create(expert));
  return LayoutGrid(dense_grid, expert_grid, placement);
}

core::Result<LayoutGrid> LayoutGrid::FromLayout(const spec::Layout& layout) {
  const std::array<std::pair<const char*, int64_t>, kAxisCount> fields = {{{"pp", layout.pp},
                                                                           {"dp", layout.dp},
                                                                           {"ep", layout.ep},
                                                                           {"cp", layout.cp},
                                                                           {"tp", layout.tp}}};
  for (const auto& [name, value] : fields) {
    if (value < 1 || value > (1 << 20)) {
      return core::Status::Error(fmt::format("mesh: {}={} must be in [1, 2^20]", name, value));
    }
  }
  const Degrees degrees{.pp = static_cast<int>(layout.pp),
                        .dp = static_cast<int>(layout.dp),
                        .ep = static_cast<int>(layout.ep),
                        .cp = static_cast<int>(layout.cp),
                        .tp = static_cast<int>(layout.tp)};
  if (static_cast<int64_t>(degrees.pp) * degrees.dp * degrees.ep * degrees.cp * degrees.tp >
      (int64_t{1} << 24)) {
    return core::Status::Error(
        fmt::format("mesh: layout '{}' spans more than 2^24 ranks", spec::ShortLayout(layout)));
  }
  return Create(degrees, layout.ep_placement, static_cast<int>(layout.expert_tp()));
}

MeshCoords LayoutGrid::coords(int rank) const {
  const Coords expert = expert_.coords(rank);
  // The expert-dp group spans the expert grid's {dp, cp} axes (cp = 1 under kFolded).
  return MeshCoords{.dense = dense_.coords(rank),
                    .ep = expert.ep,
                    .expert_dp = expert.dp * expert_.degrees().cp + expert.cp};
}

namespace {

struct GroupDef {
  bool on_expert_grid;
  AxisSet axes;
};

GroupDef Definition(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return {false, {Axis::kTp}};
    case GroupKind::kCp:
      return {false, {Axis::kCp}};
    case GroupKind::kDp:
      return {false, {Axis::kDp}};
    case GroupKind::kPp:
      return {false, {Axis::kPp}};
    case GroupKind::kEp:
      return {true, {Axis::kEp}};
    case GroupKind::kDpCp:
      return {false, {Axis::kDp, Axis::kEp, Axis::kCp}};
    case GroupKind::kExpertDp:
      return {true, {Axis::kDp, Axis::kCp}};
  }
  PM_CHECK(false) << "unknown GroupKind " << static_cast<int>(kind);
  return {};
}

}  // namespace

std::vector<int> LayoutGrid::group(GroupKind kind, int rank) const {
  const GroupDef def = Definition(kind);
  return (def.on_expert_grid ? expert_ : dense_).group(def.axes, rank);
}

std::vector<std::vector<int>> LayoutGrid::groups(GroupKind kind) const {
  const GroupDef def = Definition(kind);
  return (def.on_expert_grid ? expert_ : dense_).groups(def.axes);
}

}  // namespace pentamesh::mesh

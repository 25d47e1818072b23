// Builds the named communicators of a layout; see mesh.h.
#include "mesh/mesh.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>

#include "comm/stats_json.h"
#include "core/check.h"

namespace pentamesh::mesh {
namespace {

constexpr int kLayoutWords = 6;

std::array<int64_t, kLayoutWords> LayoutWords(const spec::Layout& l) {
  return {l.pp, l.dp, l.ep, l.cp, l.tp, l.ep_placement == spec::EpPlacement::kFolded ? 1 : 0};
}

// Every rank must pass the same degrees, or the groups they create would not match (and MPI's
// group creation would hang). One all_gather on the world (timed like every op) compares them;
// all ranks see the same table, so all return the same error.
core::Status CheckSameLayoutEverywhere(const spec::Layout& layout, comm::World& world) {
  const std::array<int64_t, kLayoutWords> mine = LayoutWords(layout);
  std::vector<int64_t> all(static_cast<size_t>(kLayoutWords * world.size()));
  world.world().all_gather(all.data(), mine.data(), kLayoutWords, core::Dtype::kI64);
  for (int r = 0; r < world.size(); ++r) {
    const auto* theirs = all.data() + static_cast<ptrdiff_t>(r) * kLayoutWords;
    const auto* first = all.data();
    if (std::equal(first, first + kLayoutWords, theirs)) continue;
    auto show = [](const int64_t* w) {
      return fmt::format("pp={} dp={} ep={} cp={} tp={} ep_placement={}", w[0], w[1], w[2], w[3],
                         w[4], w[5] == 1 ? "folded" : "separate");
    };
    return core::Status::Error(
        fmt::format("mesh: ranks disagree on the layout: rank 0 has {}, "
                    "rank {} has {}",
                    show(first), r, show(theirs)));
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<Mesh> Mesh::Create(const spec::Layout& layout, comm::World& world) {
  PM_RETURN_IF_ERROR(CheckSameLayoutEverywhere(layout, world));
  PM_ASSIGN_OR_RETURN(LayoutGrid grid, LayoutGrid::FromLayout(layout));
  if (grid.world_size() != world.size()) {
    return core::Status::Error(fmt::format(
        "mesh: layout '{}' needs {} ranks but the job has {} (dp*tp*pp*cp{} must equal the "
        "number of ranks)",
        spec::ShortLayout(layout), grid.world_size(), world.size(),
        layout.ep_placement == spec::EpPlacement::kSeparate ? "*ep" : ""));
  }
  Mesh mesh(layout, std::move(grid), world.rank());
  // Every rank creates its group of each kind, in the same order (World::CreateGroup contract).
  for (GroupKind kind : kAllGroupKinds) {
    const std::vector<int> ranks = mesh.grid_.group(kind, mesh.rank_);
    mesh.groups_[static_cast<size_t>(kind)] = world.CreateGroup(GroupName(kind), ranks);
    PM_CHECK(mesh.group(kind).world_ranks() == ranks) << GroupName(kind);
  }
  return mesh;
}

std::vector<std::pair<std::string, comm::CommStats>> Mesh::Stats() const {
  std::vector<std::pair<std::string, comm::CommStats>> out;
  out.reserve(kAllGroupKinds.size());
  for (GroupKind kind : kAllGroupKinds) out.emplace_back(GroupName(kind), group(kind).stats());
  return out;
}

nlohmann::json Mesh::StatsJson() const {
  nlohmann::json out = nlohmann::json::object();
  for (GroupKind kind : kAllGroupKinds) out[GroupName(kind)] = comm::ToJson(group(kind).stats());
  return out;
}

std::string Mesh::Describe() const {
  const Coords& d = coords_.dense;
  std::string out = fmt::format("rank {} pp{} dp{} ep{} cp{} tp{} expert_dp{} |", rank_, d.pp, d.dp,
                                coords_.ep, d.cp, d.tp, coords_.expert_dp);
  for (GroupKind kind : kAllGroupKinds) out += " " + group(kind).Describe();
  return out;
}

void Mesh::ResetStats() {
  for (GroupKind kind : kAllGroupKinds) group(kind).reset_stats();
}

}  // namespace pentamesh::mesh

// Mesh: the communicators of one training job, built once from a Layout and the World: one
// named Communicator per GroupKind (tp, cp, dp, pp, ep, dp_cp, expert_dp; see rank_grid.h for
// which ranks each holds), plus this rank's coordinates. Layers receive the Communicator& they
// need from here; nothing else creates groups.
//
// Invariant: group(kind).world_ranks() == grid().group(kind, world rank) for every kind, so the
// runtime and the planner agree on every group.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/status.h"
#include "mesh/rank_grid.h"
#include "spec/layout.h"

namespace pentamesh::mesh {

class Mesh {
 public:
  // Collective over the world: every rank calls it with the same layout. Errors (returned on
  // every rank alike): ranks passing different degrees, invalid degrees, or layout.gpus()
  // differing from world.size() (naming both). Costs one world all_gather (counted).
  static core::Result<Mesh> Create(const spec::Layout& layout, comm::World& world);

  Mesh(Mesh&&) = default;
  Mesh& operator=(Mesh&&) = default;

  const spec::Layout& layout() const { return layout_; }
  const LayoutGrid& grid() const { return grid_; }
  int rank() const { return rank_; }  // world rank
  const MeshCoords& coords() const { return coords_; }

  comm::Communicator& group(GroupKind kind) const { return *groups_[static_cast<size_t>(kind)]; }
  comm::Communicator& tp() const { return group(GroupKind::kTp); }
  comm::Communicator& cp() const { return group(GroupKind::kCp); }
  comm::Communicator& dp() const { return group(GroupKind::kDp); }
  comm::Communicator& pp() const { return group(GroupKind::kPp); }
  comm::Communicator& ep() const { return group(GroupKind::kEp); }
  comm::Communicator& dp_cp() const { return group(GroupKind::kDpCp); }
  comm::Communicator& expert_dp() const { return group(GroupKind::kExpertDp); }

  // Counters of every group keyed by its name, in kAllGroupKinds order (for metrics.jsonl).
  std::vector<std::pair<std::string, comm::CommStats>> Stats() const;
  // {"tp": comm::ToJson(tp().stats()), "cp": ..., ...}: metrics.jsonl's comm_bytes.
  nlohmann::json StatsJson() const;
  // One line for logs: "rank 5 pp0 dp1 ep0 cp0 tp1 | tp {4,5} cp {5} ...".
  std::string Describe() const;
  void ResetStats();

 private:
  Mesh(const spec::Layout& layout, LayoutGrid grid, int rank)
      : layout_(layout), grid_(std::move(grid)), rank_(rank), coords_(grid_.coords(rank)) {}

  spec::Layout layout_;
  LayoutGrid grid_;
  int rank_;
  MeshCoords coords_;
  std::array<std::unique_ptr<comm::Communicator>, kGroupKindCount> groups_;
};

}  // namespace pentamesh::mesh

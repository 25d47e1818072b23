// The planner's search space: every structurally valid layout of a model on a cluster for a batch.
//
// Shape of the space, outermost first:
//   Mesh   (dp, tp, pp, cp, ep, ep_placement)   fixes how parameters are sharded
//   Branch (zero, schedule, V, sp, cp_kind)     fixes everything but the micro-batch and recompute;
//                                               zero descending (3 first: least model-state memory)
//   mbs    ascending divisors of sequences/data ranks (dp, times ep when EP is its own axis);
//          gradient accumulation = sequences / (data ranks * mbs)
//   recompute  full, selective with Megatron's cheap module list (MoE / MLA models), selective,
//              none
// Micro-batch sizes ascend and selective comes before none, so the search can skip what a
// smaller layout already proved cannot fit (see search.h for why that loses nothing).
//
// Invariant: the layouts visited are exactly {l : spec::Validate(l) is empty, IsCanonical(l),
// allow.AllowsLayout(l)} (checked against a brute-force product in tests/plan/space_test.cc).
// The divisibility rules below are the enumeration of spec::Validate's rules, not new facts.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/allow.h"
#include "spec/cluster_spec.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::plan {

struct SpaceOptions {
  Constraints allow;
  bool include_gpipe = true;   // GPipe is dominated by 1F1B in memory; kept for comparison
  bool include_sp_off = true;  // sequence parallel off (only differs when tp > 1)
  int64_t mbs_max = 0;         // largest micro-batch size tried; 0 = every divisor
};

// One recomputation the space tries: its kind and, with selective, its module list
// (spec::Layout::recompute_modules; 0 = core attention alone).
struct RecomputeChoice {
  spec::Recompute recompute = spec::Recompute::kNone;
  uint32_t modules = 0;
  bool operator==(const RecomputeChoice&) const = default;
};
// The modules a selective choice of `model` adds to core attention when the search tries module
// recomputation: the memory-bound ones Megatron-Core reruns cheaply (layernorm and moe_act for
// MoE models) and MLA's up-projections; 0 for a dense GQA model.
uint32_t CheapRecomputeModules(const spec::ModelSpec& model);
// Whether choice a stashes at least what choice b stashes, whatever else the layout is: none
// and selective choices, a's modules a subset of b's. Full is comparable with itself only.
bool AtLeastAsLarge(const RecomputeChoice& a, const RecomputeChoice& b);

struct Branch {
  int zero = 0;
  spec::Schedule schedule = spec::Schedule::kOneFOneB;
  int64_t virtual_stages = 1;
  bool sp = true;
  spec::CpKind cp_kind = spec::CpKind::kRing;
};

struct Mesh {
  spec::Layout base;         // degrees and ep_placement; other fields at their defaults
  std::vector<int64_t> mbs;  // ascending
  std::vector<Branch> branches;
};

// Layouts that differ only in a field that has no effect are enumerated once: sp only when tp > 1,
// cp_kind only when cp > 1, ep_placement folded only when ep > 1, a schedule other than 1F1B only
// when pp > 1, ZeRO > 0 only when dp * cp > 1.
bool IsCanonical(const spec::Layout& layout);

class Space {
 public:
  Space(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
        const spec::TrainSpec& train, const SpaceOptions& options);

  const std::vector<Mesh>& meshes() const { return meshes_; }
  // Recomputations in search order: full, selective with CheapRecomputeModules, selective, none
  // (those allowed: --allow's recompute and recompute_modules clauses).
  const std::vector<RecomputeChoice>& recomputes() const { return recomputes_; }
  // Interleaved schedules need the micro-batch count divisible by pp.
  bool MbsValid(const Mesh& mesh, const Branch& branch, int64_t mbs) const;
  // Layouts of one branch from the mbs at index `mbs_index` on.
  int64_t CountFrom(const Mesh& mesh, const Branch& branch, size_t mbs_index) const;
  int64_t CountLayouts() const;  // the whole space
  spec::Layout MakeLayout(const Mesh& mesh, const Branch& branch, int64_t mbs,
                          const RecomputeChoice& recompute) const;

  // Visits every layout of the space in canonical order (brute force; tests and counting).
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Mesh& mesh : meshes_) {
      for (const Branch& branch : mesh.branches) {
        for (int64_t mbs : mesh.mbs) {
          if (!MbsValid(mesh, branch, mbs)) continue;
          for (const RecomputeChoice& r : recomputes_) fn(MakeLayout(mesh, branch, mbs, r));
        }
      }
    }
  }

 private:
  void AddMesh(const spec::Layout& degrees);
  void AddBranches(Mesh& mesh) const;

  const spec::ModelSpec& model_;
  const spec::TrainSpec& train_;
  SpaceOptions options_;
  int64_t seqs_ = 0;  // sequences per global batch
  std::vector<Mesh> meshes_;
  std::vector<RecomputeChoice> recomputes_;
};

std::vector<int64_t> Divisors(int64_t n);  // ascending; empty for n <= 0

}  // namespace pentamesh::plan

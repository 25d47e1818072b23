#include "plan/space.h"

#include <vector>

#include "schedule/table.h"

namespace pentamesh::plan {

using spec::CpKind;
using spec::EpPlacement;
using spec::Layout;
using spec::Recompute;
using spec::Schedule;

// Trial division up to sqrt(n): each divisor d <= sqrt(n) brings its partner n / d, so the cost
// is O(sqrt n) (2^20 steps for the largest batch, 2^40 tokens), never linear in n.
std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

bool IsCanonical(const Layout& l) {
  if (l.tp == 1 && !l.sp) return false;
  if (l.cp == 1 && l.cp_kind != CpKind::kRing) return false;
  if (l.ep == 1 && l.ep_placement != EpPlacement::kSeparate) return false;
  if (l.pp == 1 && l.schedule != Schedule::kOneFOneB) return false;
  const schedule::ScheduleRow* row = schedule::FindRow(l.schedule);
  if (row != nullptr && row->layout_virtual_stages_min == 1 && l.virtual_stages != 1) {
    return false;
  }
  if (l.dp * l.cp == 1 && l.zero != 0) return false;
  return true;
}

uint32_t CheapRecomputeModules(const spec::ModelSpec& model) {
  uint32_t m = 0;
  if (model.is_moe()) m |= spec::kRecomputeLayerNorm | spec::kRecomputeMoeAct;
  if (model.is_mla()) m |= spec::kRecomputeMlaUpProj;
  return m == 0 ? 0 : m | spec::kRecomputeCoreAttn;
}

bool AtLeastAsLarge(const RecomputeChoice& a, const RecomputeChoice& b) {
  if (a == b) return true;
  if (a.recompute == Recompute::kFull || b.recompute == Recompute::kFull) return false;
  // The modules each reruns: none reruns nothing, selective its list (core attention alone
  // by default); rerunning more stashes less.
  auto reruns = [](const RecomputeChoice& c) -> uint32_t {
    if (c.recompute == Recompute::kNone) return 0;
    return c.modules != 0 ? c.modules : spec::kRecomputeCoreAttn;
  };
  return (reruns(a) & reruns(b)) == reruns(a);
}

Space::Space(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
             const spec::TrainSpec& train, const SpaceOptions& options)
    : model_(model), train_(train), options_(options) {
  const uint32_t cheap = CheapRecomputeModules(model);
  for (Recompute r : {Recompute::kFull, Recompute::kSelective, Recompute::kNone}) {
    if (!options_.allow.Allows(Field::kRecompute, static_cast<int64_t>(r))) continue;
    if (r == Recompute::kSelective && cheap != 0 &&
        options_.allow.Allows(Field::kRecomputeModules, cheap)) {
      recomputes_.push_back({r, cheap});
    }
    if (options_.allow.Allows(Field::kRecomputeModules, 0)) recomputes_.push_back({r, 0});
  }
  const int64_t gpus = cluster.gpus();
  if (gpus <= 0 || train.seq_len <= 0 || train.seq_len > model.max_seq_len) return;
  if (train.global_batch_tokens % train.seq_len != 0) return;
  seqs_ = train.global_batch_seqs();
  if (seqs_ <= 0) return;
  auto tp_ok = [&](int64_t tp) {
    return cluster.gpus_per_node % tp == 0 && model.heads % tp == 0 && model.kv_heads % tp == 0 &&
           model.ffn_hidden % tp == 0 && (!model.is_moe() || model.moe.expert_ffn_hidden % tp == 0);
  };
  for (int64_t tp : Divisors(gpus)) {
    if (!tp_ok(tp)) continue;
    for (int64_t pp : Divisors(gpus / tp)) {
      if (spec::ChunkLayers(model.layers, pp, 0) < 0) continue;
      for (int64_t cp : Divisors(gpus / tp / pp)) {
        const int64_t rest = gpus / tp / pp / cp;
        // EP as its own axis (dp * ep = rest) ...
        for (int64_t ep : Divisors(rest)) {
          if (ep > 1 && (!model.is_moe() || model.moe.experts % ep != 0)) continue;
          AddMesh(Layout{.dp = rest / ep, .tp = tp, .pp = pp, .cp = cp, .ep = ep});
        }
        // ... and folded into the dp x cp ranks (ep divides dp * cp), or, with whole experts
        // (etp = 1), into the tp x cp x dp ranks (ep divides dp * cp * tp: MoE parallel folding).
        if (!model.is_moe()) continue;
        for (int64_t ep : Divisors(model.moe.experts)) {
          if (ep == 1) continue;
          if ((rest * cp) % ep == 0) {
            AddMesh(Layout{.dp = rest,
                           .tp = tp,
                           .pp = pp,
                           .cp = cp,
                           .ep = ep,
                           .ep_placement = EpPlacement::kFolded});
          }
          if (tp > 1 && (rest * cp * tp) % ep == 0) {
            AddMesh(Layout{.dp = rest,
                           .tp = tp,
                           .pp = pp,
                           .cp = cp,
                           .ep = ep,
                           .etp = 1,
                           .ep_placement = EpPlacement::kFolded});
          }
        }
      }
    }
  }
}

void Space::AddMesh(const Layout& degrees) {
  const Constraints& allow = options_.allow;
  if (seqs_ % degrees.data_ranks() != 0) return;
  if (!allow.Allows(Field::kDp, degrees.dp) || !allow.Allows(Field::kTp, degrees.tp) ||
      !allow.Allows(Field::kPp, degrees.pp) || !allow.Allows(Field::kCp, degrees.cp) ||
      !allow.Allows(Field::kEp, degrees.ep) || !allow.Allows(Field::kEtp, degrees.expert_tp()) ||
      !allow.Allows(Field::kEpPlacement, static_cast<int64_t>(degrees.ep_placement))) {
    return;
  }
  Mesh mesh{.base = degrees, .mbs = {}, .branches = {}};
  for (int64_t mbs : Divisors(seqs_ / degrees.data_ranks())) {
    if (options_.mbs_max > 0 && mbs > options_.mbs_max) break;
    if (allow.Allows(Field::kMbs, mbs)) mesh.mbs.push_back(mbs);
  }
  AddBranches(mesh);
  // Drop interleaved branches that no micro-batch size serves, then meshes left without layouts.
  std::erase_if(mesh.branches, [&](const Branch& b) { return CountFrom(mesh, b, 0) == 0; });
  if (mesh.mbs.empty() || mesh.branches.empty() || recomputes_.empty()) return;
  meshes_.push_back(std::move(mesh));
}

void Space::AddBranches(Mesh& mesh) const {
  const Layout& d = mesh.base;
  const Constraints& allow = options_.allow;
  // The searched rows of schedule/'s table, in its order; one stage runs 1F1B (IsCanonical).
  std::vector<std::pair<Schedule, int64_t>> schedules;
  for (const schedule::ScheduleRow& row : schedule::Schedules()) {
    if (row.searched == schedule::Searched::kNo ||
        (row.searched == schedule::Searched::kUnlessNoGpipe && !options_.include_gpipe) ||
        (d.pp == 1 && row.kind != Schedule::kOneFOneB)) {
      continue;
    }
    if (row.layout_virtual_stages_min == 1) {
      schedules.push_back({row.kind, 1});
      continue;
    }
    for (int64_t v = row.layout_virtual_stages_min; d.pp * v <= model_.layers; ++v) {
      if (spec::ChunkLayers(model_.layers, d.pp * v, 0) >= 0) schedules.push_back({row.kind, v});
    }
  }
  const int64_t cp_div = d.cp > 1 ? 2 * d.cp : 1;
  for (int zero = 3; zero >= 0; --zero) {  // descending: model states grow as zero falls
    if ((d.dp * d.cp == 1 && zero > 0) || !allow.Allows(Field::kZero, zero)) continue;
    for (auto [schedule, v] : schedules) {
      if (!allow.Allows(Field::kSchedule, static_cast<int64_t>(schedule)) ||
          !allow.Allows(Field::kVirtualStages, v)) {
        continue;
      }
      for (bool sp : {true, false}) {
        if (!sp && (d.tp == 1 || !options_.include_sp_off || d.expert_tp() != d.tp)) continue;
        if (!allow.Allows(Field::kSp, sp ? 1 : 0)) continue;
        if (train_.seq_len % (cp_div * (sp ? d.tp : 1)) != 0) continue;
        for (CpKind kind : {CpKind::kRing, CpKind::kUlysses}) {
          if (kind == CpKind::kUlysses && (d.cp == 1 || (model_.kv_heads / d.tp) % d.cp != 0)) {
            continue;
          }
          if (!allow.Allows(Field::kCpKind, static_cast<int64_t>(kind))) continue;
          const Branch branch{
              .zero = zero, .schedule = schedule, .virtual_stages = v, .sp = sp, .cp_kind = kind};
          if (!allow.PassesFilters(MakeLayout(mesh, branch, 1, {}))) continue;
          mesh.branches.push_back(branch);
        }
      }
    }
  }
}

bool Space::MbsValid(const Mesh& mesh, const Branch& branch, int64_t mbs) const {
  const schedule::ScheduleRow* row = schedule::FindRow(branch.schedule);
  if (row == nullptr || !row->microbatches_in_groups_of_pp) return true;
  return (seqs_ / (mesh.base.data_ranks() * mbs)) % mesh.base.pp == 0;
}

int64_t Space::CountFrom(const Mesh& mesh, const Branch& branch, size_t mbs_index) const {
  int64_t n = 0;
  for (size_t i = mbs_index; i < mesh.mbs.size(); ++i) n += MbsValid(mesh, branch, mesh.mbs[i]);
  return n * static_cast<int64_t>(recomputes_.size());
}

int64_t Space::CountLayouts() const {
  int64_t n = 0;
  for (const Mesh& mesh : meshes_) {
    for (const Branch& b : mesh.branches) n += CountFrom(mesh, b, 0);
  }
  return n;
}

Layout Space::MakeLayout(const Mesh& mesh, const Branch& branch, int64_t mbs,
                         const RecomputeChoice& recompute) const {
  Layout l = mesh.base;
  l.zero = branch.zero;
  l.mbs = mbs;
  l.recompute = recompute.recompute;
  l.recompute_modules = recompute.modules;
  l.schedule = branch.schedule;
  l.virtual_stages = branch.virtual_stages;
  l.cp_kind = branch.cp_kind;
  l.sp = branch.sp;
  return l;
}

}  // namespace pentamesh::plan

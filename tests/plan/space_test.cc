// The enumerated space equals the brute-force product filtered by spec::Validate, IsCanonical and
// the --allow constraints, so the planner neither misses nor invents a layout.
#include "plan/space.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "schedule/table.h"
#include "spec/validate.h"
#include "testing/tiny_specs.h"

namespace pentamesh::plan {
namespace {

using spec::CpKind;
using spec::EpPlacement;
using spec::Layout;
using spec::Recompute;
using spec::Schedule;

using testing::PlannerCluster;
using testing::PlannerDense;
using testing::PlannerMoe;
using testing::Train;

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int64_t, int,
                       uint32_t, int, int64_t, int, bool>;
Key KeyOf(const Layout& l) {
  return {l.dp,
          l.tp,
          l.pp,
          l.cp,
          l.ep,
          l.expert_tp(),
          static_cast<int>(l.ep_placement),
          l.zero,
          l.mbs,
          static_cast<int>(l.recompute),
          l.recompute_modules,
          static_cast<int>(l.schedule),
          l.virtual_stages,
          static_cast<int>(l.cp_kind),
          l.sp};
}

// Every layout with degrees dividing the GPU count and mbs up to `mbs_max`, filtered.
std::set<Key> BruteForce(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                         const spec::TrainSpec& train, const Constraints& allow, int64_t mbs_max) {
  std::set<Key> out;
  const int64_t g = cluster.gpus();
  // Every schedule the planner searches (schedule/'s table), with every V a layout may give it.
  std::vector<std::pair<Schedule, int64_t>> schedules;
  for (const schedule::ScheduleRow& row : schedule::Schedules()) {
    if (row.searched == schedule::Searched::kNo) continue;
    if (row.layout_virtual_stages_min == 1) {
      schedules.push_back({row.kind, 1});
      continue;
    }
    for (int64_t v = row.layout_virtual_stages_min; v <= model.layers; ++v) {
      schedules.push_back({row.kind, v});
    }
  }
  for (int64_t tp : Divisors(g))
    for (int64_t pp : Divisors(g / tp))
      for (int64_t cp : Divisors(g / tp / pp))
        for (int64_t ep : Divisors(model.is_moe() ? model.moe.experts : 1))
          for (int64_t etp : {int64_t{0}, int64_t{1}})  // 0 = tp; 1 = whole experts (tp > 1)
            for (EpPlacement place : {EpPlacement::kSeparate, EpPlacement::kFolded}) {
              if (etp == 1 && tp == 1) continue;
              const int64_t rest = g / tp / pp / cp;
              if (place == EpPlacement::kSeparate && rest % ep != 0) continue;
              const int64_t dp = place == EpPlacement::kSeparate ? rest / ep : rest;
              for (int zero = 0; zero <= 3; ++zero)
                for (int64_t mbs = 1; mbs <= mbs_max; ++mbs)
                  for (auto [r, modules] :
                       {std::pair{Recompute::kNone, 0u}, std::pair{Recompute::kSelective, 0u},
                        std::pair{Recompute::kSelective, CheapRecomputeModules(model)},
                        std::pair{Recompute::kFull, 0u}})
                    for (auto [schedule, v] : schedules)
                      for (bool sp : {true, false})
                        for (CpKind kind : {CpKind::kRing, CpKind::kUlysses}) {
                          const Layout l{.dp = dp,
                                         .tp = tp,
                                         .pp = pp,
                                         .cp = cp,
                                         .ep = ep,
                                         .etp = etp,
                                         .zero = zero,
                                         .mbs = mbs,
                                         .recompute = r,
                                         .recompute_modules = modules,
                                         .schedule = schedule,
                                         .virtual_stages = v,
                                         .cp_kind = kind,
                                         .ep_placement = place,
                                         .sp = sp};
                          if (!IsCanonical(l) || !allow.AllowsLayout(l)) continue;
                          if (!spec::Validate(model, cluster, train, l).empty()) continue;
                          out.insert(KeyOf(l));
                        }
            }
  return out;
}

void ExpectSameAsBruteForce(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                            const spec::TrainSpec& train, const std::string& allow_text) {
  SpaceOptions options;
  options.allow = *Constraints::Parse(allow_text);
  const Space space(model, cluster, train, options);
  std::set<Key> enumerated;
  int64_t visited = 0;
  space.ForEach([&](const Layout& l) {
    ++visited;
    EXPECT_TRUE(enumerated.insert(KeyOf(l)).second) << spec::ShortLayout(l) << " twice";
  });
  EXPECT_EQ(visited, space.CountLayouts());
  const std::set<Key> expected =
      BruteForce(model, cluster, train, options.allow, train.global_batch_seqs());
  EXPECT_GT(expected.size(), 0u);
  EXPECT_EQ(enumerated.size(), expected.size());
  EXPECT_TRUE(enumerated == expected);
}

TEST(Space, MoeEqualsValidatedBruteForce) {
  ExpectSameAsBruteForce(PlannerMoe(), PlannerCluster(4, 4), Train(1024, 8), "");
}

TEST(Space, DenseEqualsValidatedBruteForce) {
  ExpectSameAsBruteForce(PlannerDense(), PlannerCluster(4, 2), Train(512, 12), "");
}

TEST(Space, AllowFilterEqualsBruteForce) {
  ExpectSameAsBruteForce(PlannerMoe(), PlannerCluster(4, 4), Train(1024, 8),
                         "tp<=2 pp>=2 recompute!=none schedule=1f1b|interleaved");
}

TEST(Space, CanonicalRules) {
  EXPECT_TRUE(IsCanonical(Layout{}));
  EXPECT_FALSE(IsCanonical(Layout{.sp = false}));
  EXPECT_TRUE(IsCanonical(Layout{.tp = 2, .sp = false}));
  EXPECT_FALSE(IsCanonical(Layout{.cp_kind = CpKind::kUlysses}));
  EXPECT_FALSE(IsCanonical(Layout{.ep_placement = EpPlacement::kFolded}));
  EXPECT_FALSE(IsCanonical(Layout{.schedule = Schedule::kZeroBubble}));
  EXPECT_FALSE(IsCanonical(Layout{.zero = 1}));
  EXPECT_TRUE(IsCanonical(Layout{.dp = 2, .zero = 1}));
}

TEST(Space, EmptyWhenTheBatchCannotBeMet) {
  // 1000 tokens is not a whole number of 512-token sequences.
  spec::TrainSpec train = Train(512, 2);
  train.global_batch_tokens = 1000;
  EXPECT_EQ(Space(PlannerDense(), PlannerCluster(4, 2), train, {}).CountLayouts(), 0);
  // Longer than the model's context.
  EXPECT_EQ(Space(PlannerDense(), PlannerCluster(4, 2), Train(65536, 8), {}).CountLayouts(), 0);
}

TEST(Space, MeshesAreOrderedForPruning) {
  const Space space(PlannerMoe(), PlannerCluster(4, 4), Train(1024, 8), {});
  ASSERT_FALSE(space.meshes().empty());
  for (const Mesh& mesh : space.meshes()) {
    EXPECT_TRUE(std::is_sorted(mesh.mbs.begin(), mesh.mbs.end()));
    for (size_t b = 1; b < mesh.branches.size(); ++b) {
      EXPECT_GE(mesh.branches[b - 1].zero, mesh.branches[b].zero);
    }
  }
  // MoE: full, selective with layernorm + moe_act (and core attention), selective, none.
  ASSERT_EQ(space.recomputes().size(), 4u);
  EXPECT_EQ(space.recomputes().front().recompute, Recompute::kFull);
  EXPECT_EQ(
      space.recomputes()[1],
      (RecomputeChoice{Recompute::kSelective, spec::kRecomputeCoreAttn | spec::kRecomputeLayerNorm |
                                                  spec::kRecomputeMoeAct}));
  EXPECT_EQ(space.recomputes()[2], (RecomputeChoice{Recompute::kSelective, 0}));
  EXPECT_EQ(space.recomputes().back().recompute, Recompute::kNone);
  // A dense GQA model has no module choice; --allow recompute_modules=core_attn removes it.
  EXPECT_EQ(Space(PlannerDense(), PlannerCluster(4, 4), Train(1024, 8), {}).recomputes().size(),
            3u);
  SpaceOptions o;
  o.allow = *Constraints::Parse("recompute_modules=core_attn");
  EXPECT_EQ(Space(PlannerMoe(), PlannerCluster(4, 4), Train(1024, 8), o).recomputes().size(), 3u);
}

}  // namespace
}  // namespace pentamesh::plan

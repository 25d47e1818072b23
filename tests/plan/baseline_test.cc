// The FSDP baseline, the longest-sequence search, scaling and the sweep, on tiny specs (and the
// seeds' 128K case for the baseline's verdict).
#include "plan/baseline.h"

#include <gtest/gtest.h>

#include "plan/scale.h"
#include "spec/load_toml.h"
#include "testing/tiny_specs.h"

namespace pentamesh::plan {
namespace {

SearchOptions Options() {
  SearchOptions o;
  o.threads = 2;
  o.cost = testing::TestCostParams();
  return o;
}

TEST(Baseline, FsdpLayoutIsZero3OverAllGpus) {
  const spec::Layout l = FsdpLayout(64);
  EXPECT_EQ(l.dp, 64);
  EXPECT_EQ(l.gpus(), 64);
  EXPECT_EQ(l.zero, 3);
  EXPECT_EQ(l.tp * l.pp * l.cp * l.ep, 1);
}

TEST(Baseline, LongestSequenceIsTheLastThatFits) {
  const auto model = testing::PlannerDense();
  const auto cluster = testing::PlannerCluster(4, 2, 8);
  const auto train = testing::Train(2048, 8);
  const auto params = testing::TestCostParams();
  const spec::Layout layout = FsdpLayout(8);
  const int64_t cap = int64_t{1} << 22;
  const int64_t longest = LongestSequence(model, cluster, train, layout, params, cap);
  ASSERT_GT(longest, 0);
  ASSERT_LT(longest, cap);
  auto memory_at = [&](int64_t seq_len) {
    spec::ModelSpec m = model;
    m.max_seq_len = cap;
    spec::TrainSpec t = train;
    t.seq_len = seq_len;
    t.global_batch_tokens = seq_len * 8;
    const auto e = cost::EstimateLayout(m, cluster, t, layout, params, false);
    return e.memory.total - e.memory.capacity;
  };
  EXPECT_LE(memory_at(longest), 0);
  EXPECT_GT(memory_at(longest + 256), 0);
}

TEST(Baseline, BestBeatsFsdpOnTinyMoe) {
  const auto model = testing::PlannerMoe();
  const auto cluster = testing::PlannerCluster(4, 4, testing::kHbmGbMoe);
  const auto train = testing::Train(8192, 16);
  const auto r = Search(model, cluster, train, Options());
  ASSERT_TRUE(r.ok() && !r->top.empty());
  const auto b = CompareWithFsdp(model, cluster, train, r->top.front(), Options());
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->fsdp.layout.dp, 16);
  EXPECT_EQ(b->fsdp.layout.zero, 3);
  EXPECT_GE(b->best_max_seq_len, b->fsdp_max_seq_len);
  ASSERT_TRUE(b->fsdp.fits) << "FSDP runs this tiny case";
  EXPECT_FALSE(b->fsdp_priced_at_equal_work);
  EXPECT_GE(b->best.tokens_per_s, b->fsdp.tokens_per_s);
  EXPECT_NEAR(b->days_saved, b->fsdp.days - b->best.days, 1e-9);
  EXPECT_NEAR(b->usd_saved, b->fsdp.cost_usd - b->best.cost_usd, 1e-6);
}

// The seeds' FSDP cannot run the 128K batch at all: 128 sequences over 1,024 data-parallel ranks.
TEST(Baseline, SeedsFsdpCannotRun128K) {
  const auto model = spec::LoadModel("meridianfin-72b");
  const auto cluster = spec::LoadCluster("h100-sxm", 1024);
  const auto train = spec::LoadTrain("meridian-128k");
  ASSERT_TRUE(model.ok() && cluster.ok() && train.ok());
  const auto r = Search(*model, *cluster, *train, SearchOptions{});
  ASSERT_TRUE(r.ok() && !r->top.empty());
  const auto b = CompareWithFsdp(*model, *cluster, *train, r->top.front(), SearchOptions{});
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_FALSE(b->fsdp.fits);
  ASSERT_FALSE(b->fsdp.violations.empty());
  EXPECT_LT(b->fsdp_max_seq_len, train->seq_len);
  EXPECT_GE(b->best_max_seq_len, train->seq_len);
  // Its memory at 128K is shown (one sequence per rank) and is over capacity.
  EXPECT_GT(b->fsdp.memory.total, b->fsdp.memory.capacity);
  EXPECT_GT(b->fsdp.memory.activations, 0);
  ASSERT_TRUE(b->fsdp_runnable.has_value());
  EXPECT_LT(b->fsdp_runnable_seq_len, train->seq_len);
  EXPECT_TRUE(b->fsdp_priced_at_equal_work);
  EXPECT_NEAR(b->fsdp_days, b->best.days * b->best.mfu / b->fsdp_runnable->mfu, 1e-9);
  EXPECT_NEAR(b->days_saved, b->fsdp_days - b->best.days, 1e-9);
}

TEST(Scale, EfficiencyAndLimitingTerm) {
  const auto model = testing::PlannerDense();
  const auto cluster = testing::PlannerCluster(4, 1, 16);
  const auto train = testing::Train(4096, 32);
  const auto points = Scale(model, cluster, train, {4, 8, 16, 32}, Options());
  ASSERT_TRUE(points.ok()) << points.status().message();
  ASSERT_EQ(points->size(), 4u);
  ASSERT_TRUE((*points)[0].best.has_value());
  EXPECT_DOUBLE_EQ((*points)[0].efficiency, 1.0);
  EXPECT_EQ((*points)[0].limiting, nullptr);
  for (const auto& p : *points) {
    ASSERT_TRUE(p.best.has_value()) << p.gpus;
    EXPECT_EQ(p.best->layout.gpus(), p.gpus);
    EXPECT_GT(p.efficiency, 0);
    EXPECT_LE(p.efficiency, 1.0 + 1e-9) << "a fixed batch cannot scale super-linearly here";
  }
  ASSERT_NE(points->back().limiting, nullptr);
  // The terms' growths add up to the efficiency loss, so the largest is at least its share.
  EXPECT_GT(points->back().limiting_growth, 0);
  EXPECT_LE(points->back().limiting_growth, 1 / points->back().efficiency - 1 + 1e-9);
  // A GPU count the cluster cannot have is an error naming --gpus.
  const auto bad = Scale(model, cluster, train, {4, 6}, Options());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--gpus"), std::string::npos);
}

TEST(Sweep, GridOfBestLayouts) {
  spec::ModelSpec big = testing::PlannerDense();
  big.name = "tiny-dense-wide";
  big.hidden = 2048;
  big.ffn_hidden = 6144;
  const auto cluster = testing::PlannerCluster(4, 1, 16);
  const auto train = testing::Train(2048, 16);
  const auto s = Sweep({testing::PlannerDense(), big}, cluster, train, {1, 2, 4}, Options());
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->cells.size(), 6u);
  EXPECT_EQ(s->at(1, 2).model, "tiny-dense-wide");
  EXPECT_EQ(s->at(1, 2).nodes, 4);
  for (const auto& cell : s->cells) {
    if (cell.best) {
      EXPECT_EQ(cell.best->layout.gpus(), cell.nodes * 4);
    } else {
      EXPECT_FALSE(cell.why_not.empty());
    }
  }
}

TEST(ExplainGap, NamesTheTermsThatCostTime) {
  cost::Estimate best, other;
  best.time = {.compute = 1.0, .tp = 0.1, .bubble = 0.1, .step = 1.2};
  other.time = {.compute = 1.0, .tp = 0.1, .dp = 0.05, .bubble = 0.35, .step = 1.5};
  const std::string gap = ExplainGap(other, best);
  EXPECT_NE(gap.find("+25.0% step"), std::string::npos) << gap;
  EXPECT_LT(gap.find("bubble"), gap.find("dp")) << gap;
  other.time = best.time;
  other.memory.total = 2e9;
  EXPECT_NE(ExplainGap(other, best).find("same step time"), std::string::npos);
}

}  // namespace
}  // namespace pentamesh::plan

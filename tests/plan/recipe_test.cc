// plan::PlanRecipe against independent references: each part's best layout is plan::Search's on a
// train spec loaded from TOML with the part's values; a one-phase recipe is a plain plan; a switch
// costs cost::EstimateReshard's closed form; the recipe's MFU in the three conventions is the
// FLOPs written out by hand over the wall time.
#include "plan/recipe.h"

#include <gtest/gtest.h>

#include <string>

#include "cost/goodput.h"
#include "spec/load_toml.h"

namespace pentamesh::plan {
namespace {

constexpr double kDay = 86400;

struct Fixture {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  RecipeOptions options;
};

Fixture Llama8bOn32() {
  Fixture f;
  f.model = *spec::LoadModel("llama3-8b");
  f.cluster = *spec::LoadCluster("h100-sxm", 32);
  f.options.search.top_k = 5;
  f.options.search.space.mbs_max = 2;
  return f;
}

// 8K pre-training, then 32K with a ramp, like the presets but small.
const char* kRecipe = R"([recipe]
name = "small"
usd_per_gpu_hour = 2
[[recipe.phase]]
name = "8k"
tokens = 2e11
seq_len = 8192
global_batch_tokens = 4194304
[[recipe.phase]]
name = "32k"
tokens = 2e10
seq_len = 32768
global_batch_tokens = 4194304
batch_ramp = { start_tokens = 1048576, over_tokens = 5e9 }
rope = { kind = "llama3", factor = 4, low_freq_factor = 1, high_freq_factor = 4, original_max_positions = 8192 }
)";

// The same values written as [train] TOML, loaded by the ordinary train loader.
spec::TrainSpec TrainToml(int64_t seq_len, int64_t batch_tokens, double tokens) {
  const std::string text = "[train]\nseq_len = " + std::to_string(seq_len) +
                           "\nglobal_batch_tokens = " + std::to_string(batch_tokens) +
                           "\ntotal_tokens = " + std::to_string(tokens) +
                           "\nusd_per_gpu_hour = 2\n";
  auto t = spec::TrainFromTomlText(text, "t");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *t;
}

TEST(PlanRecipe, EachPartIsThePlainPlanOfItsTrainSpec) {
  const Fixture f = Llama8bOn32();
  auto recipe = spec::RecipeFromTomlText(kRecipe, "small");
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  auto plan = PlanRecipe(f.model, f.cluster, *recipe, f.options);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(plan->no_fit.empty()) << plan->no_fit[0];
  ASSERT_EQ(plan->parts.size(), 3u);
  // 8k; 32k/ramp at (1M + 4M) / 2 = 2.5M -> 80 x 32,768 = 2,621,440; 32k/steady.
  const spec::TrainSpec trains[] = {TrainToml(8192, 4194304, 2e11), TrainToml(32768, 2621440, 5e9),
                                    TrainToml(32768, 4194304, 1.5e10)};
  double days = 0;
  for (size_t i = 0; i < 3; ++i) {
    auto plain = Search(f.model, f.cluster, trains[i], f.options.search);
    ASSERT_TRUE(plain.ok());
    ASSERT_FALSE(plain->top.empty());
    const cost::Estimate& want = plain->top.front();
    const cost::Estimate& got = plan->parts[i].best;
    EXPECT_EQ(got.layout, want.layout) << plan->parts[i].part.name;
    EXPECT_DOUBLE_EQ(got.tokens_per_s, want.tokens_per_s);
    EXPECT_DOUBLE_EQ(got.days, want.days);
    EXPECT_DOUBLE_EQ(got.cost_usd, want.cost_usd);
    days += want.days;
  }
  // Switches: where consecutive parts' layouts differ, the closed form of EstimateReshard.
  int switches = 0;
  double switch_days = 0;
  for (size_t i = 1; i < 3; ++i) {
    const PartPlan& p = plan->parts[i];
    const PartPlan& prev = plan->parts[i - 1];
    if (p.best.layout == prev.best.layout) {
      EXPECT_FALSE(p.reshard_in.has_value());
      continue;
    }
    ASSERT_TRUE(p.reshard_in.has_value());
    ++switches;
    const double gpus = 32;
    const double write = (prev.best.memory.weights + prev.best.memory.optimizer) / 50e9 +
                         (prev.best.memory.weights + prev.best.memory.optimizer) * gpus / 2000e9;
    const double read = (p.best.memory.weights + p.best.memory.optimizer) * gpus / 2000e9;
    EXPECT_NEAR(p.reshard_in->seconds, write + 600 + read, 1e-9);
    switch_days += p.reshard_in->seconds / kDay;
  }
  EXPECT_EQ(plan->totals.switches, switches);
  EXPECT_NEAR(plan->totals.days, days + switch_days, 1e-12);
  EXPECT_NEAR(plan->totals.cost_usd, (days + switch_days) * 24 * 32 * 2, 1e-6);
  // The single layout fits every part and is no faster than the per-part bests without switches.
  ASSERT_TRUE(plan->single.has_value());
  EXPECT_GE(plan->single->totals.days, days * (1 - 1e-12));
  EXPECT_EQ(plan->single->totals.switches, 0);
  // Its days are the plain estimate of that layout on each part's train spec, summed.
  double single_days = 0;
  for (const spec::TrainSpec& t : trains) {
    const cost::Estimate e = cost::EstimateLayout(
        f.model, f.cluster, t, plan->single->parts[0].layout, f.options.search.cost);
    ASSERT_TRUE(e.fits);
    single_days += e.days;
  }
  EXPECT_NEAR(plan->single->totals.days, single_days, 1e-12);
}

TEST(PlanRecipe, OnePhaseRecipeIsThePlainPlan) {
  const Fixture f = Llama8bOn32();
  auto recipe = spec::RecipeFromTomlText(R"([recipe]
usd_per_gpu_hour = 2
[[recipe.phase]]
tokens = 1e11
seq_len = 8192
global_batch_tokens = 4194304
)",
                                         "one");
  ASSERT_TRUE(recipe.ok()) << recipe.status().message();
  auto plan = PlanRecipe(f.model, f.cluster, *recipe, f.options);
  ASSERT_TRUE(plan.ok());
  auto plain = Search(f.model, f.cluster, TrainToml(8192, 4194304, 1e11), f.options.search);
  ASSERT_TRUE(plain.ok());
  const cost::Estimate& want = plain->top.front();
  ASSERT_EQ(plan->parts.size(), 1u);
  EXPECT_EQ(plan->parts[0].best.layout, want.layout);
  EXPECT_EQ(plan->totals.switches, 0);
  EXPECT_DOUBLE_EQ(plan->totals.days, want.days);
  EXPECT_DOUBLE_EQ(plan->totals.cost_usd, want.cost_usd);
  EXPECT_NEAR(plan->totals.tokens_per_s, want.tokens_per_s, want.tokens_per_s * 1e-12);
  const cost::Goodput g = cost::EstimateGoodput(f.cluster, want, f.options.goodput);
  EXPECT_NEAR(plan->totals.days_with_failures, g.days, 1e-12);
  // MFU: the estimate's three conventions; 6N written out by hand from the counts.
  EXPECT_NEAR(plan->totals.mfu.full, want.mfu, 1e-12);
  EXPECT_NEAR(plan->totals.mfu.causal, want.mfu_causal, 1e-12);
  EXPECT_NEAR(plan->totals.mfu.six_n, want.mfu_6n, 1e-12);
  const double peak = f.cluster.peak_tflops * 1e12 * 32;
  EXPECT_NEAR(want.mfu_6n, 6 * cost::CountParams(f.model).active * want.tokens_per_s / peak, 1e-12);
  EXPECT_LT(want.mfu_causal, want.mfu);
  // The single layout is the same one.
  ASSERT_TRUE(plan->single.has_value());
  EXPECT_EQ(plan->single->parts[0].layout, want.layout);
  EXPECT_DOUBLE_EQ(plan->single->totals.days, want.days);
}

TEST(PlanRecipe, PartThatFitsNothingIsNamed) {
  Fixture f = Llama8bOn32();
  f.cluster = *spec::LoadCluster("h100-sxm", 1);
  auto recipe = spec::RecipeFromTomlText(R"([recipe]
[[recipe.phase]]
name = "huge"
tokens = 1e9
seq_len = 131072
global_batch_tokens = 131072
)",
                                         "r");
  ASSERT_TRUE(recipe.ok());
  auto plan = PlanRecipe(f.model, f.cluster, *recipe, f.options);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->no_fit.size(), 1u);
  EXPECT_EQ(plan->no_fit[0].rfind("huge: ", 0), 0u) << plan->no_fit[0];
}

}  // namespace
}  // namespace pentamesh::plan

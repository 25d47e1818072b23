// train/recipe_run.h's segments: configs/tiny-recipe.toml on configs/tiny-dense.toml cut into its
// ramp levels and phases, each with the phase's batch, sequence, layout and RoPE scaling in its
// own config (and TOML), one learning-rate schedule over the whole recipe, and a new data order
// where the sequence length changes; bad recipes named by phase and field.
#include "train/recipe_run.h"

#include <gtest/gtest.h>

#include <string>

#include "spec/load_toml.h"
#include "spec/recipe.h"

namespace pentamesh::train {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

RunConfig Tiny() {
  auto c = LoadRunConfig(std::string(PM_SOURCE_DIR) + "/configs/tiny-dense.toml",
                         {"run.host_profile=\"none\"", "optim.warmup_steps=3"});
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

spec::Recipe TinyRecipe(const std::string& edit_from = "", const std::string& edit_to = "") {
  auto text = spec::ReadFile(std::string(PM_SOURCE_DIR) + "/configs/tiny-recipe.toml");
  EXPECT_TRUE(text.ok());
  std::string t = *text;
  if (!edit_from.empty()) {
    EXPECT_NE(t.find(edit_from), std::string::npos) << edit_from;
    t.replace(t.find(edit_from), edit_from.size(), edit_to);
  }
  auto r = spec::RecipeFromTomlText(t, "tiny-recipe.toml");
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *r;
}

TEST(RecipeSegments, TinyRecipeRampsThenExtendsTheContextOnANewLayout) {
  auto segs = RecipeSegments(Tiny(), TinyRecipe(), std::nullopt);
  ASSERT_TRUE(segs.ok()) << segs.status().message();
  ASSERT_EQ(segs->size(), 4u);
  struct Want {
    const char* name;
    int64_t first, last, batch, seq, dp, cp, data_start;
  };
  // The ramp: 2,048 tokens over levels of 8 and 12 sequences of 32 (1,024 tokens each: 4 steps
  // and 1,024 / 384 = 2.67 -> 3); then 16 sequences for the other 4,096 tokens (8 steps); then
  // 6,144 tokens of 8 x 128 (6 steps), whose data order starts at step 15.
  const Want want[] = {{"short/ramp 8", 0, 4, 8, 32, 4, 1, 0},
                       {"short/ramp 12", 4, 7, 12, 32, 4, 1, 0},
                       {"short", 7, 15, 16, 32, 4, 1, 0},
                       {"long", 15, 21, 8, 128, 2, 2, 15}};
  for (size_t i = 0; i < 4; ++i) {
    const RecipeSegment& s = (*segs)[i];
    const RunConfig& c = s.config;
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.name, want[i].name);
    EXPECT_EQ(s.phase, i < 3 ? 0u : 1u);
    EXPECT_EQ(s.first_step, want[i].first);
    EXPECT_EQ(s.last_step, want[i].last);
    EXPECT_EQ(c.total_steps(), want[i].last);  // the run goes to the segment's last step
    EXPECT_EQ(c.schedule_steps(), 21);         // one learning-rate schedule over the recipe
    EXPECT_EQ(c.train.global_batch_seqs(), want[i].batch);
    EXPECT_EQ(c.train.seq_len, want[i].seq);
    EXPECT_EQ(c.run.layout.dp, want[i].dp);
    EXPECT_EQ(c.run.layout.cp, want[i].cp);
    EXPECT_EQ(c.run.data_start_step, want[i].data_start);
    EXPECT_EQ(c.train.precision, spec::Precision::kFp32);
    // The segment's TOML reads back to the same config: a checkpoint's saved config is the
    // phase's, RoPE scaling included.
    auto again = RunConfigFromToml(c.toml, "saved");
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(again->model.rope_scaling.kind, c.model.rope_scaling.kind);
    EXPECT_EQ(again->train.seq_len, c.train.seq_len);
    EXPECT_EQ(again->run.data_start_step, c.run.data_start_step);
  }
  EXPECT_EQ((*segs)[0].config.model.rope_scaling.kind, spec::RopeScalingKind::kNone);
  const spec::RopeScaling& rope = (*segs)[3].config.model.rope_scaling;
  EXPECT_EQ(rope.kind, spec::RopeScalingKind::kLlama3);
  EXPECT_EQ(rope.factor, 4);
  EXPECT_EQ(rope.original_max_positions, 32);
}

TEST(RecipeSegments, LayoutOverrideKeepsTheSteps) {
  spec::Layout one;
  auto segs = RecipeSegments(Tiny(), TinyRecipe(), one);
  ASSERT_TRUE(segs.ok()) << segs.status().message();
  ASSERT_EQ(segs->size(), 4u);  // the levels do not depend on the layout
  for (const RecipeSegment& s : *segs) EXPECT_EQ(s.config.run.layout.gpus(), 1) << s.name;
  EXPECT_EQ(segs->back().last_step, 21);
}

TEST(RecipeSegments, BadRecipesNamePhaseAndField) {
  // One sequence per level: 9 sequences do not split over dp=4.
  auto level = RecipeSegments(Tiny(), TinyRecipe("increment_tokens = 128", "increment_tokens = 32"),
                              std::nullopt);
  ASSERT_FALSE(level.ok());
  EXPECT_TRUE(Contains(level.status().message(),
                       "recipe.phase[1] (short): batch_ramp: the level of 9 sequences"))
      << level.status().message();
  auto longer = RecipeSegments(Tiny(), TinyRecipe("seq_len = 128", "seq_len = 256"), std::nullopt);
  ASSERT_FALSE(longer.ok());
  EXPECT_TRUE(Contains(longer.status().message(), "recipe.phase[2] (long)"))
      << longer.status().message();
  EXPECT_TRUE(
      Contains(longer.status().message(), "train.seq_len: 256 exceeds model.max_seq_len=128"))
      << longer.status().message();
  auto few = RecipeSegments(Tiny(), TinyRecipe("tokens = 6144  # 6 steps", "tokens = 100  #"),
                            std::nullopt);
  ASSERT_FALSE(few.ok());
  EXPECT_TRUE(
      Contains(few.status().message(),
               "recipe.phase[2] (long): tokens: 100 gives no step at global_batch_tokens=1024"))
      << few.status().message();
  auto huge = RecipeSegments(Tiny(), TinyRecipe("tokens = 6144  # 6 steps", "tokens = 1e18  #"),
                             std::nullopt);
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(
      Contains(huge.status().message(),
               "recipe.phase[2] (long): tokens: the recipe would run over 2147483647 steps"))
      << huge.status().message();
  auto fp8 = RecipeSegments(
      Tiny(),
      TinyRecipe("precision = \"fp32\"\nlayout = \"cp=2", "precision = \"fp8\"\nlayout = \"cp=2"),
      std::nullopt);
  ASSERT_FALSE(fp8.ok());
  EXPECT_TRUE(Contains(fp8.status().message(), "recipe.phase[2] (long)")) << fp8.status().message();
  EXPECT_TRUE(Contains(fp8.status().message(), "train.precision: fp8 is not implemented"))
      << fp8.status().message();
}

}  // namespace
}  // namespace pentamesh::train

// Recipes (spec/recipe.h): the presets, the batch ramp's arithmetic, and every bad input named by
// phase and key.
#include "spec/recipe.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "spec/load_toml.h"
#include "spec/rope_toml.h"

namespace pentamesh::spec {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A valid two-phase recipe; `extra` is appended to the second phase.
std::string TwoPhases(const std::string& extra = "") {
  return R"([recipe]
name = "t"
usd_per_gpu_hour = 2
[[recipe.phase]]
name = "short"
tokens = 1e9
seq_len = 4096
global_batch_tokens = 4194304
[[recipe.phase]]
name = "long"
tokens = 1e8
seq_len = 32768
global_batch_tokens = 4194304
)" + extra;
}

TEST(Recipe, PresetsLoadWithThePublishedValues) {
  for (const std::string& name : PresetNames("recipes")) {
    auto r = LoadRecipe(name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().message();
    EXPECT_EQ(r->name, name);
  }
  auto r = LoadRecipe("llama3-405b");
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Dubey et al. 2024 section 3.4: 4M tokens at 4,096 for 252M tokens, 8M at 8,192 to 2.87T,
  // then 16M; six context stages to 128K over ~800B tokens; 40M tokens of annealing at 128K;
  // 15.6T in all.
  ASSERT_EQ(r->phases.size(), 10u);
  EXPECT_EQ(r->phases[0].train.seq_len, 4096);
  EXPECT_EQ(r->phases[0].train.global_batch_tokens, 4 * 1048576);
  EXPECT_DOUBLE_EQ(r->phases[0].train.total_tokens, 252e6);
  EXPECT_EQ(r->phases[1].train.global_batch_tokens, 8 * 1048576);
  EXPECT_NEAR(r->phases[0].train.total_tokens + r->phases[1].train.total_tokens, 2.87e12, 1);
  EXPECT_EQ(r->phases[2].train.global_batch_tokens, 16 * 1048576);
  double long_context = 0;
  for (size_t i = 3; i < 10; ++i) long_context += r->phases[i].train.total_tokens;
  EXPECT_NEAR(long_context, 800e9, 0.01e9);
  EXPECT_EQ(r->phases[9].train.seq_len, 131072);
  EXPECT_DOUBLE_EQ(r->phases[9].train.total_tokens, 40e6);
  EXPECT_NEAR(r->total_tokens(), 15.6e12, 0.01e12);
  const RopeScaling& rope = r->phases[9].rope;
  EXPECT_EQ(rope.kind, RopeScalingKind::kLlama3);
  EXPECT_EQ(rope.factor, 8);
  EXPECT_EQ(rope.low_freq_factor, 1);
  EXPECT_EQ(rope.high_freq_factor, 4);
  EXPECT_EQ(rope.original_max_positions, 8192);
  auto m = LoadRecipe("meridianfin-4t");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_DOUBLE_EQ(m->total_tokens(), 4e12);
  EXPECT_EQ(m->phases.back().train.seq_len, 131072);
}

// A phase is a TrainSpec read by the [train] table's reader: the batch as sequences too, and each
// part carries the phase's precision and the recipe's price.
TEST(Recipe, PhaseIsReadAsATrainTable) {
  std::string text = TwoPhases();
  text.replace(text.rfind("global_batch_tokens = 4194304"), 29, "global_batch_seqs = 128");
  auto r = RecipeFromTomlText(text + "precision = \"fp8\"\n", "r.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const TrainSpec& t = r->phases[1].train;
  EXPECT_EQ(t.global_batch_tokens, 128 * 32768);
  EXPECT_EQ(t.precision, Precision::kFp8);
  EXPECT_EQ(t.name, "long");
  EXPECT_DOUBLE_EQ(t.total_tokens, 1e8);
  const std::vector<PhasePart> parts = PhaseParts(*r, 1);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].train.name, "t/long");
  EXPECT_EQ(parts[0].train.global_batch_tokens, 128 * 32768);
  EXPECT_EQ(parts[0].train.precision, Precision::kFp8);
  EXPECT_DOUBLE_EQ(parts[0].train.usd_per_gpu_hour, 2);
  // The same keys in a [train] table read to the same shape.
  auto train = TrainFromTomlText(
      "[train]\nseq_len = 32768\nglobal_batch_seqs = 128\nprecision = \"fp8\"\n"
      "total_tokens = 1e8\n",
      "t.toml");
  ASSERT_TRUE(train.ok()) << train.status().message();
  EXPECT_EQ(train->global_batch_tokens, t.global_batch_tokens);
  EXPECT_EQ(train->precision, t.precision);
}

TEST(Recipe, RampMeanBatchIsTheTokenWeightedMean) {
  // Linear in tokens from 4M to 16M: the mean over the ramp's tokens is 10M = 1,280 x 8,192.
  EXPECT_EQ(RampMeanBatchTokens(4 * 1048576, 16 * 1048576, 8192), 10 * 1048576);
  // (1 + 4) / 2 = 2.5 sequences: rounded to the nearest (llround: 3).
  EXPECT_EQ(RampMeanBatchTokens(1000, 4000, 1000), 3000);
  EXPECT_EQ(RampMeanBatchTokens(1000, 2000, 1000), 2000);  // 1.5 -> 2
  EXPECT_EQ(RampMeanBatchTokens(1000, 1000, 1000), 1000);
}

TEST(Recipe, RampedPhaseSplitsIntoRampAndSteadyParts) {
  auto r = RecipeFromTomlText(
      TwoPhases("batch_ramp = { start_tokens = 1048576, over_tokens = 2.5e7 }\n"), "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<PhasePart> first = PhaseParts(*r, 0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].train.global_batch_tokens, 4194304);
  EXPECT_EQ(first[0].train.total_tokens, 1e9);
  EXPECT_EQ(first[0].train.usd_per_gpu_hour, 2);
  const std::vector<PhasePart> parts = PhaseParts(*r, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "long/ramp");
  EXPECT_EQ(parts[0].train.total_tokens, 2.5e7);
  // (1M + 4M) / 2 = 2.5M = 80 sequences of 32,768.
  EXPECT_EQ(parts[0].train.global_batch_tokens, 80 * 32768);
  EXPECT_EQ(parts[1].name, "long/steady");
  EXPECT_EQ(parts[1].train.total_tokens, 1e8 - 2.5e7);
  EXPECT_EQ(parts[1].train.global_batch_tokens, 4194304);
  // A ramp over the whole phase leaves no steady part.
  auto whole = RecipeFromTomlText(
      TwoPhases("batch_ramp = { start_tokens = 1048576, over_tokens = 1e8 }\n"), "t");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(PhaseParts(*whole, 1).size(), 1u);
}

TEST(Recipe, RopeKinds) {
  auto r = RecipeFromTomlText(
      TwoPhases("rope = { kind = \"yarn\", factor = 4, original_max_positions = 32768 }\n"), "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->phases[1].rope.kind, RopeScalingKind::kYarn);
  EXPECT_EQ(r->phases[1].rope.beta_fast, 32);
  auto b = RecipeFromTomlText(TwoPhases("rope = { kind = \"base\", theta = 8e6 }\n"), "t");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->phases[1].rope.kind, RopeScalingKind::kBaseChange);
  EXPECT_EQ(b->phases[1].rope.theta, 8e6);
}

TEST(Recipe, EngineLayoutPerPhase) {
  auto r = RecipeFromTomlText(TwoPhases("layout = \"cp=2 dp=2\"\n"), "t");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->phases[0].layout.has_value());
  ASSERT_TRUE(r->phases[1].layout.has_value());
  EXPECT_EQ(r->phases[1].layout->cp, 2);
  EXPECT_EQ(r->phases[1].layout->dp, 2);
}

// A model's [model.rope_scaling] takes a phase's `rope` keys, and RopeScalingTable writes back
// what the reader reads (train --recipe puts each phase's scaling into the run's TOML that way).
TEST(Recipe, ModelRopeScalingReadsWhatRopeScalingTableWrites) {
  const std::string model = R"([model]
layers = 2
hidden = 64
heads = 4
ffn_hidden = 128
vocab = 256
max_seq_len = 128
)";
  RopeScaling want;
  want.kind = RopeScalingKind::kLlama3;
  want.factor = 4;
  want.low_freq_factor = 1;
  want.high_freq_factor = 4;
  want.original_max_positions = 32;
  RopeScaling yarn;
  yarn.kind = RopeScalingKind::kYarn;
  yarn.factor = 8;
  yarn.original_max_positions = 4096;
  yarn.beta_fast = 16;
  RopeScaling base;
  base.kind = RopeScalingKind::kBaseChange;
  base.theta = 8e6;
  for (const RopeScaling& rope : {want, yarn, base}) {
    toml::table t;
    t.insert("rope_scaling", RopeScalingTable(rope));
    std::ostringstream text;
    text << t;
    // The table under [model] as a sub-table.
    std::string sub = text.str();
    sub.replace(sub.find("[rope_scaling]"), 14, "[model.rope_scaling]");
    auto m = ModelFromTomlText(model + sub, "m.toml");
    ASSERT_TRUE(m.ok()) << m.status().message() << "\n" << sub;
    EXPECT_EQ(m->rope_scaling.kind, rope.kind) << sub;
    EXPECT_EQ(m->rope_scaling.theta, rope.theta) << sub;
    EXPECT_EQ(m->rope_scaling.factor, rope.factor) << sub;
    EXPECT_EQ(m->rope_scaling.low_freq_factor, rope.low_freq_factor) << sub;
    EXPECT_EQ(m->rope_scaling.high_freq_factor, rope.high_freq_factor) << sub;
    EXPECT_EQ(m->rope_scaling.original_max_positions, rope.original_max_positions) << sub;
    EXPECT_EQ(m->rope_scaling.beta_fast, rope.beta_fast) << sub;
  }
  auto bad =
      ModelFromTomlText(model + "[model.rope_scaling]\nkind = \"llama3\"\nfactor = 2\n", "m.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "model.rope_scaling.low_freq_factor: missing"))
      << bad.status().message();
}

TEST(Recipe, BadInputNamesPhaseAndKey) {
  struct Case {
    std::string extra;
    std::string expected;
  };
  const Case cases[] = {
      {"seq_len = 0\n", ""},  // duplicate key: a parse error, checked below
      {"batch_ramp = { start_tokens = 4194304, over_tokens = 1e6 }\n",
       "recipe.phase[2].batch_ramp.start_tokens: 4194304 must be below global_batch_tokens"},
      {"batch_ramp = { start_tokens = 1000, over_tokens = 1e6 }\n",
       "recipe.phase[2].batch_ramp.start_tokens: 1000 is not a multiple of seq_len=32768"},
      {"batch_ramp = { start_tokens = 1048576, over_tokens = 1e9 }\n",
       "recipe.phase[2].batch_ramp.over_tokens: 1e+09 exceeds the phase's tokens=1e+08"},
      {"batch_ramp = { start_tokens = 1048576 }\n",
       "recipe.phase[2].batch_ramp.over_tokens: missing (required)"},
      {"rope = { kind = \"ntk\" }\n",
       "recipe.phase[2].rope.kind: 'ntk' is not one of none, llama3, yarn, base"},
      {"rope = { kind = \"llama3\", factor = 8, low_freq_factor = 4, high_freq_factor = 1, "
       "original_max_positions = 8192 }\n",
       "recipe.phase[2].rope.high_freq_factor: 1 must exceed low_freq_factor=4"},
      {"rope = { kind = \"llama3\", factor = 8 }\n",
       "recipe.phase[2].rope.low_freq_factor: missing (required)"},
      {"rope = { kind = \"yarn\", factor = 0.5, original_max_positions = 8 }\n",
       "recipe.phase[2].rope.factor: 0.5 must be >= 1"},
      {"rope = { kind = \"base\" }\n", "recipe.phase[2].rope.theta: missing (required"},
      {"rope = { kind = \"none\", factor = 2 }\n", "recipe.phase[2].rope.factor: unknown key"},
      {"precision = \"fp16\"\n", "recipe.phase[2].precision: 'fp16' is not one of"},
      {"lr = 3e-4\n", "recipe.phase[2].lr: unknown key"},
      {"layout = \"dp=2 tp=\"\n", "recipe.phase[2].layout: "},
      {"batch_ramp = { start_tokens = 1048576, over_tokens = 1e6, increment_tokens = 1000 }\n",
       "recipe.phase[2].batch_ramp.increment_tokens: 1000 is not a multiple of seq_len=32768"},
      // A phase's shape is read as [train]'s (spec::ReadTrainShape): one of the two batch keys.
      {"global_batch_seqs = 128\n",
       "recipe.phase[2].global_batch_tokens: give exactly one of global_batch_tokens, "
       "global_batch_seqs"},
  };
  for (const Case& c : cases) {
    auto r = RecipeFromTomlText(TwoPhases(c.extra), "r.toml");
    ASSERT_FALSE(r.ok()) << c.extra;
    if (!c.expected.empty()) {
      EXPECT_TRUE(Contains(r.status().message(), c.expected)) << r.status().message();
    }
  }
  auto missing = RecipeFromTomlText(R"([recipe]
[[recipe.phase]]
seq_len = 4096
global_batch_tokens = 8192
[[recipe.phase]]
tokens = 1e6
seq_len = 4096
global_batch_tokens = 6000
)",
                                    "r.toml");
  ASSERT_FALSE(missing.ok());
  const std::string& msg = missing.status().message();
  EXPECT_TRUE(Contains(msg, "recipe.phase[1].tokens: missing (required)")) << msg;
  EXPECT_TRUE(
      Contains(msg, "recipe.phase[2].global_batch_tokens: 6000 is not a multiple of seq_len=4096"))
      << msg;
  auto none = RecipeFromTomlText("[recipe]\nname = \"x\"\n", "r.toml");
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Contains(none.status().message(), "recipe.phase: missing (required)"));
  auto no_table = RecipeFromTomlText("[train]\n", "r.toml");
  ASSERT_FALSE(no_table.ok());
  EXPECT_TRUE(Contains(no_table.status().message(), "r.toml: has no [recipe] table"));
  auto unknown = LoadRecipe("no-such-recipe");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(Contains(unknown.status().message(), "unknown recipe preset 'no-such-recipe'"))
      << unknown.status().message();
}

}  // namespace
}  // namespace pentamesh::spec

// Resume exactness on the real training loop (train::RunTraining, the loop of `pentamesh train`,
// and Trainer steps driven by hand): 2k steps straight vs k steps, checkpoint (written
// asynchronously while a step runs), a fresh Trainer resumed with "auto", k more steps: the
// losses and grad norms are bitwise identical, in fp32 and bf16, dense and MoE. Also the
// non-finite guard: injected NaN gradients skip steps without touching the weights.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "data/fixtures.h"
#include "testing/run_toml.h"
#include "train/checkpoint_state.h"
#include "train/run_config.h"
#include "train/run_loop.h"

namespace pentamesh::ckpt {
namespace {
using train::RestoreTrainer;
using train::TrainerSnapshot;

std::string RunToml(const std::string& dataset, const std::string& precision,
                    const std::string& extra_model) {
  return testing::RunTomlText(
      {.model_keys = extra_model, .precision = precision, .dataset = dataset});
}

std::unique_ptr<train::Trainer> MakeTrainer(const std::string& toml,
                                            const std::vector<std::string>& sets = {}) {
  auto c = train::RunConfigFromToml(toml, "test.toml", sets);
  EXPECT_TRUE(c.ok()) << c.status().message();
  auto t = train::Trainer::Create(*c);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(*t);
}

void ExpectResumeExact(const std::string& precision, const std::string& extra_model) {
  const std::string toml = RunToml(data::testing::Corpus().dataset, precision, extra_model);
  const int k = 4;
  std::vector<double> straight, resumed;
  auto a = MakeTrainer(toml);
  for (int i = 0; i < 2 * k; ++i) {
    const train::StepStats s = a->Step();
    straight.push_back(s.loss);
    straight.push_back(s.grad_norm);
  }
  const std::string root = data::testing::MakeTempDir("ckpt_resume");
  {
    auto b = MakeTrainer(toml);
    AsyncSaver saver({.root = root, .keep = 2, .env = nullptr, .all_ok = {}}, /*async=*/true);
    for (int i = 0; i < k; ++i) {
      const train::StepStats s = b->Step();
      resumed.push_back(s.loss);
      resumed.push_back(s.grad_norm);
      ASSERT_TRUE(saver.Save(TrainerSnapshot(*b)).ok());  // written while the next step runs
    }
    b->Step();  // a step after the last checkpoint: lost by the "crash", redone after resume
    ASSERT_TRUE(saver.Wait().ok());
  }
  auto c = MakeTrainer(toml);
  auto ck = ResolveResume("auto", root, [](const std::string& m) { ADD_FAILURE() << m; });
  ASSERT_TRUE(ck.ok() && ck->has_value()) << ck.status().message();
  ASSERT_EQ((*ck)->step(), k);
  ASSERT_TRUE(RestoreTrainer(**ck, *c).ok());
  EXPECT_EQ(c->step(), k);
  for (int i = 0; i < k; ++i) {
    const train::StepStats s = c->Step();
    resumed.push_back(s.loss);
    resumed.push_back(s.grad_norm);
  }
  ASSERT_EQ(straight.size(), resumed.size());
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(std::memcmp(&straight[i], &resumed[i], sizeof(double)), 0)
        << i << ": " << straight[i] << " vs " << resumed[i];
}

TEST(Resume, BitwiseFp32) { ExpectResumeExact("fp32", ""); }
TEST(Resume, BitwiseBf16) { ExpectResumeExact("bf16", ""); }
TEST(Resume, BitwiseMoeBf16) {
  ExpectResumeExact("bf16", "[model.moe]\nexperts = 4\ntop_k = 2\nexpert_ffn_hidden = 32\n");
}

TEST(Resume, RejectsADifferentSeed) {
  const std::string toml = RunToml(data::testing::Corpus().dataset, "fp32", "");
  const std::string root = data::testing::MakeTempDir("ckpt_seed");
  auto a = MakeTrainer(toml);
  a->Step();
  ASSERT_TRUE(
      SaveCheckpoint({.root = root, .keep = 3, .env = nullptr, .all_ok = {}}, TrainerSnapshot(*a))
          .ok());
  auto b = MakeTrainer(toml, {"run.seed=8"});
  auto ck = ResolveResume(root, "", {});
  ASSERT_TRUE(ck.ok() && ck->has_value());
  const core::Status st = RestoreTrainer(**ck, *b);
  EXPECT_NE(st.message().find("run.seed"), std::string::npos) << st.message();
}

TEST(NonFinite, InjectedNanSkipsStepsAndKeepsWeights) {
  const std::string toml = RunToml(data::testing::Corpus().dataset, "fp32", "");
  auto t = MakeTrainer(toml, {"run.debug_nan_step=2", "run.debug_nan_count=2"});
  t->Step();
  const float before = t->params().master(0).f32()[0];
  const train::StepStats s2 = t->Step(), s3 = t->Step();
  EXPECT_TRUE(s2.skipped);
  EXPECT_TRUE(s3.skipped);
  EXPECT_EQ(s3.nonfinite_in_row, 2);
  EXPECT_EQ(t->step(), 1);
  EXPECT_EQ(t->params().master(0).f32()[0], before);
  const train::StepStats s4 = t->Step();
  EXPECT_FALSE(s4.skipped);
  EXPECT_EQ(s4.nonfinite_in_row, 0);
  EXPECT_EQ(t->step(), 2);
  EXPECT_EQ(t->nonfinite_total(), 2);
}

// A checkpoint whose weights hold a NaN (written by hand: training never saves one) is refused on
// load, naming the tensor, instead of surfacing later as a diverged step.
TEST(NonFinite, CheckpointWithNanWeightIsRefused) {
  const std::string toml = RunToml(data::testing::Corpus().dataset, "fp32", "");
  auto a = MakeTrainer(toml);
  a->Step();
  a->params().master(0).f32()[3] = std::nanf("");
  const std::string root = data::testing::MakeTempDir("ckpt_nan_weight");
  {
    AsyncSaver saver({.root = root, .keep = 1, .env = nullptr, .all_ok = {}}, /*async=*/false);
    ASSERT_TRUE(saver.Save(TrainerSnapshot(*a)).ok());
    ASSERT_TRUE(saver.Wait().ok());
  }
  auto ck = ResolveResume("auto", root, [](const std::string& m) { ADD_FAILURE() << m; });
  ASSERT_TRUE(ck.ok() && ck->has_value()) << ck.status().message();
  auto b = MakeTrainer(toml);
  const core::Status st = RestoreTrainer(**ck, *b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor " + b->params().info(0).name + ": element 3 of this rank's"),
            std::string::npos)
      << st.message();
}

// What RunTraining reports, kept: every good step's loss, every warning.
struct Recorder final : train::RunObserver {
  std::vector<double> losses;
  std::vector<std::string> warnings;
  void OnWarning(const std::string& m) override { warnings.push_back(m); }
  void OnStep(const train::StepStats& s, int64_t, double, bool) override {
    losses.push_back(s.loss);
  }
};

// The run loop saves every ckpt.interval steps; a run resumed (by path) from the middle
// checkpoint redoes the last steps bitwise.
TEST(RunLoop, ResumedFromAMiddleCheckpointRedoesTheSameSteps) {
  const std::string root = data::testing::MakeTempDir("run_loop_resume");
  const std::string toml = RunToml(data::testing::Corpus().dataset, "fp32", "");
  const std::vector<std::string> sets = {"run.steps=6", "ckpt.interval=3",
                                         "ckpt.dir=\"" + root + "\"", "run.eval_every=0"};
  Recorder first, second;
  auto a = MakeTrainer(toml, sets);
  auto done = train::RunTraining(*a, {}, &first);
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->steps, 6);
  ASSERT_EQ(first.losses.size(), 6u);
  EXPECT_TRUE(first.warnings.empty());
  auto b = MakeTrainer(toml, sets);
  auto redone = train::RunTraining(
      *b, {.resume = root + "/" + StepDirName(3), .trace = "", .world = nullptr}, &second);
  ASSERT_TRUE(redone.ok()) << redone.status().message();
  EXPECT_EQ(redone->steps, 3);
  ASSERT_EQ(second.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(second.losses[i], first.losses[i + 3]) << i;
  EXPECT_EQ(b->step(), 6);
}

// Non-finite steps beyond run.max_nonfinite_in_row end the loop with the divergence error, which
// names the last checkpoint saved before it.
TEST(RunLoop, DivergenceNamesTheLastGoodCheckpoint) {
  const std::string root = data::testing::MakeTempDir("run_loop_diverge");
  const std::string toml = RunToml(data::testing::Corpus().dataset, "fp32", "");
  Recorder rec;
  auto t = MakeTrainer(
      toml, {"run.steps=8", "ckpt.interval=2", "ckpt.dir=\"" + root + "\"", "ckpt.async=false",
             "run.debug_nan_step=4", "run.debug_nan_count=9", "run.max_nonfinite_in_row=2"});
  auto run = train::RunTraining(*t, {}, &rec);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("training diverged: 3 non-finite steps in a row"),
            std::string::npos)
      << run.status().message();
  EXPECT_NE(
      run.status().message().find("The last good checkpoint is " + root + "/" + StepDirName(2)),
      std::string::npos)
      << run.status().message();
  EXPECT_EQ(rec.losses.size(), 3u);
  EXPECT_EQ(rec.warnings.size(), 3u);
}

}  // namespace
}  // namespace pentamesh::ckpt

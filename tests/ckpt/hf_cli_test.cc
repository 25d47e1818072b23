// `pentamesh export --hf` and `pentamesh import --hf` on the real binary: train a tiny dense, a
// tiny MoE (Qwen2-MoE form) and a tiny Mixtral-form model (router topk_renorm) for a few steps,
// export the checkpoint with its tokenizer, import it into a new checkpoint, and find every fp32
// weight bitwise equal to the trained checkpoint's (Adam state starts fresh); `train --resume`
// continues from the imported weights. Refusals name the field.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "testing/run_toml.h"

namespace pentamesh::ckpt {
namespace {

namespace fs = std::filesystem;

using testing::CliRun;
using testing::Pentamesh;

enum class Kind { kDense, kMoe, kMixtral };

std::string WriteRun(const std::string& tag, Kind kind) {
  const std::string dir = data::testing::MakeTempDir(tag);
  const std::string moe_table = kind == Kind::kMoe       ? R"(
[model.moe]
experts = 4
top_k = 2
expert_ffn_hidden = 32
first_dense_layers = 1
shared_experts = 1
capacity_factor = 0
)"
                                : kind == Kind::kMixtral ? R"(
[model.moe]
experts = 4
top_k = 2
expert_ffn_hidden = 32
capacity_factor = 0
router = "topk_renorm"
)"
                                                         : "";
  std::ofstream(dir + "/run.toml") << testing::RunTomlText(
      {.model_keys = moe_table,
       .total_tokens = 512,
       .optim = "lr = 1e-2\nwarmup_steps = 1",
       .dataset = data::testing::Corpus().dataset,
       .layout = "",
       .run_keys = fmt::format("eval_every = 0\neval_batches = 1\nout_dir = \"{}/out\"", dir),
       .tables = fmt::format("[ckpt]\ndir = \"{}/ckpt\"\nasync = false", dir)});
  return dir;
}

// The loss of the first line of <out_dir>/metrics.jsonl.
double FirstLoss(const std::string& out_dir) {
  return testing::ReadMetrics(out_dir).at(0).at("loss").get<double>();
}

void ExportImportContinue(Kind kind) {
  const char* arch[] = {"LlamaForCausalLM", "Qwen2MoeForCausalLM", "MixtralForCausalLM"};
  const char* tag[] = {"hf_cli_dense", "hf_cli_moe", "hf_cli_mixtral"};
  const std::string dir = WriteRun(tag[static_cast<int>(kind)], kind);
  const std::string config = dir + "/run.toml";
  const CliRun trained = Pentamesh("train --config " + config);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const double fresh_first_loss = FirstLoss(dir + "/out");

  const CliRun exported = Pentamesh(fmt::format("export --hf {}/hf --config {}", dir, config));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.out.find(arch[static_cast<int>(kind)]), std::string::npos) << exported.out;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model",
                        "tokenizer_config.json", "generation_config.json"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / "hf" / f)) << f;

  const CliRun imported =
      Pentamesh(fmt::format("import --hf {}/hf --out {}/imported --config {}", dir, dir, config));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;

  auto a = Checkpoint::Open(dir + "/ckpt/step-00000004");
  auto b = Checkpoint::Open(dir + "/imported/step-00000000");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  int compared = 0;
  for (const auto& [name, t] : a->manifest()["tensors"].items()) {
    const std::vector<int64_t> shape = t["shape"];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> x(static_cast<size_t>(n)), y(x.size());
    const std::vector<int64_t> zero(shape.size(), 0);
    ASSERT_TRUE(a->ReadRegion(name, shape, zero, shape, x.data()).ok()) << name;
    ASSERT_TRUE(b->ReadRegion(name, shape, zero, shape, y.data()).ok()) << name;
    if (name.ends_with(".adam_m") || name.ends_with(".adam_v")) {
      EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; })) << name;
      continue;
    }
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << name;
    ++compared;
  }
  EXPECT_GT(compared, 10);

  // Training continues from the imported weights: its first loss is the trained model's, below
  // the fresh run's first loss.
  const CliRun resumed = Pentamesh(fmt::format(
      "train --config {} --resume {}/imported --set run.steps=1 --set ckpt.dir=\"{}/ckpt2\" "
      "--set run.out_dir=\"{}/out2\"",
      config, dir, dir, dir));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  std::printf("%s%s%s", exported.out.c_str(), imported.out.c_str(), resumed.out.c_str());
  EXPECT_NE(resumed.out.find("resumed from " + dir + "/imported/step-00000000"), std::string::npos)
      << resumed.out;
  EXPECT_LT(FirstLoss(dir + "/out2"), fresh_first_loss - 0.05);

  // A run config whose [model] differs is refused, naming the field; so is a used --out.
  const CliRun wrong =
      Pentamesh(fmt::format("import --hf {}/hf --out {}/other --config {} --set "
                            "model.rope_theta=500000.0",
                            dir, dir, config));
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("model.rope_theta"), std::string::npos) << wrong.err;
  if (kind == Kind::kMixtral) {
    const CliRun router =
        Pentamesh(fmt::format("import --hf {}/hf --out {}/other --config {} --set "
                              "model.moe.router=\"softmax_topk\"",
                              dir, dir, config));
    EXPECT_EQ(router.exit_code, 2) << router.err;
    EXPECT_NE(router.err.find("model.moe.router: run config softmax_topk"), std::string::npos)
        << router.err;
  }
  const CliRun again =
      Pentamesh(fmt::format("import --hf {}/hf --out {}/imported --config {}", dir, dir, config));
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("already holds checkpoints"), std::string::npos) << again.err;
}

// `train` refuses a model whose attention the engine does not implement (exit 2, the field named).
TEST(HfCli, TrainRefusesAttentionVariants) {
  const std::string dir = WriteRun("hf_cli_attn", Kind::kDense);
  const CliRun window =
      Pentamesh("train --config " + dir + "/run.toml --set model.sliding_window=8");
  EXPECT_EQ(window.exit_code, 2) << window.err;
  EXPECT_NE(window.err.find("model.sliding_window"), std::string::npos) << window.err;
  const CliRun mla =
      Pentamesh("train --config " + dir +
                "/run.toml --set model.kv_heads=4 --set model.mla.kv_lora_rank=8 --set "
                "model.mla.qk_nope_head_dim=4 --set model.mla.qk_rope_head_dim=4 "
                "--set model.mla.v_head_dim=4");
  EXPECT_EQ(mla.exit_code, 2) << mla.err;
  EXPECT_NE(mla.err.find("model.mla"), std::string::npos) << mla.err;
}

TEST(HfCli, DenseExportImportContinues) { ExportImportContinue(Kind::kDense); }

TEST(HfCli, MoeExportImportContinues) { ExportImportContinue(Kind::kMoe); }

TEST(HfCli, MixtralExportImportContinues) { ExportImportContinue(Kind::kMixtral); }

TEST(HfCli, ExportFromCheckpointPathWithoutTokenizer) {
  const std::string dir = WriteRun("hf_cli_path", Kind::kDense);
  ASSERT_EQ(Pentamesh("train --config " + dir + "/run.toml --set run.steps=1").exit_code, 0);
  const CliRun r =
      Pentamesh(fmt::format("export --hf {}/hf --checkpoint {}/ckpt --no-tokenizer "
                            "--max-shard-mb 1",
                            dir, dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir + "/hf/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/hf/tokenizer.model"));
  const CliRun missing =
      Pentamesh(fmt::format("export --hf {}/hf2 --checkpoint {}/nothing", dir, dir));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("nothing"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace pentamesh::ckpt

// Failure injection "no load-balancing loss" (docs/engine.md, "Failure injections"): a small MoE
// (2 layers, hidden 32, 8 experts top-2, dropless) on the finance corpus tokenized at vocab 4096
// (built from the corpus by the first run, about 15 s), 40 steps with optim.aux_loss_coef = 0.01
// and = 0. Without the loss the expert load is more imbalanced late in the run
// (expert_load_imbalance), the largest expert's share is higher and collapse is flagged on more
// steps (summary.json, train::RunOutcome). On the vocab-512 test slice the two runs do not
// separate in 40 steps, hence the real corpus.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "testing/run_toml.h"

namespace pentamesh::train {
namespace {

TEST(NoAuxLoss, ExpertLoadMoreImbalancedWithoutTheLoss) {
  const std::string data = testing::MakeTempDir("inject_moe_data") + "/finance-4096";
  auto train = [&](const std::string& coef) {
    const std::string dir = testing::MakeTempDir("inject_moe");
    testing::RunToml run{
        .name = "moe",
        .vocab = 4096,
        .model_keys =
            "[model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn_hidden = 32\ncapacity_factor = 0\n",
        .global_batch_seqs = 8,
        .total_tokens = 40 * 8 * 32,
        .optim =
            fmt::format("lr = 1e-2\nmin_lr = 1e-3\nwarmup_steps = 2\naux_loss_coef = {}", coef),
        .dataset = data,
        .layout = "mbs=2",
        .run_keys = fmt::format("eval_every = 0\neval_batches = 1\nout_dir = \"{}/out\"", dir)};
    std::ofstream(dir + "/run.toml") << testing::RunTomlText(run);
    const testing::CliRun r = testing::Pentamesh(fmt::format(
        "train --config {}/run.toml --set 'data.corpus=\"{}\"'", dir, data::testing::CorpusPath()));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return nlohmann::json::parse(testing::ReadFile(dir + "/out/summary.json")).at("moe");
  };
  const nlohmann::json on = train("0.01"), off = train("0");
  const std::string both = "aux on " + on.dump() + "\naux off " + off.dump();
  std::printf("%s\n", both.c_str());
  EXPECT_GT(off.at("imbalance_late").get<double>(), 1.2 * on.at("imbalance_late").get<double>())
      << both;
  EXPECT_GT(off.at("max_expert_share_last").get<double>(),
            on.at("max_expert_share_last").get<double>())
      << both;
  EXPECT_GT(off.at("collapse_steps").get<int64_t>(), on.at("collapse_steps").get<int64_t>())
      << both;
}

}  // namespace
}  // namespace pentamesh::train

// Goodput in `pentamesh plan` and `estimate`, end to end on the real binary: Llama 3 405B on
// 16,384 H100s with Llama 3's failure rates against the closed form docs/COST_MODEL.md works by
// hand ("Goodput: Llama 3 405B by hand"), recomputed here from the documented inputs; --rank
// goodput's order; the defaults said in JSON; bad flags exit 2 naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "testing/cli_run.h"

namespace {

using pentamesh::testing::CliRun;
using pentamesh::testing::Pentamesh;

const std::string kPlan =
    "plan --model llama3-405b --cluster h100-sxm --gpus 16384 --train llama3-405b-8k ";

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(GoodputCli, Llama3405bMatchesTheClosedFormWorkedInDocs) {
  const CliRun r = Pentamesh(kPlan + "--top 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& best = j["top"][0];
  const auto& g = best["goodput"];
  // The documented inputs (docs/COST_MODEL.md): Table 5 of the Llama 3 paper, 419 interruptions in
  // 54 days on 16,384 GPUs in 2,048 nodes of 8; Tectonic's 2 TB/s; 50 GB/s device-to-host;
  // 10 minutes to restart; async checkpoints of weights + optimizer state per rank.
  const double gpus = 16384, per_day = 419.0 / 54.0, write_bps = 2000e9, read_bps = 2000e9;
  const double copy_bps = 50e9, restart_s = 600;
  const double state =
      best["memory"]["weights"].get<double>() + best["memory"]["optimizer"].get<double>();
  const double days = best["days"].get<double>();
  const double copy_s = state / copy_bps;                    // the stall
  const double write_s = copy_s + gpus * state / write_bps;  // until durable
  const double read_s = gpus * state / read_bps;
  const double mtbf_s = 86400 / per_day;
  const double interval_s = std::max(std::sqrt(2 * copy_s * mtbf_s), write_s);
  const double lost_s = interval_s / 2 + write_s + restart_s + read_s;
  const double goodput = 1 - copy_s / interval_s - lost_s / mtbf_s;
  const double days_lost = days / goodput - days;
  EXPECT_NEAR(g["failures_per_day"].get<double>(), per_day, 1e-12);
  EXPECT_NEAR(g["interval_s"].get<double>(), interval_s, 1e-9 * interval_s);
  EXPECT_NEAR(g["lost_per_failure_s"].get<double>(), lost_s, 1e-9 * lost_s);
  EXPECT_NEAR(g["goodput"].get<double>(), goodput, 1e-12);
  EXPECT_NEAR(g["days_lost"].get<double>(), days_lost, 1e-9 * days_lost);
  // The numbers docs/COST_MODEL.md works by hand, to the digits it prints.
  EXPECT_NEAR(state / 1e9, 13.05, 0.005);
  EXPECT_NEAR(write_s, 107.17, 0.005);
  EXPECT_NEAR(lost_s, 867.67, 0.005);
  EXPECT_NEAR(goodput, 0.91964, 0.000005);
  EXPECT_NEAR(days, 61.01, 0.005);
  EXPECT_NEAR(days_lost, 5.33, 0.005);
  // With no flag every input is a default, and the JSON says so.
  EXPECT_EQ(j["goodput_inputs"]["defaults"].size(), 6u);
  EXPECT_EQ(j["goodput_inputs"]["checkpoint_mode"], "async");
}

TEST(GoodputCli, RankGoodputOrdersByEffectiveThroughput) {
  // On a file system half as fast as Tectonic's the checkpoint's size weighs enough that the two
  // rankings part (at Tectonic's 2 TB/s they agree to 0.03%: docs/COST_MODEL.md).
  const std::string slow_fs = "--storage-write-gbps 1000 --storage-read-gbps 1000 ";
  const CliRun by_goodput = Pentamesh(kPlan + slow_fs + "--top 5 --rank goodput --json");
  ASSERT_EQ(by_goodput.exit_code, 0) << by_goodput.err;
  const auto top = nlohmann::json::parse(by_goodput.out)["top"];
  ASSERT_EQ(top.size(), 5u);
  auto effective = [](const nlohmann::json& e) {
    return e["tokens_per_s"].get<double>() * e["goodput"]["goodput"].get<double>();
  };
  for (size_t i = 1; i < top.size(); ++i) EXPECT_GE(effective(top[i - 1]), effective(top[i]));
  // Throughput's best checkpoints 13 GB a rank; goodput's best holds less state and wins after
  // failures although its step is slower.
  const CliRun by_speed = Pentamesh(kPlan + slow_fs + "--top 1 --json");
  ASSERT_EQ(by_speed.exit_code, 0) << by_speed.err;
  const auto fastest = nlohmann::json::parse(by_speed.out)["top"][0];
  EXPECT_NE(fastest["layout"]["text"], top[0]["layout"]["text"]);
  EXPECT_GT(fastest["tokens_per_s"].get<double>(), top[0]["tokens_per_s"].get<double>());
  EXPECT_GT(effective(top[0]), effective(fastest));
}

TEST(GoodputCli, EstimateTextAndGivenInputs) {
  const CliRun r = Pentamesh(
      "estimate --model llama3-8b --cluster h100-sxm --gpus 64 --train pretrain-4k --layout "
      "\"dp=64 zero=1 mbs=1\" --failures-per-node-day hardware=0.01,network=0.005 --restart-s 120 "
      "--ckpt-mode memory --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& in = j["goodput"]["inputs"];
  EXPECT_EQ(in["checkpoint_mode"], "memory");
  EXPECT_EQ(in["failures_per_gpu_day"]["hardware"], 0.0);  // a rate flag replaces the defaults
  EXPECT_EQ(in["failures_per_node_day"]["network"], 0.005);
  const auto defaults = in["defaults"].get<std::vector<std::string>>();
  EXPECT_EQ(defaults, (std::vector<std::string>{"storage_write_gbps", "storage_read_gbps",
                                                "host_copy_gbps"}));
  EXPECT_NEAR(j["goodput"]["failures_per_day"].get<double>(), 8 * 0.015, 1e-12);
  const CliRun text = Pentamesh(
      "estimate --model llama3-8b --cluster h100-sxm --gpus 64 --train pretrain-4k --layout "
      "\"dp=64 zero=1 mbs=1\"");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Has(text.out, "failures and checkpoints, async checkpoints")) << text.out;
  EXPECT_TRUE(Has(text.out, "with failures")) << text.out;
}

TEST(GoodputCli, BadInputExits2NamingTheFlag) {
  const std::string estimate =
      "estimate --model llama3-8b --cluster h100-sxm --gpus 64 --train pretrain-4k --layout "
      "\"dp=64 zero=1 mbs=1\" ";
  const std::pair<std::string, std::string> cases[] = {
      {"--failures-per-gpu-day hardware=-1", "--failures-per-gpu-day"},
      {"--failures-per-node-day disk=1", "--failures-per-node-day"},
      {"--failures-per-gpu-day hardware=x", "--failures-per-gpu-day"},
      {"--storage-write-gbps 0", "--storage-write-gbps"},
      {"--storage-read-gbps -5", "--storage-read-gbps"},
      {"--host-copy-gbps 0", "--host-copy-gbps"},
      {"--restart-s -1", "--restart-s"},
      {"--ckpt-mode tape", "--ckpt-mode"},
  };
  for (const auto& [flags, name] : cases) {
    for (const std::string& command : {estimate, kPlan + "--top 1 "}) {
      const CliRun r = Pentamesh(command + flags);
      EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.out << r.err;
      EXPECT_TRUE(Has(r.err, name)) << flags << ": " << r.err;
    }
  }
  const CliRun one_node = Pentamesh(
      "estimate --model llama3-8b --cluster h100-sxm --gpus 8 --train pretrain-4k --layout "
      "\"dp=8 zero=1 mbs=1\" --ckpt-mode memory");
  EXPECT_EQ(one_node.exit_code, 2);
  EXPECT_TRUE(Has(one_node.err, "--ckpt-mode memory")) << one_node.err;
  const CliRun rank = Pentamesh(kPlan + "--rank cost");
  EXPECT_EQ(rank.exit_code, 2);
  EXPECT_TRUE(Has(rank.err, "--rank")) << rank.err;
}

}  // namespace

// `pentamesh validate` and `pentamesh calibrate` as a user runs them: the published runs, a profile
// written and used by estimate, and bad input refused with the row id, the field and exit 2.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "testing/cli_run.h"
#include "testing/temp_dir.h"

namespace pentamesh {
namespace {

using testing::Pentamesh;
using testing::ReadFile;

const std::string kRuns = std::string(PM_SOURCE_DIR) + "/bench/data/published_runs.json";

std::string Write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Two rows of the published file (a user's own runs look the same).
nlohmann::json TwoRows() {
  const nlohmann::json all = nlohmann::json::parse(ReadFile(kRuns));
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : all) {
    if (r["source"]["group"] == "torchtitan" && rows.size() < 4) rows.push_back(r);
  }
  return rows;
}

TEST(ValidateCli, PublishedRunsJsonAndHtml) {
  const std::string dir = testing::MakeTempDir("validate");
  const auto run = Pentamesh(fmt::format("validate --runs {} --json --html {}/v.html", kRuns, dir));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["rows"].size(), 118u);
  EXPECT_EQ(j["unusable"].size(), 0u);
  EXPECT_LE(j["all"]["shipped"]["median_abs"].get<double>(), 0.07);
  ASSERT_EQ(j["regimes"].size(), 4u);  // MoE, seq >= 32K, FP8, >= 1,024 GPUs
  EXPECT_EQ(j["regimes"][0]["name"], "MoE");
  const std::string html = ReadFile(dir + "/v.html");
  EXPECT_NE(html.find("pmChart(\""), std::string::npos);  // Vega charts (rendered: tests/report)
  EXPECT_NE(html.find("megatron2021-t1-18B"), std::string::npos);
}

// Several files as one set, and a held-out file predicted by a fit on the others (the held-out
// rows are the ones printed, with the regimes); an id repeated across files is a bad row (exit 2).
TEST(ValidateCli, SeveralFilesAndHoldout) {
  const std::string collected = std::string(PM_SOURCE_DIR) + "/bench/data/collected_runs.json";
  const auto both = Pentamesh(fmt::format("validate --runs {} {} --json", kRuns, collected));
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(nlohmann::json::parse(both.out)["rows"].size(), 199u);
  const auto held =
      Pentamesh(fmt::format("validate --runs {} --holdout {} --json", kRuns, collected));
  ASSERT_EQ(held.exit_code, 0) << held.err;
  const auto j = nlohmann::json::parse(held.out);
  EXPECT_EQ(j["rows"].size(), 81u);
  EXPECT_EQ(j["fitted_on_runs"], 118);
  EXPECT_EQ(j["rows"][0]["file"], collected);
  EXPECT_TRUE(j["rows"][0].contains("held_out_fit_error"));
  EXPECT_TRUE(j["regimes"][0].contains("held_out_fit"));
  const auto text = Pentamesh(fmt::format("validate --runs {} --holdout {}", kRuns, collected));
  EXPECT_NE(text.out.find("held-out fit"), std::string::npos) << text.out;
  EXPECT_EQ(
      Pentamesh(fmt::format("validate --runs {} --holdout {} --cv", kRuns, collected)).exit_code,
      2);  // --cv and --holdout exclude each other (CLI usage error)
  const auto twice = Pentamesh(fmt::format("validate --runs {} {} --no-rows", kRuns, kRuns));
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find(fmt::format("{}: row 0 ", kRuns)), std::string::npos) << twice.err;
  EXPECT_NE(twice.err.find("id is used twice (first by"), std::string::npos) << twice.err;
}

// One bad row among good ones: the good rows are validated and printed (text and --json, each with
// its assumptions), the bad one is named by index and reason, and the status is 2 (bad input).
TEST(ValidateCli, ABadRowNeverSinksTheFile) {
  const std::string dir = testing::MakeTempDir("validate_bad_row");
  nlohmann::json rows = TwoRows();
  rows[1]["parallelism"]["tp"] = "eight";
  const std::string bad_id = rows[1]["id"];
  const std::string path = Write(dir, "mixed.json", rows.dump());
  const auto run = Pentamesh(fmt::format("validate --runs {} --json", path));
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find(fmt::format("row 1 '{}': parallelism.tp must be a number", bad_id)),
            std::string::npos)
      << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["rows"].size(), rows.size() - 1);
  for (const auto& r : j["rows"]) {
    EXPECT_NE(r["id"], bad_id);
    EXPECT_TRUE(r["assumptions"].is_array());
    EXPECT_GT(r["predicted_tokens_per_s_gpu"].get<double>(), 0);
  }
  ASSERT_EQ(j["unusable"].size(), 1u);
  EXPECT_EQ(j["unusable"][0]["row"], 1);
  EXPECT_TRUE(j["unusable"][0]["unreadable"].get<bool>());
  const auto text = Pentamesh(fmt::format("validate --runs {}", path));
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_NE(text.out.find(rows[0]["id"].get<std::string>()), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("row 1 '" + bad_id + "': unreadable: parallelism.tp"), std::string::npos)
      << text.out;
  // Without the bad row the status is 0; a file that is not an array is still refused whole.
  rows.erase(1);
  EXPECT_EQ(
      Pentamesh(fmt::format("validate --runs {}", Write(dir, "good.json", rows.dump()))).exit_code,
      0);
  const auto obj = Pentamesh(fmt::format("validate --runs {}", Write(dir, "obj.json", "{}")));
  EXPECT_EQ(obj.exit_code, 2);
  EXPECT_NE(obj.err.find("must be a JSON array"), std::string::npos) << obj.err;
}

TEST(CalibrateCli, WritesAProfileEstimateUses) {
  const std::string dir = testing::MakeTempDir("calibrate");
  const std::string runs = Write(dir, "mine.json", TwoRows().dump());
  const auto run = Pentamesh(fmt::format("calibrate --runs {} --out {}/mine.toml", runs, dir));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("leave-one-out"), std::string::npos) << run.out;
  const auto est = Pentamesh(fmt::format(
      "estimate --model llama3-8b --cluster h100-hbm2e --gpus 8 --train pretrain-4k --layout "
      "\"dp=8 zero=3 mbs=2\" --stack {}/mine.toml --json",
      dir));
  ASSERT_EQ(est.exit_code, 0) << est.err;
  const auto j = nlohmann::json::parse(est.out);
  EXPECT_EQ(j["stack"], "torchtitan-calibrated");
  EXPECT_TRUE(j["interval"]["covered"].get<bool>()) << j["interval"].dump();
  EXPECT_LT(j["interval"]["tokens_per_s_lo"].get<double>(), j["tokens_per_s"].get<double>());
}

// The regime interval (calib/regime_interval.h) in estimate and plan --json: a dense 4K Megatron
// run on H100 is calibrated from dense runs near it; the case study (MoE at 128K on 1,024 H100)
// has no calibration run near it: marked uncalibrated, wider, with the runs used named.
TEST(RegimeIntervalCli, EstimateAndPlanJson) {
  const auto est = Pentamesh(
      "estimate --model llama3-8b --cluster h100-sxm --gpus 64 --train pretrain-4k --layout "
      "\"dp=64 zero=1 mbs=1\" --json");
  ASSERT_EQ(est.exit_code, 0) << est.err;
  const auto e = nlohmann::json::parse(est.out)["interval"];
  EXPECT_TRUE(e["calibrated"].get<bool>()) << e.dump();
  EXPECT_EQ(e["regime"]["seq_len"], 4096);
  EXPECT_FALSE(e["regime"]["moe"].get<bool>());
  ASSERT_GE(e["used"].size(), 10u);
  EXPECT_EQ(e["runs"], e["used"].size());
  EXPECT_LE(e["used"][0]["distance"].get<double>(), 1.0);
  for (const auto& u : e["used"]) {
    EXPECT_FALSE(u["id"].get<std::string>().empty());
    EXPECT_GE(u["distance"].get<double>(), e["used"][0]["distance"].get<double>());
  }
  EXPECT_FALSE(e.contains("uncalibrated"));
  EXPECT_LT(e["tokens_per_s_lo"].get<double>(), e["tokens_per_s_hi"].get<double>());
  EXPECT_TRUE(e["stack_wide"]["covered"].get<bool>());
  const double dense_width = e["ratio_hi"].get<double>() / e["ratio_lo"].get<double>();

  const auto plan = Pentamesh(
      "plan --model meridianfin-72b --cluster h100-sxm --gpus 1024 --train meridian-128k --json "
      "--top 1");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto j = nlohmann::json::parse(plan.out);
  const auto p = j["interval"];
  EXPECT_FALSE(p["calibrated"].get<bool>()) << p.dump();
  EXPECT_TRUE(p["regime"]["moe"].get<bool>());
  EXPECT_EQ(p["regime"]["seq_len"], 131072);
  EXPECT_GT(p["used"][0]["distance"].get<double>(), 1.0);
  EXPECT_GT(p["widen"].get<double>(), 1.0);
  EXPECT_NE(p["uncalibrated"].get<std::string>().find("no calibration run with MoE, seq >= 32K"),
            std::string::npos)
      << p["uncalibrated"];
  EXPECT_GT(p["ratio_hi"].get<double>() / p["ratio_lo"].get<double>(), dense_width);
  const double tps = j["top"][0]["tokens_per_s"].get<double>();
  EXPECT_NEAR(p["tokens_per_s_lo"].get<double>(), tps * p["ratio_lo"].get<double>(), 1e-6 * tps);
  // The text says the same in a line of its own.
  const auto text = Pentamesh(
      "plan --model meridianfin-72b --cluster h100-sxm --gpus 1024 --train meridian-128k --top 1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("uncalibrated regime: no calibration run with MoE"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("calibration runs nearest (MoE, seq 131072"), std::string::npos)
      << text.out;
}

struct BadCase {
  const char* name;
  std::function<void(nlohmann::json&)> edit;
  const char* expect;  // substring of the error
};

TEST(CalibrateCli, BadInputNamesTheRowAndField) {
  const std::string dir = testing::MakeTempDir("calibrate_bad");
  const std::vector<BadCase> cases = {
      {"no throughput",
       [](nlohmann::json& rows) {
         for (const char* k :
              {"tokens_per_sec_per_gpu", "tokens_per_sec_total", "step_time_s", "tflops_per_gpu"}) {
           rows[1]["measured"][k] = nullptr;
         }
       },
       "no throughput published"},
      {"non-positive",
       [](nlohmann::json& rows) { rows[0]["measured"]["tokens_per_sec_per_gpu"] = -5; },
       "measured.tokens_per_sec_per_gpu must be a positive finite number"},
      {"unknown GPU",
       [](nlohmann::json& rows) {
         rows[2]["hardware"]["gpu_model"] = "TPU v5p";
         rows[2]["hardware"]["gpu_type"] = "TPU v5p";
       },
       "has no cluster preset"},
      {"string degree", [](nlohmann::json& rows) { rows[0]["parallelism"]["tp"] = "eight"; },
       "parallelism.tp must be a number"},
  };
  for (const BadCase& c : cases) {
    nlohmann::json rows = TwoRows();
    c.edit(rows);
    const std::string runs = Write(dir, "bad.json", rows.dump());
    const auto run = Pentamesh(fmt::format("calibrate --runs {} --out {}/p.toml", runs, dir));
    EXPECT_EQ(run.exit_code, 2) << c.name << ": " << run.out;
    EXPECT_NE(run.err.find(c.expect), std::string::npos) << c.name << ": " << run.err;
    EXPECT_NE(run.err.find("row '"), std::string::npos) << c.name << ": " << run.err;
  }
  const std::string garbage = Write(dir, "garbage.json", "[{\"id\": \"a\",");
  const auto run = Pentamesh(fmt::format("calibrate --runs {} --out {}/p.toml", garbage, dir));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("garbage.json"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("line"), std::string::npos) << run.err;
  const auto nostack = Pentamesh(fmt::format(
      "estimate --model llama3-8b --cluster h100-sxm --gpus 8 --train pretrain-4k --layout dp=8 "
      "--stack nosuchstack"));
  EXPECT_EQ(nostack.exit_code, 2);
  EXPECT_NE(nostack.err.find("--stack"), std::string::npos) << nostack.err;
}

// MoE parallel folding with whole experts (etp = 1): EP spans the tp ranks.
TEST(FoldedEp, Qwen3AndDeepSeekLayoutsEstimate) {
  const auto qwen = Pentamesh(
      "estimate --model qwen3-235b-a22b --cluster h100-sxm --gpus 256 --train pretrain-4k-16m "
      "--layout \"dp=16 tp=2 pp=8 ep=32 etp=1 ep_placement=folded zero=1 schedule=interleaved:2\" "
      "--json");
  ASSERT_EQ(qwen.exit_code, 0) << qwen.err << qwen.out;
  const auto q = nlohmann::json::parse(qwen.out);
  EXPECT_GT(q["tokens_per_s"].get<double>(), 0);
  const auto ds = Pentamesh(
      "estimate --model deepseek-v3-like --cluster h800 --gpus 1024 --train pretrain-4k-16m "
      "--layout \"dp=32 tp=2 pp=16 ep=64 etp=1 ep_placement=folded zero=1\" --json");
  ASSERT_EQ(ds.exit_code, 0) << ds.err << ds.out;
  // The same ep with experts split over tp (etp = tp) is not a layout: ep must divide dp*cp.
  const auto bad = Pentamesh(
      "estimate --model qwen3-235b-a22b --cluster h100-sxm --gpus 256 --train pretrain-4k-16m "
      "--layout \"dp=16 tp=2 pp=8 ep=32 ep_placement=folded\"");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("ep=32 must divide dp*cp=16"), std::string::npos) << bad.err;
}

// `calibrate --log`: real log excerpts of the three engines (tests/calib/data/logs/README.md)
// with launch files of the runs' published configs give the runs' tokens/s within 1% (worked
// out by hand from the printed lines), as rows `validate --runs` estimates.
TEST(CalibrateLogCli, ThreeEnginesWithinOnePercent) {
  const std::string logs = std::string(PM_SOURCE_DIR) + "/tests/calib/data/logs/";
  const std::string dir = testing::MakeTempDir("calibrate_log");
  const std::string runs = dir + "/my_runs.json";
  struct Case {
    std::string log, config, flags;
    double tokens_per_s_gpu;
    int64_t gpus;
  };
  const Case cases[] = {
      // Megatron-LM #756: median 5533.8 ms for 128 x 2048 tokens on 16 GPUs.
      {"megatron_lm_issue756.log", "megatron_lm_issue756.sh", "--cluster h100-sxm",
       128.0 * 2048 / 5.5338 / 16, 16},
      // BLOOM 176B: median 106.36 s for 2048 x 2048 tokens on 384 GPUs.
      {"bloom_176b_chronicles.log", "bloom_176b_launch.sh", "--cluster a100-80gb --gpus 384",
       2048.0 * 2048 / 106.36 / 384, 384},
      // torchtitan #1287: median tps 5,863 (per GPU) on 8 GPUs.
      {"torchtitan_pr1287.log", "torchtitan_pr1287.toml", "--cluster h100-sxm --gpus 8", 5863.0, 8},
  };
  for (const Case& c : cases) {
    const auto run = Pentamesh(fmt::format("calibrate --log {}{} --config {}{} {} --append {}",
                                           logs, c.log, logs, c.config, c.flags, runs));
    ASSERT_EQ(run.exit_code, 0) << c.log << ": " << run.err;
    const auto row = nlohmann::json::parse(run.out);
    const double measured = row["measured"]["tokens_per_sec_per_gpu"].get<double>();
    EXPECT_NEAR(measured / c.tokens_per_s_gpu, 1, 0.01) << c.log;
    EXPECT_NEAR(row["measured"]["tokens_per_sec_total"].get<double>() /
                    (c.tokens_per_s_gpu * static_cast<double>(c.gpus)),
                1, 0.01)
        << c.log;
    EXPECT_EQ(row["hardware"]["num_gpus"], c.gpus) << c.log;
  }
  const auto rows = nlohmann::json::parse(ReadFile(runs));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["id"], "megatron_lm_issue756");
  EXPECT_EQ(rows[0]["parallelism"]["tp"], 2);
  EXPECT_EQ(rows[0]["parallelism"]["ep"], 8);
  EXPECT_EQ(rows[1]["parallelism"]["pp"], 12);
  EXPECT_EQ(rows[1]["source"]["software"], "Megatron-DeepSpeed (DeepSpeed)");
  EXPECT_EQ(rows[2]["model"]["seq_length"], 8192);
  const auto validated = Pentamesh(fmt::format("validate --runs {} --json", runs));
  ASSERT_EQ(validated.exit_code, 0) << validated.err;
  const auto v = nlohmann::json::parse(validated.out);
  EXPECT_EQ(v["rows"].size(), 3u);
  EXPECT_EQ(v["unusable"].size(), 0u);
  // The same id again is refused, and the file is left as it was.
  const auto again =
      Pentamesh(fmt::format("calibrate --log {}torchtitan_pr1287.log --config "
                            "{}torchtitan_pr1287.toml --cluster h100-sxm --gpus 8 --append {}",
                            logs, logs, runs));
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("row 2 already has the id 'torchtitan_pr1287'"), std::string::npos)
      << again.err;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(runs)).size(), 3u);
}

TEST(CalibrateLogCli, BadInputExits2NamingTheCause) {
  const std::string logs = std::string(PM_SOURCE_DIR) + "/tests/calib/data/logs/";
  const std::string dir = testing::MakeTempDir("calibrate_log_bad");
  const std::string titan = logs + "torchtitan_pr1287.log", toml = logs + "torchtitan_pr1287.toml";
  struct Bad {
    std::string args, message;
  };
  const std::string empty = Write(dir, "empty.log", "loading checkpoint\nstarting training\n");
  // The Megatron script without --seq-length (Megatron-LM has no default for it).
  std::string script = ReadFile(logs + "megatron_lm_issue756.sh");
  script.erase(script.find("--seq-length 2048 "), 18);
  const std::string no_seq = Write(dir, "no_seq.sh", script);
  const std::string bad_time = Write(dir, "bad.log",
                                     " iteration        3/      10 | elapsed time per iteration "
                                     "(ms): n/a | global batch size: 8 |\n");
  const Bad bad[] = {
      {fmt::format("--log {} --config {} --cluster h100-sxm --gpus 8", empty, toml),
       "no training step lines in 2 lines, so the engine cannot be told"},
      {fmt::format("--log {} --config {} --cluster h100-sxm --gpus 8", bad_time, toml),
       "line 1: elapsed time per iteration (ms) 'n/a' is not a non-negative number"},
      {fmt::format("--log {} --cluster h100-sxm --gpus 8", titan), "give --config FILE"},
      {fmt::format("--log {} --config {} --gpus 8", titan, toml), "give --cluster PRESET"},
      {fmt::format("--log {} --config {} --cluster h100-sxm", titan, toml), "--gpus"},
      {fmt::format("--log {}megatron_lm_issue756.log --config {} --cluster h100-sxm", logs, no_seq),
       "no_seq.sh: --seq-length is missing"},
      {fmt::format("--log {} --config {}megatron_lm_issue756.sh --cluster h100-sxm", titan, logs),
       "the log's lines are torchtitan's but the config is a megatron file"},
      {fmt::format("--log {} --config {} --cluster h100-sxm --gpus 8 --skip-steps 250", titan,
                   toml),
       "all 6 step lines are warm-up"},
  };
  for (const Bad& b : bad) {
    const auto run = Pentamesh("calibrate " + b.args);
    EXPECT_EQ(run.exit_code, 2) << b.args;
    EXPECT_NE(run.err.find(b.message), std::string::npos) << b.args << "\n" << run.err;
  }
}

}  // namespace
}  // namespace pentamesh

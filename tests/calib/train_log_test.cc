// calib/train_log: the engines' own log lines (real excerpts, tests/calib/data/logs/README.md
// names each source) read into the median throughput, each expected value worked out by hand
// from the printed lines; bad logs refused naming the line; and the row writer read back by the
// row reader.
#include "calib/train_log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calib/runs.h"
#include "spec/load_toml.h"

namespace pentamesh::calib {
namespace {

const std::string kLogs = std::string(PM_SOURCE_DIR) + "/tests/calib/data/logs/";

std::string Read(const std::string& name) {
  std::ifstream in(kLogs + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LogRunConfig Config(const std::string& engine, int64_t gpus, int64_t seq, int64_t batch_seqs) {
  LogRunConfig c;
  c.engine = engine;
  c.gpus = gpus;
  c.train.seq_len = seq;
  c.train.global_batch_tokens = seq * batch_seqs;
  return c;
}

// Megatron-LM issue #756: iterations 43, 44, 45 at 5444.9, 5533.8, 5718.6 ms, global batch 128,
// sequence 2048, 16 GPUs. None is warm-up (numbered above 2): the median is 5533.8 ms.
TEST(TrainLog, MegatronLmIssue756) {
  auto log = ParseTrainLog("issue756", Read("megatron_lm_issue756.log"));
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->format, LogFormat::kMegatron);
  EXPECT_EQ(log->engine, "megatron");  // "throughput per GPU (TFLOP/s/GPU)" is Megatron-LM's
  ASSERT_EQ(log->steps.size(), 3u);
  EXPECT_EQ(log->steps[0].step, 43);
  EXPECT_DOUBLE_EQ(log->steps[1].iteration_s, 5.5338);
  EXPECT_EQ(log->steps[2].global_batch, 128);
  auto m = MeasureLog(*log, Config("megatron", 16, 2048, 128), {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const double job = 128.0 * 2048 / 5.5338;  // 47,371 tokens/s
  EXPECT_NEAR(m->tokens_per_s / job, 1, 0.01);
  EXPECT_NEAR(m->tokens_per_s_gpu / (job / 16), 1, 0.01);  // 2,961 per GPU
  EXPECT_EQ(m->steps_used, 3);
  EXPECT_DOUBLE_EQ(m->tflops_per_gpu, 236.0);  // the median of the printed 239.8, 236.0, 228.4
}

// BLOOM 176B (Megatron-DeepSpeed, BigScience): iterations 31214-31222 in seconds; sorted times
// 105.90 106.13 106.30 106.33 [106.36] 106.40 106.44 106.46 107.53, global batch 2048, sequence
// 2048, 384 GPUs. The log's own samples per second at 106.36 s, 19.256, agree: x 2048 = 39,436.
TEST(TrainLog, MegatronDeepSpeedBloom) {
  auto log = ParseTrainLog("bloom", Read("bloom_176b_chronicles.log"));
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->engine, "deepspeed");
  ASSERT_EQ(log->steps.size(), 9u);
  EXPECT_DOUBLE_EQ(log->steps[0].iteration_s, 106.46);  // "(s)": seconds, not ms
  EXPECT_DOUBLE_EQ(log->steps[0].samples_per_s, 19.238);
  auto m = MeasureLog(*log, Config("deepspeed", 384, 2048, 2048), {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const double job = 2048.0 * 2048 / 106.36;  // 39,435 tokens/s
  EXPECT_NEAR(m->tokens_per_s / job, 1, 0.01);
  EXPECT_NEAR(m->tokens_per_s / (19.256 * 2048), 1, 0.01);
  EXPECT_NEAR(m->tokens_per_s_gpu / 102.70, 1, 0.01);
  EXPECT_NEAR(m->step_time_s, 106.36, 1e-9);
}

// torchtitan PR #1287: tps 5,856 5,593 5,868 5,869 5,864 5,862 at steps 200-250; sorted, the
// middle two are 5,862 and 5,864: 5,863 tokens/s per GPU, x 8 GPUs for the job. The profiler and
// GC lines between them are not steps.
TEST(TrainLog, TorchtitanPr1287) {
  auto log = ParseTrainLog("pr1287", Read("torchtitan_pr1287.log"));
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->engine, "torchtitan");
  ASSERT_EQ(log->steps.size(), 6u);
  EXPECT_EQ(log->steps[0].line, 2);
  EXPECT_DOUBLE_EQ(log->steps[1].tokens_per_s_gpu, 5593);
  ASSERT_TRUE(log->memory_gib.has_value());
  EXPECT_DOUBLE_EQ(*log->memory_gib, 49.66);
  auto m = MeasureLog(*log, Config("torchtitan", 8, 8192, 8), {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_NEAR(m->tokens_per_s_gpu / 5863, 1, 0.01);
  EXPECT_NEAR(m->tokens_per_s / (8 * 5863), 1, 0.01);
}

// torchtitan PR #3393 (grad_norm, v0.2-era lines): tps 7,282 7,334 7,313 7,282 7,322 7,309 7,272
// 7,304; the middle two of the sorted eight are 7,304 and 7,309: 7,306.5.
TEST(TrainLog, TorchtitanPr3393WithGradNorm) {
  auto log = ParseTrainLog("pr3393", Read("torchtitan_pr3393.log"));
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->steps.size(), 8u);
  auto m = MeasureLog(*log, Config("torchtitan", 1, 2048, 8), {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_NEAR(m->tokens_per_s_gpu, 7306.5, 1e-9);
}

// torchtitan PR #2389: step 5 printed by seven ranks, then step 6: two steps, 9,966 and 9,913.
TEST(TrainLog, TorchtitanPr2389OneStepFromSeveralRanks) {
  auto log = ParseTrainLog("pr2389", Read("torchtitan_pr2389.log"));
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_EQ(log->steps[1].line, 8);
  auto m = MeasureLog(*log, Config("torchtitan", 8, 4096, 8), {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_NEAR(m->tokens_per_s_gpu, (9966.0 + 9913.0) / 2, 1e-9);
}

// The colours torchtitan's metrics logger writes around each field (components/metrics.py:
// Color's red/green/.../reset escapes), put around a line of PR #3393.
TEST(TrainLog, TorchtitanColours) {
  const std::string line =
      "[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - \x1b[31mstep: 14  \x1b[32mloss:  "
      "3.24405  \x1b[33mgrad_norm:  0.8319  \x1b[96mmemory:  9.46GiB(64.99%)  \x1b[34mtps: 7,282  "
      "\x1b[36mtflops: 0.52  \x1b[35mmfu: 0.17%\x1b[39m\n";
  auto log = ParseTrainLog("colour", line);
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->steps.size(), 1u);
  EXPECT_EQ(log->steps[0].step, 14);
  EXPECT_DOUBLE_EQ(log->steps[0].tokens_per_s_gpu, 7282);
  EXPECT_DOUBLE_EQ(*log->memory_gib, 9.46);
}

// Megatron's memory report: max reserved in MB of 2^20 bytes.
TEST(TrainLog, MegatronMemoryLine) {
  const std::string text =
      "[Rank 0] (after 1 iterations) memory (MB) | allocated: 100.0 | max allocated: 200.0 | "
      "reserved: 300.0 | max reserved: 40960.00\n" +
      Read("megatron_lm_issue756.log");
  auto log = ParseTrainLog("mem", text);
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_TRUE(log->memory_gib.has_value());
  EXPECT_DOUBLE_EQ(*log->memory_gib, 40.0);
}

TEST(TrainLog, BadLogsNameTheLine) {
  auto none = ParseTrainLog("empty.log", "starting\nloading checkpoint\n");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("empty.log: no training step lines in 2 lines"),
            std::string::npos);
  EXPECT_NE(none.status().message().find("cannot be told"), std::string::npos);
  const std::string megatron = Read("megatron_lm_issue756.log");
  auto mixed = ParseTrainLog("mixed.log", megatron + Read("torchtitan_pr3393.log"));
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("line 1 is a Megatron iteration line and line 4 a "
                                          "torchtitan step line"),
            std::string::npos)
      << mixed.status().message();
  auto bad_time = ParseTrainLog(
      "bad.log",
      " iteration 5/ 10 | elapsed time per iteration (ms): fast | global batch size: 8 |");
  ASSERT_FALSE(bad_time.ok());
  EXPECT_NE(bad_time.status().message().find(
                "bad.log: line 1: elapsed time per iteration (ms) 'fast' is not a non-negative "
                "number"),
            std::string::npos)
      << bad_time.status().message();
  // A fork's spelling without the space before the unit is the same field.
  auto fork =
      ParseTrainLog("fork.log",
                    " iteration 13 / 118 | elapsed time per iteration(ms): 17658.3 | global batch "
                    "size: 2880 |");
  ASSERT_TRUE(fork.ok()) << fork.status().message();
  EXPECT_DOUBLE_EQ(fork->steps[0].iteration_s, 17.6583);
  auto no_tps = ParseTrainLog("t.log", "x\nstep: 3  loss: 1.0  memory: 1.00GiB(1.00%)\n");
  ASSERT_FALSE(no_tps.ok());
  EXPECT_NE(no_tps.status().message().find("t.log: line 2: step 3 has no 'tps:' field"),
            std::string::npos);
}

TEST(TrainLog, MeasureRefusals) {
  auto log = ParseTrainLog("pr2389", Read("torchtitan_pr2389.log"));
  ASSERT_TRUE(log.ok());
  LogRunOptions warm;
  warm.skip_steps = 6;
  auto all_warm = MeasureLog(*log, Config("torchtitan", 8, 4096, 8), warm);
  ASSERT_FALSE(all_warm.ok());
  EXPECT_NE(all_warm.status().message().find("all 2 step lines are warm-up (steps numbered up to "
                                             "6)"),
            std::string::npos);
  auto other = MeasureLog(*log, Config("megatron", 8, 4096, 8), {});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("the log's lines are torchtitan's but the config is a "
                                          "megatron file"),
            std::string::npos)
      << other.status().message();
  auto bloom = ParseTrainLog("bloom", Read("bloom_176b_chronicles.log"));
  ASSERT_TRUE(bloom.ok());
  auto ds_as_megatron = MeasureLog(*bloom, Config("megatron", 384, 2048, 2048), {});
  ASSERT_FALSE(ds_as_megatron.ok());
  EXPECT_NE(ds_as_megatron.status().message().find("deepspeed's but the config is a megatron"),
            std::string::npos);
  // Its consumed tokens / consumed samples (97829879808 / 47768496 = 2048) against a config of
  // sequence 4096: another run, refused naming the line.
  EXPECT_EQ(bloom->steps[0].seq_len, 2048);
  auto wrong_seq = MeasureLog(*bloom, Config("deepspeed", 384, 4096, 2048), {});
  ASSERT_FALSE(wrong_seq.ok());
  EXPECT_NE(wrong_seq.status().message().find("line 1: the log's sequence length is 2048"),
            std::string::npos)
      << wrong_seq.status().message();
  auto no_seq = MeasureLog(*bloom, Config("deepspeed", 384, 0, 0), {});
  ASSERT_FALSE(no_seq.ok());
  EXPECT_NE(no_seq.status().message().find("sequence length"), std::string::npos);
}

// Megatron-DeepSpeed's tgs is the job's tokens/s over its world size. The line is one of the
// BLOOM excerpt's with the tgs field the deepspeedai version adds after samples per second (its
// value, 102.695 = 2048 x 2048 / 106.36 / 384, worked out here): 384 GPUs agree, 64 do not.
TEST(TrainLog, DeepSpeedTgsChecksTheWorldSize) {
  const std::string line =
      " iteration    31219/  115311 | consumed samples:     47778736 | consumed tokens:  "
      "97850851328 | elapsed time per iteration (ms): 106360.0 | learning rate: 5.279E-05 | "
      "global batch size:  2048 | lm loss: 5.098124E+00 | grad norm: 960.351 | actual seqlen:  "
      "2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per "
      "second: 19.256 | tokens per gpu per second (tgs): 102.695 | TFLOPs: 147.43 |\n";
  auto log = ParseTrainLog("tgs", line);
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(log->engine, "deepspeed");
  EXPECT_DOUBLE_EQ(log->steps[0].tokens_per_s_gpu, 102.695);
  auto ok = MeasureLog(*log, Config("deepspeed", 384, 2048, 2048), {});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_NEAR(ok->tokens_per_s_gpu / 102.695, 1, 0.01);
  auto wrong = MeasureLog(*log, Config("deepspeed", 64, 2048, 2048), {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("imply 384 GPUs, the run has 64"), std::string::npos)
      << wrong.status().message();
}

// The writer and the reader of the row format agree: every usable published row, written by
// RunRowJson, reads back to the same layout, sequence, batch, GPU count and throughput.
TEST(RunRowJson, PublishedRowsReadBack) {
  auto runs = LoadRuns(std::string(PM_SOURCE_DIR) + "/bench/data/published_runs.json");
  ASSERT_TRUE(runs.ok());
  int checked = 0;
  for (const calib::Run& r : *runs) {
    if (!r.usable()) continue;
    const nlohmann::json row = RunRowJson(r);
    auto back = RunsFromJson(nlohmann::json::array({row}), "written");
    ASSERT_TRUE(back.ok());
    const calib::Run& b = back->front();
    ASSERT_TRUE(b.usable()) << r.id << ": " << b.unusable;
    EXPECT_EQ(b.layout, r.layout) << r.id;
    EXPECT_EQ(b.train.seq_len, r.train.seq_len) << r.id;
    EXPECT_EQ(b.train.global_batch_tokens, r.train.global_batch_tokens) << r.id;
    EXPECT_EQ(b.cluster.gpus(), r.cluster.gpus()) << r.id;
    EXPECT_EQ(b.sku, r.sku) << r.id;
    EXPECT_EQ(b.model.hidden, r.model.hidden) << r.id;
    EXPECT_EQ(b.model.moe.experts, r.model.moe.experts) << r.id;
    EXPECT_DOUBLE_EQ(b.tokens_per_s_gpu, r.tokens_per_s_gpu) << r.id;
    ++checked;
  }
  EXPECT_EQ(checked, 118);
}

// A row whose notes say EP is not folded into the data-parallel ranks is read as separate
// placement whatever its ep, and written back saying so: with ep 1 too (the row the runs fuzzer
// found, fuzz/seeds/runs/crash-ep1-not-folded.json: the writer had dropped the note at ep 1).
TEST(RunRowJson, SeparatePlacementReadsBackAtEpOne) {
  auto runs = LoadRuns(std::string(PM_SOURCE_DIR) + "/fuzz/seeds/runs/crash-ep1-not-folded.json");
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 1u);
  const calib::Run& r = runs->front();
  ASSERT_TRUE(r.usable()) << r.unusable;
  EXPECT_EQ(r.layout.ep, 1);
  EXPECT_EQ(r.layout.ep_placement, spec::EpPlacement::kSeparate);
  auto back = RunsFromJson(nlohmann::json::array({RunRowJson(r)}), "written");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->front().layout, r.layout);
}

}  // namespace
}  // namespace pentamesh::calib

// Regression tests for issue 31 (hardening, wave 2) on the real `pentamesh` binary: the output
// layer (core/output.h: stdout checked at exit, files replaced whole, symlinks never followed) and
// the JSON number policy and typed accessors (spec/json_input.h) with overflow-checked degree
// products (spec::GpuProduct). Each input here once aborted, raised SIGFPE or exited 0 with a
// lost or partial output; now: exit 2 naming the field, or a correct answer.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/fixtures.h"
#include "testing/cli_run.h"

namespace pentamesh {
namespace {
namespace fs = std::filesystem;

using testing::CliRun;
using testing::Pentamesh;
using testing::Shell;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Exit 2 and stderr containing `part`.
void ExpectRefused(const CliRun& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, part)) << "stderr: " << r.err;
}

std::string Write(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// --- Output layer ---

// A failed write to stdout (a full disk: /dev/full) is exit 2, not an empty file and exit 0;
// both a short listing (flushed at exit) and a long one (fmt::print fails mid-run).
TEST(Harden2Output, StdoutWriteErrorExitsTwo) {
  for (const char* args : {"presets models llama3-8b", "presets models",
                           "plan --model llama3-8b --cluster h100-sxm --train pretrain-4k"}) {
    const CliRun r = Shell(fmt::format("( {} {} >/dev/full )", PM_BINARY, args));
    ExpectRefused(r, "cannot write to standard output: No space left on device");
  }
  EXPECT_EQ(Pentamesh("presets models llama3-8b").exit_code, 0);
}

// --html through a symlink: refused before any work, the link's target untouched.
TEST(Harden2Output, SymlinkAtAnOutputPathRefused) {
  const std::string dir = data::testing::MakeTempDir("harden2_symlink");
  const std::string target = Write(dir, "precious", "keep me");
  fs::create_symlink(target, dir + "/plan.html");
  const CliRun r = Pentamesh(fmt::format(
      "plan --model llama3-8b --cluster h100-sxm --train pretrain-4k --html {}/plan.html", dir));
  ExpectRefused(r, "symbolic link");
  EXPECT_EQ(testing::ReadFile(target), "keep me");
  EXPECT_TRUE(fs::is_symlink(dir + "/plan.html"));
}

// A written report replaces the old file whole and leaves no temporary beside it.
TEST(Harden2Output, FileReplacedWholeWithoutTemporaries) {
  const std::string dir = data::testing::MakeTempDir("harden2_replace");
  Write(dir, "plan.html", "old");
  const CliRun r = Pentamesh(fmt::format(
      "plan --model llama3-8b --cluster h100-sxm --train pretrain-4k --html {}/plan.html", dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = testing::ReadFile(dir + "/plan.html");
  EXPECT_TRUE(Has(html, "</html>")) << html.substr(0, 200);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
}

// --- Numbers: JSON number policy, typed accessors, checked products ---

// A ds_config's bad values: exit 2 naming the key (they aborted: an uncaught JSON exception).
TEST(Harden2Numbers, DsConfigValuesNamed) {
  const std::string dir = data::testing::MakeTempDir("harden2_ds");
  const std::string base =
      R"("train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1})";
  const std::string flags = " --engine deepspeed --model llama3-8b --gpus 8 --seq-len 4096";
  const struct {
    std::string extra, want;
  } cases[] = {
      {R"("gradient_accumulation_steps": 1e400)", "number '1e400' at line 1 is out of range"},
      {R"("bf16": {"enabled": "yes"})", "\"bf16.enabled\" must be true or false, not string"},
      {R"("fp16": {"enabled": 1})", "\"fp16.enabled\" must be true or false, not number"},
      {R"("gradient_accumulation_steps": 12345678901234567890)",
       "\"/gradient_accumulation_steps\": 12345678901234567890 is out of range"},
      {R"("gradient_accumulation_steps": 1.5)",
       "\"gradient_accumulation_steps\" must be a whole number, got 1.5"},
      {R"("tensor_parallel": {"autotp_size": 4294967296})",
       "\"tensor_parallel.autotp_size\" 4294967296 is out of range"},
  };
  for (const auto& c : cases) {
    const std::string path = Write(dir, "ds_config.json", "{" + base + ", " + c.extra + "}");
    SCOPED_TRACE(c.extra);
    ExpectRefused(Pentamesh("import-config " + path + flags), c.want);
  }
  // Degrees that each pass but whose product overflowed to 0 (then divided: SIGFPE).
  const std::string big = Write(
      dir, "big.json",
      "{" + base +
          R"(, "sequence_parallel_size": 2147483647, "tensor_parallel": {"autotp_size": 2147483647}})");
  ExpectRefused(Pentamesh("import-config " + big + flags), "exceeds the limit of 1048576 GPUs");
  // The same file with sane values is read (bf16 true).
  const std::string good = Write(dir, "good.json", "{" + base + R"(, "bf16": {"enabled": true}})");
  const CliRun ok = Pentamesh("import-config " + good + flags);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// torchtitan degrees whose product overflowed to 0, then divided the world size (SIGFPE).
TEST(Harden2Numbers, TorchtitanDegreeProductChecked) {
  const std::string dir = data::testing::MakeTempDir("harden2_titan");
  const std::string job = Write(dir, "job.toml", R"([model]
flavor = "8B"
[parallelism]
tensor_parallel_degree = 4294967296
pipeline_parallel_degree = 4294967296
data_parallel_shard_degree = -1
)");
  ExpectRefused(Pentamesh("import-config " + job + " --engine torchtitan --gpus 8"),
                "replicate x tp x pp x cp = 1 x 4294967296 x 4294967296 x 1 exceeds the limit");
  ExpectRefused(Pentamesh("plan --model llama3-8b --cluster h100-sxm --train pretrain-4k "
                          "--baseline " +
                          job),
                "exceeds the limit of 1048576 GPUs");
}

// Megatron degrees of 2^32 each: tp x pp x cp wrapped to 0 and divided the world size (SIGFPE).
TEST(Harden2Numbers, MegatronDegreeProductChecked) {
  const std::string dir = data::testing::MakeTempDir("harden2_megatron");
  const std::string script = Write(
      dir, "train.sh",
      "torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
      "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size "
      "1024 --vocab-size 128256 --tensor-model-parallel-size 4294967296 "
      "--pipeline-model-parallel-size 4294967296 --context-parallel-size 4294967296 --bf16\n");
  ExpectRefused(Pentamesh("import-config " + script + " --engine megatron --gpus 8"),
                "tp x pp x cp = 4294967296 x 4294967296 x 4294967296 exceeds the limit");
  ExpectRefused(Pentamesh("plan --model llama3-8b --cluster h100-sxm --train pretrain-4k "
                          "--baseline " +
                          script),
                "exceeds the limit of 1048576 GPUs");
}

// --moe-layer-freq with a 20-digit count aborted (std::stoll) and a 10-digit run count allocated
// that many entries (std::bad_alloc): named, bounded by the model's layers.
TEST(Harden2Numbers, MoeLayerFreqCountsBounded) {
  const std::string dir = data::testing::MakeTempDir("harden2_freq");
  const std::string base =
      "torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
      "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size "
      "1024 --vocab-size 128256 --num-experts 8 --moe-router-topk 2 --bf16 --moe-layer-freq ";
  const struct {
    std::string freq, want;
  } cases[] = {
      {"99999999999999999999", "--moe-layer-freq: '99999999999999999999' is not an integer"},
      {"'([0]*1+[1]*99999999999999999999)'",
       "(the model has 32 layers): '99999999999999999999' is not an integer"},
      {"'([0]*1+[1]*9999999999)'", "must be <= 31 (got 9999999999)"},
  };
  for (const auto& c : cases) {
    const std::string script = Write(dir, "train.sh", base + c.freq + "\n");
    SCOPED_TRACE(c.freq);
    ExpectRefused(Pentamesh("import-config " + script + " --engine megatron --gpus 8"), c.want);
  }
  // The same form within the model's layers is read.
  const std::string ok = Write(dir, "ok.sh", base + "'([0]*1+[1]*31)'\n");
  EXPECT_EQ(Pentamesh("import-config " + ok + " --engine megatron --gpus 8").exit_code, 0);
}

// A 20-digit #SBATCH count aborted (std::stoll): now named.
TEST(Harden2Numbers, SbatchCountNamed) {
  const std::string dir = data::testing::MakeTempDir("harden2_sbatch");
  const std::string script = Write(dir, "train.sh", R"(#!/bin/bash
#SBATCH --nodes=99999999999999999999
#SBATCH --ntasks-per-node=8
torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 \
  --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 \
  --global-batch-size 1024 --vocab-size 128256 --tensor-model-parallel-size 8 --bf16
)");
  ExpectRefused(Pentamesh("import-config " + script + " --engine megatron"), "#SBATCH --nodes");
}

// The published-runs JSON: 1e400 and a 20-digit integer are named, not an abort.
TEST(Harden2Numbers, RunsJsonNumbersNamed) {
  const std::string dir = data::testing::MakeTempDir("harden2_runs");
  const std::string inf =
      Write(dir, "runs.json", R"([{"id": "a", "model": {"num_layers": 1e400}}])");
  ExpectRefused(Pentamesh("validate --runs " + inf), "number '1e400' at line 1 is out of range");
  const std::string huge =
      Write(dir, "runs2.json", R"([{"id": "a", "model": {"num_layers": 12345678901234567890}}])");
  ExpectRefused(Pentamesh("validate --runs " + huge), "\"/0/model/num_layers\"");
}

}  // namespace
}  // namespace pentamesh

namespace pentamesh {
namespace {

// Issue 31, item 4: every file a command reads goes through core/input.h. A FIFO (no writer),
// /dev/zero, a directory and a file over its limit are refused at once (exit 2 naming the path
// and the reason) by each kind of reader: a TOML spec, an engine config, a runs JSON, a run's
// metrics.jsonl and a trace.
TEST(Harden2Inputs, FifoDeviceDirectoryAndOversizedRefused) {
  const std::string dir = testing::MakeTempDir("harden2_inputs");
  const std::string fifo = dir + "/pipe.toml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(dir + "/dir.toml");
  {
    std::ofstream big(dir + "/big.toml");
    big << std::string((size_t{16} << 20) + 1, '#');
  }
  fs::create_directories(dir + "/run");
  const std::string metrics_fifo = dir + "/run/metrics.jsonl";
  ASSERT_EQ(mkfifo(metrics_fifo.c_str(), 0600), 0);
  struct Case {
    std::string args, part;
  };
  const std::vector<Case> cases = {
      {"plan --model " + fifo + " --train pretrain-4k --gpus 8", fifo + ": is a FIFO"},
      {"plan --model /dev/zero --train pretrain-4k --gpus 8",
       "/dev/zero: is a character device, not a regular file"},
      {"plan --model " + dir + "/dir.toml --train pretrain-4k --gpus 8",
       dir + "/dir.toml: is a directory"},
      {"plan --model " + dir + "/big.toml --train pretrain-4k --gpus 8",
       dir + "/big.toml: 16777217 bytes is over the limit of 16777216 bytes for a config file"},
      {"import-config " + fifo, fifo + ": is a FIFO"},
      {"import-config /dev/zero", "/dev/zero: is a character device"},
      {"validate --runs " + fifo, fifo + ": is a FIFO"},
      {"report --run " + dir + "/run --html " + dir + "/r.html", metrics_fifo + ": is a FIFO"},
  };
  for (const Case& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    // Under timeout: a reader that blocked on the FIFO would exit 124, not 2.
    const CliRun r = Shell(fmt::format("timeout 20 {} {}", PM_BINARY, c.args));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    SCOPED_TRACE(c.args);
    ExpectRefused(r, c.part);
    EXPECT_LT(seconds, 10.0);
  }
}

}  // namespace
}  // namespace pentamesh

// Regression tests for issue 15 on the real `pentamesh` binary: each input that once crashed, hung
// or exited 0 with a wrong answer now exits 2 with a message naming the flag or field (or, for a
// diverging run, ends as a training outcome). Each case runs in well under a second except the two
// short training runs.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "testing/run_toml.h"

namespace pentamesh {
namespace {

using testing::CliRun;
using testing::Pentamesh;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Exit 2 and stderr containing `part`.
void ExpectRefused(const std::string& args, const std::string& part) {
  const CliRun r = Pentamesh(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
  EXPECT_TRUE(Has(r.err, part)) << args << "\nstderr: " << r.err;
}

const char* kEstimate = "estimate --model llama3-8b --cluster h100-sxm --train pretrain-4k ";
const char* kPlan = "plan --model llama3-8b --train pretrain-4k ";

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(HardenCli, UnknownSubcommandIsNamed) {
  ExpectRefused("frobnicate", "unknown subcommand 'frobnicate'");
  ExpectRefused("frobnicate --help", "unknown subcommand 'frobnicate'");
}

TEST(HardenCli, ParserErrorsExitTwo) {
  ExpectRefused(std::string(kEstimate) + "--layout", "--layout");          // missing value
  ExpectRefused("estimate --model llama3-8b", "--cluster");                // missing required
  ExpectRefused(std::string(kPlan) + "--no-such-flag", "--no-such-flag");  // unknown flag
  ExpectRefused("schedule --pp two --microbatches 4", "--pp");             // not a number
  ExpectRefused("", "subcommand");                                         // nothing given
  EXPECT_EQ(Pentamesh("--help").exit_code, 0);
  EXPECT_EQ(Pentamesh("estimate --help").exit_code, 0);
}

TEST(HardenCli, NumericFlagsFollowTheSharedRules) {
  ExpectRefused(std::string(kEstimate) + "--layout dp=8 --gpus 0", "--gpus: must be >= 1 (got 0)");
  ExpectRefused(std::string(kEstimate) + "--layout dp=8 --gpus -8", "--gpus");
  ExpectRefused(std::string(kEstimate) + "--layout dp=8 --gpus 1.5", "--gpus: '1.5' is not an");
  for (const char* bad : {"-1", "0.5", "nan", "inf", "1e400"}) {
    ExpectRefused(std::string(kEstimate) + "--layout dp=8 --gpus 8 --moe-imbalance " + bad,
                  "--moe-imbalance");
  }
  ExpectRefused(std::string(kPlan) + "--gpus 8 --threads -1", "--threads");
  ExpectRefused(std::string(kPlan) + "--gpus 8 --mbs-max -1", "--mbs-max");
  ExpectRefused(std::string(kPlan) + "--gpus 8 --top 0", "--top");
  ExpectRefused("schedule --pp 4 --microbatches 8 --p2p nan", "--p2p");
  // "1e3" is a whole number and is accepted as 1000 by the same rule.
  const CliRun ok = Pentamesh(std::string(kEstimate) + "--layout dp=8 --gpus 8e0 --json");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(HardenCli, GpuCountsBeyondTheLimitAreRefusedFast) {
  const auto start = std::chrono::steady_clock::now();
  ExpectRefused(std::string(kPlan) + "--gpus 1073741824", "1048576");
  ExpectRefused("scale --model llama3-8b --train pretrain-4k --gpus-list 8,1073741824", "1048576");
  ExpectRefused("sweep --models llama3-8b --nodes 4611686018427387904", "1048576");
  ExpectRefused("sweep --models llama3-8b --nodes 1000000", "exceeds the limit of 1048576 GPUs");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
}

TEST(HardenCli, ClusterAndLayoutProductsCannotOverflow) {
  const std::string dir = data::testing::MakeTempDir("harden_cluster");
  const std::string cluster = WriteFile(dir, "big.toml", R"([cluster]
peak_tflops = 989
hbm_gb = 80
hbm_gbps = 3350
gpus_per_node = 2147483647
nodes = 2147483647
intra_node_gbps = 450
nics_per_node = 8
inter_node_gbps = 50
)");
  ExpectRefused(fmt::format("estimate --model llama3-8b --cluster {} --train pretrain-4k "
                            "--layout dp=8",
                            cluster),
                "cluster.nodes x gpus_per_node = 2147483647 x 2147483647 exceeds the limit");
  ExpectRefused(std::string(kEstimate) + "--layout 'dp=2147483647 tp=2147483647 pp=4'",
                "layout: dp*tp*pp*cp*ep");
  ExpectRefused(std::string(kEstimate) + "--layout 'dp=9223372036854775807'", "layout: dp");
}

TEST(HardenCli, RepeatedLayoutKeyIsRefused) {
  ExpectRefused(std::string(kEstimate) + "--gpus 16 --layout 'dp=8 tp=2 dp=16'",
                "layout: key 'dp' given twice");
}

TEST(HardenCli, HeadsThatDoNotSplitHiddenAreRefusedLikeTheEngine) {
  const std::string dir = data::testing::MakeTempDir("harden_heads");
  for (const char* heads : {"3", "256"}) {  // a truncated head_dim; head_dim 0
    const std::string model = WriteFile(dir, fmt::format("m{}.toml", heads),
                                        fmt::format(R"([model]
layers = 4
hidden = 128
heads = {}
ffn_hidden = 256
vocab = 1000
max_seq_len = 4096
)",
                                                    heads));
    ExpectRefused(fmt::format("estimate --model {} --cluster h100-sxm --gpus 8 --train pretrain-4k "
                              "--layout dp=8",
                              model),
                  fmt::format("model.heads: {} does not divide hidden=128", heads));
    ExpectRefused(fmt::format("plan --model {} --gpus 8 --train pretrain-4k", model),
                  fmt::format("model.heads: {} does not divide hidden=128", heads));
  }
}

TEST(HardenCli, HugeBatchWithSmallMbsMaxTerminates) {
  const std::string dir = data::testing::MakeTempDir("harden_batch");
  const std::string train = WriteFile(dir, "t.toml", R"([train]
seq_len = 4096
global_batch_tokens = 1099511627776
total_tokens = 1e15
)");
  const auto start = std::chrono::steady_clock::now();
  const CliRun r = Pentamesh(
      fmt::format("plan --model llama3-8b --gpus 64 --train {} --mbs-max 1 --json", train));
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << r.err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60);
  ExpectRefused(fmt::format("plan --model llama3-8b --gpus 64 --train {}",
                            WriteFile(dir, "t2.toml", R"([train]
seq_len = 4096
global_batch_seqs = 2147483647
total_tokens = 1e15
)")),
                "exceeds the limit of 1099511627776 tokens");
}

TEST(HardenCli, OutputPathsAreCheckedBeforeWork) {
  const std::string missing = "/nonexistent-dir-pm/out";
  ExpectRefused(std::string(kPlan) + "--gpus 64 --html " + missing + ".html", "--html");
  ExpectRefused("scale --model llama3-8b --train pretrain-4k --html " + missing + ".html",
                "cannot write");
  ExpectRefused("schedule --pp 4 --microbatches 8 --trace " + missing + ".json", "--trace");
  ExpectRefused("report --run /nonexistent-run --html " + missing + ".html", "--html");
  const std::string dir = data::testing::MakeTempDir("harden_out");
  ExpectRefused("schedule --pp 4 --microbatches 8 --html " + dir, "is a directory");
  ExpectRefused("train --config /nonexistent/run.toml --trace " + missing + ".json", "--trace");
}

TEST(HardenCli, EmptyCorpusIsNamed) {
  const std::string dir = data::testing::MakeTempDir("harden_corpus");
  const std::string corpus = WriteFile(dir, "empty.txt", "\n  \n\n");
  ExpectRefused(
      fmt::format("tokenizer train --input {} --vocab-size 300 --model-prefix {}/tok", corpus, dir),
      "holds no text");
  // A run whose dataset must be built from the empty corpus.
  std::string text = testing::RunTomlText({.dataset = dir + "/dataset"});
  const std::string key = "dataset = \"" + dir + "/dataset\"";
  text.replace(text.find(key), key.size(), key + "\ncorpus = \"" + corpus + "\"");
  std::ofstream(dir + "/run.toml") << text;
  ExpectRefused("train --config " + dir + "/run.toml", "data.corpus: " + corpus + " holds no text");
}

// Two good steps, then a resume at optim.lr = 1e30: step 3 still starts from good weights (finite
// loss) but its update explodes them, so steps 4, 4, 4 are non-finite. The run stops with exit 2
// naming the cause and the step; metrics.jsonl stays valid JSON with the skipped attempts counted;
// the last good checkpoint (step 2: step 3's weights gave the non-finite loss) resumes.
TEST(HardenCli, DivergingLearningRateEndsAsAnOutcome) {
  const std::string dir = data::testing::MakeTempDir("harden_diverge");
  std::ofstream(dir + "/run.toml") << testing::RunTomlText(
      {.total_tokens = 1024,  // 8 steps
       .optim = "lr = 1e-2\nwarmup_steps = 1",
       .dataset = data::testing::Corpus().dataset,
       .run_keys = fmt::format("eval_every = 0\neval_batches = 1\nmax_nonfinite_in_row = 2\n"
                               "out_dir = \"{}/out\"",
                               dir),
       .tables =
           fmt::format("[ckpt]\ndir = \"{}/ckpt\"\ninterval = 1\nkeep = 8\nasync = false", dir)});
  const std::string train = "train --config " + dir + "/run.toml ";
  ASSERT_EQ(Pentamesh(train + "--set run.steps=2").exit_code, 0);
  const CliRun r = Pentamesh(train + "--resume auto --set optim.lr=1e30");
  ASSERT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, "training diverged: 3 non-finite steps in a row")) << r.err;
  EXPECT_TRUE(Has(r.err, "the last at step 4 with a non-finite loss")) << r.err;
  EXPECT_TRUE(Has(r.err, "stopping after step 3")) << r.err;
  const std::string good = dir + "/ckpt/step-00000002";
  EXPECT_TRUE(Has(r.err, "The last good checkpoint is " + good)) << r.err;
  const std::vector<nlohmann::json> lines = testing::ReadMetrics(dir + "/out");  // all parse
  ASSERT_EQ(lines.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["step"], i + 1);
    EXPECT_FALSE(lines[i].contains("skipped"));
    EXPECT_EQ(lines[i]["nonfinite_total"], 0);
  }
  for (int i = 3; i < 6; ++i) {
    EXPECT_EQ(lines[i]["skipped"], true);
    EXPECT_EQ(lines[i]["step"], 4);
    EXPECT_EQ(lines[i]["cause"], "non-finite loss");
    EXPECT_EQ(lines[i]["nonfinite_total"], i - 2);
  }
  // The last good checkpoint is intact: a resume from it at the sane learning rate finishes.
  const CliRun resumed = Pentamesh(train + "--resume " + good + " --set run.steps=4");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(Has(resumed.out, "resumed from " + good + " at step 2")) << resumed.out;
  // `report --run` reads a metrics file with skipped lines.
  const CliRun report = Pentamesh(fmt::format("report --run {}/out --html {}/r.html", dir, dir));
  EXPECT_EQ(report.exit_code, 0) << report.err;
}

// A Hugging Face directory whose tensor holds a NaN is refused naming the tensor.
TEST(HardenCli, ImportedNaNTensorIsRefused) {
  const std::string dir = data::testing::MakeTempDir("harden_import");
  std::ofstream(dir + "/run.toml") << testing::RunTomlText(
      {.total_tokens = 256,
       .optim = "lr = 1e-2\nwarmup_steps = 1",
       .dataset = data::testing::Corpus().dataset,
       .layout = "",
       .run_keys = "eval_every = 0\neval_batches = 1",
       .tables = fmt::format("[ckpt]\ndir = \"{}/ckpt\"\nasync = false", dir)});
  ASSERT_EQ(Pentamesh("train --config " + dir + "/run.toml").exit_code, 0);
  const CliRun exported =
      Pentamesh(fmt::format("export --hf {}/hf --config {}/run.toml", dir, dir));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  // Poison the first element of one F32 tensor (safetensors: u64 header size, JSON header, data).
  const std::string file = dir + "/hf/model.safetensors";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_size = 0;
  f.read(reinterpret_cast<char*>(&header_size), 8);
  std::string header(header_size, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_size));
  const nlohmann::json h = nlohmann::json::parse(header);
  std::string victim;
  int64_t begin = 0;
  for (const auto& [name, entry] : h.items()) {
    if (name == "__metadata__" || entry["dtype"] != "F32") continue;
    if (name.find("q_proj") == std::string::npos) continue;
    victim = name;
    begin = entry["data_offsets"][0].get<int64_t>();
    break;
  }
  ASSERT_FALSE(victim.empty()) << header;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  f.seekp(static_cast<std::streamoff>(8 + header_size + static_cast<uint64_t>(begin)));
  f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  f.close();
  ExpectRefused(
      fmt::format("import --hf {}/hf --out {}/imported --config {}/run.toml", dir, dir, dir),
      "tensor " + victim + ": element 0 is not finite");
}

}  // namespace
}  // namespace pentamesh

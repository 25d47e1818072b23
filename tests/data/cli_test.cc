// `pentamesh tokenizer train` and `pentamesh tokenize` run as the real binary: exit codes, and
// bad flags fail with a message naming the flag.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/dataset.h"
#include "fixtures.h"

namespace pentamesh::data {
namespace {

struct CliRun {
  int exit_code;
  std::string out, err;
};

CliRun Pentamesh(const std::string& args) {
  const std::string dir = testing::MakeTempDir("cli");
  const std::string cmd =
      std::string(PM_BINARY) + " " + args + " >" + dir + "/out 2>" + dir + "/err";
  const int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir + "/out"), slurp(dir + "/err")};
}

void ExpectFails(const std::string& args, const std::string& needle) {
  const CliRun r = Pentamesh(args);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
}

TEST(DataCli, TrainThenTokenizeSucceeds) {
  const auto& c = testing::Corpus();
  const std::string dir = testing::MakeTempDir("cli_ok");
  CliRun r = Pentamesh("tokenizer train --input " + c.corpus + " --vocab-size 400 --model-prefix " +
                       dir + "/tok --max-sentence-length 2048");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("split at 2048 bytes"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/tok.model"));
  r = Pentamesh("tokenize --model " + dir + "/tok.model --input " + c.corpus + " --output " + dir +
                "/shards --heldout-fraction 0.02 --shard-tokens 50000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("unigram baseline"), std::string::npos) << r.out;
  auto ds = Dataset::Open(dir + "/shards");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->vocab_size(), 400);
  EXPECT_GT(ds->tokens(Split::kHeldout), 0u);
}

TEST(DataCli, BadFlagsNameTheFlag) {
  const auto& c = testing::Corpus();
  const std::string dir = testing::MakeTempDir("cli_bad");
  const std::string in = " --input " + c.corpus;
  ExpectFails("tokenizer", "subcommand");
  ExpectFails("tokenizer train" + in + " --model-prefix " + dir + "/t", "--vocab-size");
  ExpectFails("tokenizer train" + in + " --vocab-size abc --model-prefix " + dir + "/t",
              "--vocab-size");
  ExpectFails("tokenizer train" + in + " --vocab-size 100 --model-prefix " + dir + "/t",
              "--vocab-size");
  ExpectFails(
      "tokenizer train --input /nonexistent.txt --vocab-size 300 --model-prefix " + dir + "/t",
      "--input");
  ExpectFails("tokenizer train" + in + " --vocab-size 400 --normalization nope --model-prefix " +
                  dir + "/t",
              "--normalization");
  ExpectFails("tokenizer train" + in + " --vocab-size 400 --character-coverage 0 --model-prefix " +
                  dir + "/t",
              "--character-coverage");
  ExpectFails("tokenizer train" + in + " --vocab-size 300 --model-prefix /nonexistent/dir/t",
              "--model-prefix");
  ExpectFails("tokenize --model " + c.model + in + " --output " + dir + "/o --bogus 1", "--bogus");
  ExpectFails("tokenize" + in + " --output " + dir + "/o", "--model");
  ExpectFails("tokenize --model " + c.model + in + " --output " + dir + "/o --heldout-fraction 1.5",
              "--heldout-fraction");
  ExpectFails("tokenize --model /nonexistent.model" + in + " --output " + dir + "/o",
              "/nonexistent.model");
  // Exit code 2 for errors found after parsing (see cli::Fail).
  EXPECT_EQ(
      Pentamesh("tokenize --model /nonexistent.model" + in + " --output " + dir + "/o").exit_code,
      2);
}

}  // namespace
}  // namespace pentamesh::data

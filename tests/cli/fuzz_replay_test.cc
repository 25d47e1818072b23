// Replays every input of fuzz/seeds/cli and fuzz/seeds/serve (the CLI and serve fuzzers' seed
// corpora and every input they once crashed on) through the real binary and checks
// fuzz/cli_properties.h on each outcome, so these inputs stay fixed in every build, with or without
// clang and libFuzzer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_properties.h"
#include "testing/cli_run.h"

namespace pentamesh {
namespace {

std::string Quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST(CliFuzzReplay, EverySeedSatisfiesTheProperties) {
  std::vector<std::filesystem::path> seeds;
  for (const char* dir : {"/fuzz/seeds/cli", "/fuzz/seeds/serve"}) {
    for (const auto& entry : std::filesystem::directory_iterator(std::string(PM_SOURCE_DIR) + dir))
      seeds.push_back(entry.path());
  }
  std::sort(seeds.begin(), seeds.end());
  ASSERT_GE(seeds.size(), 14u);
  for (const auto& seed : seeds) {
    std::vector<std::string> args = fuzz::ArgsFromText(testing::ReadFile(seed.string()));
    fuzz::EmitToTempDir(args);  // serve --emit DIR: a temporary directory
    std::string command;
    bool json = false;
    for (const std::string& a : args) {
      command += " " + Quote(a);
      json = json || a == "--json";
    }
    const testing::CliRun r = testing::Pentamesh(command);
    json = json && !fuzz::PrintedHelp(r.out);  // -h anywhere, even after `--`, prints help
    EXPECT_EQ(fuzz::CheckCliOutcome(r.exit_code, r.out, json), "")
        << seed.filename() << ":" << command << "\n"
        << r.err;
  }
}

}  // namespace
}  // namespace pentamesh

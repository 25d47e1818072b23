// Help texts are true: every subcommand's --help runs (exit 0) and says what the command does
// today. Each phrase below was once printed and was wrong (or is a path a user does not have);
// a help text that brings one back fails here. Add a phrase when a help text is found stale.
#include <gtest/gtest.h>

#include <cctype>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testing/cli_run.h"

namespace {

using pentamesh::testing::Pentamesh;

struct Stale {
  const char* phrase;
  const char* why;
};
constexpr Stale kStalePhrases[] = {
    {"on one process", "train runs on any number of MPI ranks (mpirun, srun)"},
    {"mpirun -np dp*tp*pp", "a layout's rank count also counts cp (and ep when separate)"},
    {"../shared", "a user's clone has no sibling folder"},
    {"/work/", "an absolute path of the developers' machines"},
    {"fit a stack profile to your own measured runs (published",
     "calibrate also measures this host (--host)"},
    {"triad bandwidth): a", "calibrate --host also measures sgemv and attention"},
};

// The subcommands `pentamesh --help` lists (the lines after "Subcommands:").
std::vector<std::string> Subcommands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream in(help.substr(help.find("Subcommands:")));
  std::string line;
  std::getline(in, line);
  const std::regex row(R"(^  ([a-z][a-z-]*)\s+\S.*)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) names.push_back(m[1]);
  }
  return names;
}

void ExpectNoStalePhrase(const std::string& what, const std::string& text) {
  for (const Stale& s : kStalePhrases) {
    EXPECT_EQ(text.find(s.phrase), std::string::npos)
        << what << " says \"" << s.phrase << "\": " << s.why << "\n"
        << text;
  }
}

TEST(HelpTexts, EverySubcommandsHelpRunsAndHasNoStalePhrase) {
  const auto top = Pentamesh("--help");
  ASSERT_EQ(top.exit_code, 0) << top.out;
  ExpectNoStalePhrase("pentamesh --help", top.out);
  const std::vector<std::string> subs = Subcommands(top.out);
  // Every subcommand the binary registers, as a floor: a parser change that hides them fails.
  ASSERT_GE(subs.size(), 18u) << top.out;
  for (const std::string& sub : subs) {
    SCOPED_TRACE(sub);
    const auto help = Pentamesh(sub + " --help");
    EXPECT_EQ(help.exit_code, 0) << help.out;
    // The first line is the one-line description, starting with a capital letter.
    ASSERT_FALSE(help.out.empty());
    EXPECT_TRUE(std::isupper(static_cast<unsigned char>(help.out[0]))) << help.out;
    EXPECT_NE(help.out.find("Usage:"), std::string::npos) << help.out;
    ExpectNoStalePhrase(sub + " --help", help.out);
  }
  // Nested subcommands (tokenizer train).
  const auto nested = Pentamesh("tokenizer train --help");
  EXPECT_EQ(nested.exit_code, 0) << nested.out;
  ExpectNoStalePhrase("tokenizer train --help", nested.out);
}

TEST(HelpTexts, VersionNamesTheVersionAndTheCommit) {
  const auto v = Pentamesh("--version");
  ASSERT_EQ(v.exit_code, 0) << v.out;
  EXPECT_TRUE(std::regex_search(
      v.out, std::regex(R"(^pentamesh \d+\.\d+\.\d+ \(git ([0-9a-f]{12}(-dirty)?|unknown)\))")))
      << v.out;
}

}  // namespace

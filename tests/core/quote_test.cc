// core/quote.h against the languages' own readers: bash reads every ShellQuote'd hostile string
// back as one literal word and runs nothing; toml++ reads every TomlString back as the string;
// a CommentText line stays one comment in bash and TOML.
#include "core/quote.h"

#include <gtest/gtest.h>

#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/hostile.h"

namespace pentamesh::core {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  std::string dir = testing::MakeTempDir("quote");
  std::string canary = dir + "/PWNED";
  std::vector<std::string> hostile = testing::HostileStrings(canary);
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "HOME=" + dir};

  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

// The document's table; a parse error fails the test (naming the document) and gives {}.
toml::table Parse(const std::string& doc) {
  try {
    return toml::parse(doc);
  } catch (const toml::parse_error& e) {
    ADD_FAILURE() << doc << ": " << e.description();
    return {};
  }
}

TEST(ShellQuote, BashReadsEachHostileStringAsOneLiteralWord) {
  Fixture f;
  std::string script = "printf '%s\\0'";
  for (const auto& s : f.hostile) script += " " + ShellQuote(s);
  script += "\n";
  const std::string path = f.Write("words.sh", script);
  ASSERT_EQ(testing::RunBash({"-n", path}, f.env, f.dir).exit_code, 0);
  const testing::BashRun run = testing::RunBash({path}, f.env, f.dir);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<std::string> words = testing::SplitNul(run.output);
  ASSERT_EQ(words.size(), f.hostile.size()) << run.output;
  for (size_t i = 0; i < words.size(); ++i) EXPECT_EQ(words[i], f.hostile[i]) << i;
  EXPECT_FALSE(fs::exists(f.canary));
}

TEST(ShellQuote, PlainWordsStayReadable) {
  EXPECT_EQ(ShellQuote("--tensor-model-parallel-size"), "--tensor-model-parallel-size");
  EXPECT_EQ(ShellQuote("/data/run_1/ckpt:a,b=c@d%e+f"), "/data/run_1/ckpt:a,b=c@d%e+f");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(std::string_view("a\0b", 3)), "'a\\0b'");
}

// A key from a user's file (a GPU class, a profile's table name) written back as a table name
// reads back as the same key, bare when it can be (stack_fuzz: `[gpu."a b"]` was written as
// `[gpu.a b]`, which no TOML reader accepts).
TEST(TomlKey, TomlReadsEachHostileKeyBack) {
  EXPECT_EQ(TomlKey("h100"), "h100");
  EXPECT_EQ(TomlKey("a100-80gb_x"), "a100-80gb_x");
  EXPECT_EQ(TomlKey(""), "\"\"");
  Fixture f;
  for (const auto& s : f.hostile) {
    if (s == testing::kInvalidUtf8) continue;  // not a key a TOML file can hold
    const std::string doc = "[gpu." + TomlKey(s) + "]\nv = 1\n";
    const toml::table parsed = Parse(doc);
    const toml::table* gpu = parsed["gpu"].as_table();
    ASSERT_NE(gpu, nullptr) << doc;
    ASSERT_EQ(gpu->size(), 1u) << doc;
    EXPECT_EQ(std::string(gpu->begin()->first.str()), s) << doc;
  }
}

TEST(TomlString, TomlReadsEachHostileStringBack) {
  Fixture f;
  for (const auto& s : f.hostile) {
    const std::string doc = "[t]\nv = " + TomlString(s) + "\nw = 1\n";
    const toml::table parsed = Parse(doc);
    ASSERT_TRUE(parsed["t"].is_table()) << doc;
    const toml::table& t = *parsed["t"].as_table();
    EXPECT_EQ(t.size(), 2u) << doc;
    // Invalid UTF-8 cannot be in TOML: each bad byte reads back as U+FFFD.
    const std::string want = s == testing::kInvalidUtf8 ? "\uFFFD\uFFFD invalid utf-8 \uFFFD" : s;
    EXPECT_EQ(t["v"].value<std::string>(), std::optional<std::string>(want)) << doc;
  }
}

TEST(CommentText, StaysOneCommentLine) {
  Fixture f;
  std::string script;
  for (const auto& s : f.hostile) {
    const std::string c = CommentText(s);
    for (unsigned char ch : c) EXPECT_TRUE(ch >= 0x20 && ch != 0x7f) << c;
    script += "# " + c + "\n";
    const std::string doc = "# " + c + "\nk = 1\n";
    EXPECT_EQ(Parse(doc).size(), 1u) << doc;
  }
  script += "printf done\n";
  const std::string path = f.Write("comments.sh", script);
  const testing::BashRun run = testing::RunBash({path}, f.env, f.dir);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output, "done");
  EXPECT_FALSE(fs::exists(f.canary));
  EXPECT_EQ(CommentText("a\nb\\c\x01\xff ✓"), "a\\nb\\\\c\\x01\\xFF ✓");
}

}  // namespace
}  // namespace pentamesh::core

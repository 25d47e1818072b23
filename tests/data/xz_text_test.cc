// The shipped corpus unpacks to exactly what the system's xz tool gives (an independent decoder),
// an existing unpacked file is reused, and bad inputs are refused naming the field and reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/xz_text.h"
#include "testing/cli_run.h"
#include "testing/temp_dir.h"

namespace pentamesh::data {
namespace {

using pentamesh::testing::MakeTempDir;
using pentamesh::testing::ReadFile;
using pentamesh::testing::Shell;

const std::string kCorpus = std::string(PM_SOURCE_DIR) + "/data/finance_corpus.txt.xz";

TEST(XzText, ShippedCorpusEqualsTheXzTool) {
  const std::string dir = MakeTempDir("xz");
  auto text = UnpackedText(kCorpus, dir, "data.corpus");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, dir + "/finance_corpus.txt");
  const auto reference = Shell("xz -dc " + kCorpus);
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const std::string ours = ReadFile(*text);
  EXPECT_EQ(ours.size(), 14863325u);  // data/README.md: the unpacked size
  EXPECT_TRUE(ours == reference.out);
  // A second call reuses the file (same path, not rewritten).
  const auto written = std::filesystem::last_write_time(*text);
  auto again = UnpackedText(kCorpus, dir, "data.corpus");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *text);
  EXPECT_EQ(std::filesystem::last_write_time(*again), written);
}

TEST(XzText, PlainTextPassesThrough) {
  auto text = UnpackedText("some/corpus.txt", "unused", "data.corpus");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "some/corpus.txt");
}

TEST(XzText, BadInputsNameTheFieldAndTheReason) {
  const std::string dir = MakeTempDir("xz_bad");
  auto missing = UnpackedText(dir + "/none.txt.xz", dir + "/out", "data.corpus");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("data.corpus: "), std::string::npos);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);

  std::ofstream(dir + "/plain.txt.xz") << "not compressed\n";
  auto not_xz = UnpackedText(dir + "/plain.txt.xz", dir + "/out", "data.corpus");
  ASSERT_FALSE(not_xz.ok());
  EXPECT_NE(not_xz.status().message().find("not an xz file"), std::string::npos)
      << not_xz.status().message();

  // The first 100 KB of the real file: a stream that ends early.
  const std::string head = ReadFile(kCorpus).substr(0, 100000);
  std::ofstream(dir + "/cut.txt.xz", std::ios::binary) << head;
  auto truncated = UnpackedText(dir + "/cut.txt.xz", dir + "/out", "data.corpus");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status().message();
  // Nothing half-written is left for a later call to reuse.
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/cut.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/plain.txt"));
}

}  // namespace
}  // namespace pentamesh::data

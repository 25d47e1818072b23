// Token shards and datasets: round trips, and every corruption returns a Status naming the file.
#include "data/token_shards.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "data/dataset.h"
#include "fixtures.h"

namespace pentamesh::data {
namespace {

using testing::MakeTempDir;
using testing::SyntheticDataset;
using testing::WriteSynthetic;

void ExpectStreamEquals(const Dataset& ds, const std::vector<uint32_t>& expected) {
  ASSERT_EQ(ds.tokens(Split::kTrain), expected.size());
  std::vector<int32_t> got(expected.size());
  ds.Read(Split::kTrain, 0, expected.size(), got.data());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(got[i], static_cast<int32_t>(expected[i])) << "at " << i;
  }
}

TEST(TokenShards, RoundTripUint16AcrossShards) {
  const SyntheticDataset s = WriteSynthetic(1000, 40, 100);
  auto ds = Dataset::Open(s.dir);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->manifest().dtype, TokenDtype::kU16);
  EXPECT_GT(ds->manifest().train.shards.size(), 5u);
  EXPECT_EQ(ds->manifest().train.documents, 40u);
  ExpectStreamEquals(*ds, s.train_stream);
  // A read that straddles a shard boundary.
  std::vector<int32_t> part(30);
  ds->Read(Split::kTrain, 85, 30, part.data());
  for (int i = 0; i < 30; ++i) EXPECT_EQ(part[i], static_cast<int32_t>(s.train_stream[85 + i]));
}

TEST(TokenShards, RoundTripUint32) {
  const SyntheticDataset s = WriteSynthetic(70000, 12, 1 << 20);
  auto ds = Dataset::Open(s.dir);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->manifest().dtype, TokenDtype::kU32);
  ExpectStreamEquals(*ds, s.train_stream);
  auto shard = ShardReader::Open(s.dir + "/train-00000.bin");
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(shard->doc_count(), 12u);
  EXPECT_EQ(shard->doc_ends().back(), s.train_stream.size());
}

TEST(TokenShards, DtypeFollowsVocab) {
  EXPECT_EQ(TokenDtypeForVocab(65535), TokenDtype::kU16);
  EXPECT_EQ(TokenDtypeForVocab(65536), TokenDtype::kU32);
}

// Rewrites bytes of a file: fn(bytes).
template <typename Fn>
void Mutate(const std::string& path, Fn fn) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  fn(bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

void ExpectOpenError(const std::string& dir, const std::string& file, const std::string& what) {
  auto ds = Dataset::Open(dir);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find(file), std::string::npos) << ds.status().message();
  EXPECT_NE(ds.status().message().find(what), std::string::npos) << ds.status().message();
}

TEST(TokenShards, BadMagicIsAStatus) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 1 << 20);
  Mutate(s.dir + "/train-00000.bin", [](std::vector<char>& b) { b[0] = 'X'; });
  ExpectOpenError(s.dir, "train-00000.bin", "bad magic");
}

TEST(TokenShards, TruncatedIsAStatus) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 1 << 20);
  Mutate(s.dir + "/train-00000.bin", [](std::vector<char>& b) { b.resize(b.size() - 9); });
  ExpectOpenError(s.dir, "train-00000.bin", "truncated");
  Mutate(s.dir + "/train-00000.bin", [](std::vector<char>& b) { b.resize(20); });
  ExpectOpenError(s.dir, "train-00000.bin", "truncated");
  Mutate(s.dir + "/train-00000.bin", [](std::vector<char>& b) { b.clear(); });
  ExpectOpenError(s.dir, "train-00000.bin", "truncated");
}

TEST(TokenShards, HugeHeaderCountsAreAStatus) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 1 << 20);
  Mutate(s.dir + "/train-00000.bin", [](std::vector<char>& b) {
    const uint64_t huge = ~uint64_t{0} / 2;
    std::memcpy(b.data() + 16, &huge, 8);
  });
  ExpectOpenError(s.dir, "train-00000.bin", "truncated or corrupt");
}

TEST(TokenShards, FlippedTokenFailsChecksum) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 1 << 20);
  Mutate(s.dir + "/train-00000.bin", [](std::vector<char>& b) { b[kShardHeaderBytes] ^= 1; });
  ExpectOpenError(s.dir, "train-00000.bin", "checksum");
  // Without checksum verification the file still opens (the header and index are intact).
  EXPECT_TRUE(Dataset::Open(s.dir, {.verify_checksums = false}).ok());
}

TEST(TokenShards, DocumentIndexMustPointAtEos) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 1 << 20);
  Mutate(s.dir + "/train-00000.bin", [](std::vector<char>& b) {
    uint64_t first;
    const size_t at = b.size() - 10 * 8;  // the first doc_ends entry
    std::memcpy(&first, b.data() + at, 8);
    first -= 1;
    std::memcpy(b.data() + at, &first, 8);
  });
  ExpectOpenError(s.dir, "train-00000.bin", "does not end with eos_id");
}

TEST(TokenShards, CountMismatchWithManifest) {
  const SyntheticDataset a = WriteSynthetic(1000, 10, 1 << 20);
  const SyntheticDataset b = WriteSynthetic(1000, 11, 1 << 20);
  std::filesystem::copy_file(b.dir + "/train-00000.bin", a.dir + "/train-00000.bin",
                             std::filesystem::copy_options::overwrite_existing);
  ExpectOpenError(a.dir, "train-00000.bin", "count mismatch");
}

TEST(TokenShards, MissingShardAndManifest) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 30);
  std::filesystem::remove(s.dir + "/train-00001.bin");
  ExpectOpenError(s.dir, "train-00001.bin", "cannot open");
  ExpectOpenError(MakeTempDir("empty"), "manifest.json", "cannot open");
}

TEST(TokenShards, ManifestErrorsNameTheField) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 1 << 20);
  std::ifstream in(s.dir + "/manifest.json");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  auto broken = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  auto expect = [](const core::Result<Manifest>& r, const std::string& field) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  };
  expect(ManifestFromJson("{", "m.json"), "not valid JSON");
  expect(ManifestFromJson(broken("\"vocab_size\"", "\"vocab\""), "m.json"), "vocab_size");
  expect(ManifestFromJson(broken("\"uint16\"", "\"int8\""), "m.json"), "dtype");
  expect(ManifestFromJson(broken("\"eos_id\": 2", "\"eos_id\": 5000"), "m.json"), "eos_id");
  expect(ManifestFromJson(broken("\"file\": \"train-00000.bin\"", "\"file\": \"../x\""), "m.json"),
         "shards[0].file");
  expect(ManifestFromJson(broken("\"version\": 1", "\"version\": 9"), "m.json"), "version");
  EXPECT_TRUE(ManifestFromJson(text, "m.json").ok());
}

TEST(TokenShards, WriteIsAtomicNoTempLeft) {
  const SyntheticDataset s = WriteSynthetic(1000, 10, 30);
  for (const auto& entry : std::filesystem::directory_iterator(s.dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
  // Writing into a missing directory fails with a Status naming the path.
  const std::vector<uint32_t> tokens = {3, 2};
  const std::vector<uint64_t> ends = {2};
  core::Status st = WriteShard("/nonexistent-dir/x.bin", TokenDtype::kU16, 10, 2, tokens, ends);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent-dir/x.bin"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pentamesh::data

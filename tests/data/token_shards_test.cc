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

namespace pentamesh::data {
namespace {

// train = [3 3 4 2], heldout = [4 5 2], vocab 6: closed-form unigram numbers.
TEST(Dataset, UnigramStatsAndVocabCheck) {
  const std::string dir = testing::MakeTempDir("unigram");
  Manifest m;
  m.tokenizer_path = "synthetic";
  m.vocab_size = 6;
  m.eos_id = 2;
  const std::vector<uint32_t> train = {3, 3, 4, 2}, heldout = {4, 5, 2};
  const std::vector<uint64_t> train_ends = {4}, heldout_ends = {3};
  ASSERT_TRUE(WriteShard(dir + "/t.bin", TokenDtype::kU16, 6, 2, train, train_ends).ok());
  ASSERT_TRUE(WriteShard(dir + "/h.bin", TokenDtype::kU16, 6, 2, heldout, heldout_ends).ok());
  m.train = {{{"t.bin", 4, 1}}, 4, 1};
  m.heldout = {{{"h.bin", 3, 1}}, 3, 1};
  ASSERT_TRUE(WriteManifest(dir, m).ok());
  auto ds = Dataset::Open(dir);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  const UnigramStats u = ComputeUnigramStats(*ds);
  EXPECT_NEAR(u.train_entropy_nats, 1.5 * std::log(2.0), 1e-12);
  // add-one: p(4) = 2/10, p(5) = 1/10, p(2) = 2/10.
  EXPECT_NEAR(u.heldout_cross_entropy_nats, -(std::log(0.2) + std::log(0.1) + std::log(0.2)) / 3,
              1e-12);
  EXPECT_TRUE(ds->CheckModelVocab(6).ok());
  const core::Status st = ds->CheckModelVocab(8);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model.vocab=8"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pentamesh::data

namespace pentamesh::data {
namespace {

// Exhaustive small-file corruption: every truncation and every single-bit change of the header,
// tokens and padding is a Status from Dataset::Open; changes to the doc index never crash. (Run
// under ASan too.)
TEST(TokenShards, EveryTruncationAndByteFlipIsHandled) {
  const testing::SyntheticDataset s = testing::WriteSynthetic(1000, 6, 1 << 20);
  const std::string path = s.dir + "/train-00000.bin";
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> good((std::istreambuf_iterator<char>(in)), {});
  in.close();
  auto write = [&](const std::vector<char>& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  };
  for (size_t n = 0; n < good.size(); ++n) {
    write({good.begin(), good.begin() + static_cast<int64_t>(n)});
    auto ds = Dataset::Open(s.dir);
    ASSERT_FALSE(ds.ok()) << "truncated to " << n;
    EXPECT_NE(ds.status().message().find(path), std::string::npos) << ds.status().message();
  }
  const size_t index_start = good.size() - 6 * 8;
  for (size_t at = 0; at < good.size(); ++at) {
    for (int bit : {0, 7}) {
      std::vector<char> bad = good;
      bad[at] = static_cast<char>(bad[at] ^ (1 << bit));
      write(bad);
      auto ds = Dataset::Open(s.dir);
      if (at < index_start) {
        ASSERT_FALSE(ds.ok()) << "byte " << at << " bit " << bit;
        EXPECT_NE(ds.status().message().find(path), std::string::npos) << ds.status().message();
      }
    }
  }
  write(good);
  EXPECT_TRUE(Dataset::Open(s.dir).ok());
}

}  // namespace
}  // namespace pentamesh::data

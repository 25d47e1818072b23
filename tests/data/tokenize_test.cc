// Tokenizer training and corpus tokenization on a slice of the real corpus: shards read back
// equal direct encoding, decode(encode(x)) == x, the held-out split is disjoint, no line dropped.
#include "data/tokenize.h"

#include <gtest/gtest.h>

#include <fstream>

#include "data/dataset.h"
#include "data/sampler.h"
#include "data/tokenizer.h"
#include "fixtures.h"

namespace pentamesh::data {
namespace {

using testing::Corpus;

const Tokenizer& Tok() {
  static Tokenizer* tok = [] {
    auto t = Tokenizer::Load(Corpus().model);
    PM_CHECK(t.ok()) << t.status().message();
    return new Tokenizer(std::move(t).value());
  }();
  return *tok;
}

std::vector<int32_t> ReadAll(const Dataset& ds, Split split) {
  std::vector<int32_t> v(ds.tokens(split));
  ds.Read(split, 0, v.size(), v.data());
  return v;
}

TEST(Tokenizer, TrainedOnTheSliceWithoutDroppingLongLines) {
  const auto& c = Corpus();
  EXPECT_EQ(Tok().vocab_size(), 512);
  EXPECT_EQ(Tok().eos_id(), 2);
  ASSERT_GT(c.long_lines, 0) << "the slice should hold the corpus's >4192-byte lines";
  EXPECT_EQ(c.train_stats.lines_split, c.long_lines);
  EXPECT_GT(c.train_stats.sentences, c.train_stats.lines);
  int64_t lines = 0;
  for (const auto& doc : c.docs) lines += static_cast<int64_t>(doc.size());
  EXPECT_EQ(c.train_stats.lines, lines);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(Tokenizer, TrainingIsDeterministic) {
  const auto& c = Corpus();
  const std::string dir = testing::MakeTempDir("tok_det");
  TokenizerTrainOptions t{.inputs = {c.corpus}, .model_prefix = dir + "/tok", .vocab_size = 512};
  ASSERT_TRUE(TrainTokenizer(t).ok());
  // Same pieces with the same scores; the .model differs only in the stored model_prefix.
  EXPECT_EQ(Slurp(dir + "/tok.vocab"), Slurp(c.dir + "/tok.vocab"));
  auto again = Tokenizer::Load(dir + "/tok.model");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Encode(c.docs[3][0]), Tok().Encode(c.docs[3][0]));
}

TEST(Tokenizer, DecodeEncodeRoundTripsEveryLine) {
  int64_t checked = 0;
  for (const auto& doc : Corpus().docs) {
    for (const auto& line : doc) {
      auto text = Tok().Decode(Tok().Encode(line));
      ASSERT_TRUE(text.ok());
      ASSERT_EQ(*text, line);
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
  // Characters the 512-piece vocabulary lacks still round-trip through byte fallback.
  const std::string rare = "Revenue rose 12% to €3.1 billion ☒ — “quoted” 単語";
  EXPECT_EQ(*Tok().Decode(Tok().Encode(rare)), rare);
}

TEST(Tokenizer, ErrorsAreStatuses) {
  auto missing = Tokenizer::Load("/nonexistent/tok.model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/tok.model"), std::string::npos);
  auto not_model = Tokenizer::Load(Corpus().corpus);
  ASSERT_FALSE(not_model.ok());
  EXPECT_NE(not_model.status().message().find("not a SentencePiece model"), std::string::npos);
  EXPECT_FALSE(Tok().Decode({5, 512}).ok());
  EXPECT_FALSE(Tok().Decode({-1}).ok());
}

TEST(Tokenizer, SplitLongLineKeepsBytesAndBoundaries) {
  const std::string line = "alpha beta gamma delta €€€€€€ epsilon";
  for (size_t max : {4, 5, 7, 11, 64}) {
    const auto pieces = SplitLongLine(line, max);
    std::string joined;
    for (auto p : pieces) {
      EXPECT_LE(p.size(), max);
      EXPECT_FALSE(p.empty());
      // Never starts inside a UTF-8 character.
      EXPECT_NE(static_cast<unsigned char>(p[0]) & 0xC0, 0x80);
      joined += p;
    }
    EXPECT_EQ(joined, line);
  }
  EXPECT_EQ(SplitLongLine("alpha beta", 8).front(), "alpha");
}

// Rebuilds both streams by the documented rule and compares them with the shards token by token.
TEST(Tokenize, ShardsReadBackEqualDirectEncoding) {
  const auto& c = Corpus();
  std::vector<int32_t> train, heldout;
  uint64_t line_index = 0;
  for (const auto& doc : c.docs) {
    bool any_train = false, any_heldout = false;
    for (const auto& line : doc) {
      const bool held = IsHeldoutLine(c.tokenize_options.split_seed,
                                      c.tokenize_options.heldout_fraction, line_index++);
      auto& out = held ? heldout : train;
      (held ? any_heldout : any_train) = true;
      for (int id : Tok().Encode(line)) out.push_back(id);
    }
    if (any_train) train.push_back(Tok().eos_id());
    if (any_heldout) heldout.push_back(Tok().eos_id());
  }
  auto ds = Dataset::Open(c.dataset);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_GT(ds->manifest().train.shards.size(), 2u) << "shard_tokens should force several shards";
  EXPECT_EQ(ds->manifest().train.documents, c.docs.size());
  EXPECT_EQ(ds->manifest().vocab_size, 512);
  EXPECT_EQ(ds->manifest().dtype, TokenDtype::kU16);
  EXPECT_EQ(ds->manifest().tokenizer_fnv1a64, *FileFnv1a64(c.model));
  EXPECT_EQ(ReadAll(*ds, Split::kTrain), train);
  EXPECT_EQ(ReadAll(*ds, Split::kHeldout), heldout);
}

TEST(Tokenize, HeldoutIsDisjointAndNearTheFraction) {
  const auto& c = Corpus();
  uint64_t held = 0, total = 0;
  std::set<std::string> train_lines, heldout_lines;
  for (const auto& doc : c.docs) {
    for (const auto& line : doc) {
      const bool h = IsHeldoutLine(7, 0.05, total++);
      held += h ? 1 : 0;
      (h ? heldout_lines : train_lines).insert(line);
    }
  }
  const double fraction = static_cast<double>(held) / static_cast<double>(total);
  EXPECT_NEAR(fraction, 0.05, 0.015) << held << " of " << total;
  EXPECT_FALSE(IsHeldoutLine(7, 0.0, 3));
  // Disjoint by line index by construction; identical text can recur (boilerplate rows), but
  // most held-out paragraphs must be unseen in train.
  int64_t unseen = 0;
  for (const auto& line : heldout_lines) unseen += train_lines.count(line) == 0 ? 1 : 0;
  EXPECT_GT(unseen, static_cast<int64_t>(heldout_lines.size()) / 2);
  auto ds = Dataset::Open(c.dataset);
  ASSERT_TRUE(ds.ok());
  EXPECT_GT(ds->tokens(Split::kHeldout), 1000u);
  EXPECT_GT(ds->tokens(Split::kTrain), 20 * ds->tokens(Split::kHeldout) / 2);
}

// Thread count and shard size change neither the streams nor (for equal shard size) the bytes.
TEST(Tokenize, OutputIndependentOfThreadsAndShardSize) {
  const auto& c = Corpus();
  const std::string dir = testing::MakeTempDir("tok_threads");
  TokenizeOptions o = c.tokenize_options;
  o.output_dir = dir + "/t1";
  o.num_threads = 1;
  ASSERT_TRUE(TokenizeCorpus(o).ok());
  o.output_dir = dir + "/t3";
  o.num_threads = 3;
  ASSERT_TRUE(TokenizeCorpus(o).ok());
  o.output_dir = dir + "/big";
  o.shard_tokens = 1 << 24;
  ASSERT_TRUE(TokenizeCorpus(o).ok());
  for (const auto& entry : std::filesystem::directory_iterator(c.dataset)) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(Slurp(dir + "/t1/" + name), Slurp(entry.path().string())) << name;
    EXPECT_EQ(Slurp(dir + "/t3/" + name), Slurp(entry.path().string())) << name;
  }
  auto small = Dataset::Open(c.dataset);
  auto big = Dataset::Open(dir + "/big");
  ASSERT_TRUE(small.ok() && big.ok());
  EXPECT_EQ(big->manifest().train.shards.size(), 1u);
  EXPECT_EQ(ReadAll(*big, Split::kTrain), ReadAll(*small, Split::kTrain));
  EXPECT_EQ(ReadAll(*big, Split::kHeldout), ReadAll(*small, Split::kHeldout));
}

TEST(Tokenize, DatasetRecognisesItsTokenizer) {
  const auto& c = Corpus();
  auto ds = Dataset::Open(c.dataset);
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE(ds->CheckTokenizer(c.model).ok());
  const core::Status st = ds->CheckTokenizer(c.corpus);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("checksum"), std::string::npos) << st.message();
  EXPECT_FALSE(ds->CheckTokenizer("/nonexistent.model").ok());
}

// The sampler on real shards: every row is the documented window of the train stream, and
// documents' eos tokens appear inside sequences (packing across document boundaries).
TEST(Tokenize, SamplerRowsAreWindowsOfTheRealStream) {
  auto ds = Dataset::Open(Corpus().dataset);
  ASSERT_TRUE(ds.ok());
  const std::vector<int32_t> stream = ReadAll(*ds, Split::kTrain);
  auto sampler = Sampler::Create(*ds, {.seq_len = 64, .global_batch_seqs = 8, .seed = 3});
  ASSERT_TRUE(sampler.ok()) << sampler.status().message();
  int64_t eos_seen = 0;
  const uint64_t windows = sampler->windows_per_epoch();
  EXPECT_EQ(windows, (stream.size() - 1) / 64);
  for (uint64_t step = 0; step < windows / 8; ++step) {
    const Batch b = sampler->Next();
    for (int64_t row = 0; row < 8; ++row) {
      const uint64_t w = GlobalWindow(3, true, windows, b.first_sequence + row);
      for (int64_t t = 0; t < 64; ++t) {
        ASSERT_EQ(b.tokens[row * 64 + t], stream[w * 64 + t]);
        ASSERT_EQ(b.targets[row * 64 + t], stream[w * 64 + t + 1]);
        eos_seen += b.targets[row * 64 + t] == Tok().eos_id() ? 1 : 0;
      }
    }
  }
  // Nearly one epoch: almost every document's eos is a target somewhere.
  EXPECT_GT(eos_seen, static_cast<int64_t>(ds->manifest().train.documents) / 2);
}

TEST(Tokenize, ErrorsNameTheFlag) {
  const auto& c = Corpus();
  auto expect = [](TokenizeOptions o, const std::string& flag) {
    auto r = TokenizeCorpus(o);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_NE(r.status().message().find(flag), std::string::npos) << r.status().message();
  };
  const std::string out = testing::MakeTempDir("tok_err");
  expect({.inputs = {c.corpus}, .model_path = c.model, .output_dir = out, .num_threads = 0},
         "--threads");
  expect({.inputs = {"/nonexistent.txt"}, .model_path = c.model, .output_dir = out}, "--input");
  expect({.inputs = {c.corpus}, .model_path = c.model, .output_dir = out, .heldout_fraction = 1.5},
         "--heldout-fraction");
  expect({.inputs = {c.corpus}, .model_path = c.model, .output_dir = out, .shard_tokens = 5},
         "--shard-tokens");
  expect({.inputs = {c.corpus}, .model_path = "/nonexistent.model", .output_dir = out},
         "/nonexistent.model");
  TokenizerTrainOptions t{.inputs = {c.corpus}, .model_prefix = out + "/t", .vocab_size = 100};
  auto r = TrainTokenizer(t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--vocab-size"), std::string::npos);
}

}  // namespace
}  // namespace pentamesh::data

namespace pentamesh::data {
namespace {

// Re-tokenizing into a directory replaces the dataset; a stale manifest never survives a rerun,
// even one that fails halfway.
TEST(Tokenize, RerunReplacesTheDataset) {
  const auto& c = testing::Corpus();
  const std::string dir = testing::MakeTempDir("tok_rerun");
  TokenizeOptions o = c.tokenize_options;
  o.output_dir = dir;
  ASSERT_TRUE(TokenizeCorpus(o).ok());
  o.heldout_fraction = 0.2;
  o.inputs = {"/nonexistent.txt"};
  ASSERT_FALSE(TokenizeCorpus(o).ok());  // fails before touching the directory
  EXPECT_TRUE(Dataset::Open(dir).ok());
  o.inputs = c.tokenize_options.inputs;
  ASSERT_TRUE(TokenizeCorpus(o).ok());
  auto ds = Dataset::Open(dir);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_DOUBLE_EQ(ds->manifest().heldout_fraction, 0.2);

  // A run that dies after writing some shards (here: the second shard cannot be renamed into
  // place) leaves no manifest, so the half-replaced directory is not mistaken for a dataset.
  std::filesystem::remove(dir + "/train-00001.bin");
  std::filesystem::create_directories(dir + "/train-00001.bin/blocker");
  o.heldout_fraction = 0.05;
  auto failed = TokenizeCorpus(o);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("train-00001.bin"), std::string::npos)
      << failed.status().message();
  auto gone = Dataset::Open(dir);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("manifest.json"), std::string::npos);
}

}  // namespace
}  // namespace pentamesh::data

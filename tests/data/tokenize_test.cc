// Tokenizer training and corpus tokenization on a slice of the real corpus: shards read back
// equal direct encoding, decode(encode(x)) == x, the held-out split is disjoint, no line dropped.
#include "data/tokenize.h"

#include <gtest/gtest.h>

#include <fstream>

#include "data/dataset.h"
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

TEST(Tokenize, ErrorsNameTheFlag) {
  const auto& c = Corpus();
  auto expect = [](TokenizeOptions o, const std::string& flag) {
    auto r = TokenizeCorpus(o);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_NE(r.status().message().find(flag), std::string::npos) << r.status().message();
  };
  const std::string out = testing::MakeTempDir("tok_err");
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

// Test fixtures. (1) A synthetic dataset written directly with WriteShard/WriteManifest, whose
// stream is known exactly. (2) A small slice of the real corpus (see CorpusPath) with its
// document structure kept, a tiny BPE tokenizer trained on it, and the slice tokenized into
// shards. Built once per test process (training takes well under a second).
// Invariant: the slice keeps every document (first ~4 KB of lines each) and all lines longer than
// SentencePiece's 4,192-byte default, so the long-line path is exercised.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "data/dataset.h"
#include "data/token_shards.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "data/xz_text.h"
#include "testing/temp_dir.h"

namespace pentamesh::data::testing {

// The corpus as plain text: $PM_CORPUS, else the repository's data/finance_corpus.txt.xz unpacked
// (data::UnpackedText) once per test process into a temporary directory.
inline std::string CorpusPath() {
  if (const char* env = std::getenv("PM_CORPUS")) return env;
  static const std::string path = [] {
    auto text = UnpackedText(std::string(PM_SOURCE_DIR) + "/data/finance_corpus.txt.xz",
                             pentamesh::testing::MakeTempDir("corpus"), "corpus");
    PM_CHECK(text.ok()) << text.status().message();
    return *text;
  }();
  return path;
}

// A fresh directory under $TMPDIR, removed when the test binary exits (testing/temp_dir.h).
using pentamesh::testing::MakeTempDir;

// Writes a dataset of synthetic documents (doc d = d+3 tokens 3..., then eos=2) directly.
struct SyntheticDataset {
  std::string dir;
  std::vector<uint32_t> train_stream;
};

inline SyntheticDataset WriteSynthetic(uint32_t vocab, int docs, uint64_t shard_tokens) {
  SyntheticDataset s{MakeTempDir("shards"), {}};
  std::vector<uint64_t> ends;
  for (int d = 0; d < docs; ++d) {
    for (int t = 0; t < d + 3; ++t) s.train_stream.push_back(3 + (d * 7 + t) % (vocab - 3));
    s.train_stream.push_back(2);
  }
  Manifest m;
  m.tokenizer_path = "synthetic";
  m.vocab_size = vocab;
  m.eos_id = 2;
  m.dtype = TokenDtypeForVocab(vocab);
  for (uint64_t start = 0; start < s.train_stream.size(); start += shard_tokens) {
    const uint64_t n = std::min<uint64_t>(shard_tokens, s.train_stream.size() - start);
    std::vector<uint64_t> doc_ends;
    for (uint64_t i = 0; i < n; ++i) {
      if (s.train_stream[start + i] == 2) doc_ends.push_back(i + 1);
    }
    ShardEntry e{fmt::format("train-{:05d}.bin", m.train.shards.size()), n, doc_ends.size()};
    EXPECT_TRUE(WriteShard(s.dir + "/" + e.file, m.dtype, vocab, 2,
                           {s.train_stream.data() + start, n}, doc_ends)
                    .ok());
    m.train.tokens += n;
    m.train.documents += doc_ends.size();
    m.train.shards.push_back(e);
  }
  EXPECT_TRUE(WriteManifest(s.dir, m).ok());
  return s;
}

// Documents of the slice, each a list of lines.
using Docs = std::vector<std::vector<std::string>>;

inline Docs ReadSliceDocs(const std::string& corpus, size_t bytes_per_doc) {
  std::ifstream in(corpus);
  Docs docs(1);
  size_t doc_bytes = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) {
      docs.emplace_back();
      doc_bytes = 0;
      continue;
    }
    if (doc_bytes < bytes_per_doc || line.size() > 4192) {
      docs.back().push_back(line);
      doc_bytes += line.size() + 1;
    }
  }
  if (docs.back().empty()) docs.pop_back();
  return docs;
}

struct CorpusFixture {
  std::string dir;
  std::string corpus;   // the slice as a text file
  std::string model;    // tokenizer .model
  std::string dataset;  // tokenized slice
  Docs docs;
  int64_t long_lines = 0;  // lines > 4192 bytes in the slice
  TokenizerTrainStats train_stats;
  TokenizeOptions tokenize_options;
};

// Builds the fixture once; aborts the test binary (with a message) if the corpus is missing.
inline const CorpusFixture& Corpus() {
  static const CorpusFixture* fixture = [] {
    auto* f = new CorpusFixture;
    f->dir = MakeTempDir("data_test");
    f->docs = ReadSliceDocs(CorpusPath(), 4096);
    if (f->docs.size() < 10) {
      ADD_FAILURE() << "corpus " << CorpusPath() << " missing or too small";
      std::abort();
    }
    f->corpus = f->dir + "/slice.txt";
    std::ofstream out(f->corpus);
    for (size_t d = 0; d < f->docs.size(); ++d) {
      if (d > 0) out << "\n";
      for (const auto& line : f->docs[d]) {
        out << line << "\n";
        f->long_lines += line.size() > 4192 ? 1 : 0;
      }
    }
    out.close();
    TokenizerTrainOptions t{
        .inputs = {f->corpus}, .model_prefix = f->dir + "/tok", .vocab_size = 512};
    auto stats = TrainTokenizer(t);
    if (!stats.ok()) {
      ADD_FAILURE() << stats.status().message();
      std::abort();
    }
    f->train_stats = *stats;
    f->model = f->dir + "/tok.model";
    f->dataset = f->dir + "/shards";
    f->tokenize_options = {.inputs = {f->corpus},
                           .model_path = f->model,
                           .output_dir = f->dataset,
                           .heldout_fraction = 0.05,
                           .split_seed = 7,
                           .shard_tokens = 20000};
    auto tstats = TokenizeCorpus(f->tokenize_options);
    if (!tstats.ok()) {
      ADD_FAILURE() << tstats.status().message();
      std::abort();
    }
    return f;
  }();
  return *fixture;
}

}  // namespace pentamesh::data::testing

// Corpus -> token shards: streams text files through a Tokenizer and writes the train and
// heldout splits as token shards plus manifest.json (docs/data_format.md).
//
// Documents: a document is a run of non-empty lines; an empty line (or the end of a file) ends
// it. This is the corpus's own rule (finance_corpus.txt: documents separated by exactly one empty
// line). Each line (a paragraph or table row) is encoded on its own; a document's tokens are its
// lines' tokens in order, then eos_id. SentencePiece's word-boundary prefix makes the lines decode
// joined by a space.
//
// Held-out split: line k (counting non-empty lines from 0 over all inputs) goes to heldout iff
// Mix(split_seed, k) / 2^64 < heldout_fraction. The lines of one document that land in a split
// stay together, in order, as that split's version of the document (ended by eos_id); a document
// with no lines in a split adds nothing to it. So train and heldout are disjoint by line.
//
// Memory: one block of lines (2,048 non-empty lines, encoded on num_threads threads) plus at
// most shard_tokens tokens per split are held at any time, so a corpus larger than memory works.
// Shards and the manifest are written atomically (temp + rename); an old manifest in output_dir
// is deleted before the first shard and the new one is written last, so a crash leaves either no
// dataset or a complete one (unlisted shards of an earlier run may remain).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace pentamesh::data {

struct TokenizeOptions {
  std::vector<std::string> inputs;  // text files, read in order
  std::string model_path;           // SentencePiece .model
  std::string output_dir;           // created if missing
  double heldout_fraction = 0.01;   // in [0, 1)
  uint64_t split_seed = 1234;
  int64_t shard_tokens = int64_t{1} << 24;  // tokens per shard (64 MiB buffer per split)
  int num_threads = 2;                      // encode threads; the output does not depend on it
};

struct TokenizeStats {
  int64_t lines = 0;      // non-empty lines read
  int64_t documents = 0;  // documents read
  int64_t bytes = 0;      // input bytes read
  uint64_t train_tokens = 0;
  uint64_t heldout_tokens = 0;
  int64_t shards = 0;
  double seconds = 0;
};

core::Result<TokenizeStats> TokenizeCorpus(const TokenizeOptions& options);

// True iff non-empty line number `line_index` belongs to the heldout split.
bool IsHeldoutLine(uint64_t split_seed, double heldout_fraction, uint64_t line_index);

}  // namespace pentamesh::data

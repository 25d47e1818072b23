// SentencePiece BPE tokenizer: training from streamed text files, and encode/decode.
// Invariant: training never drops a line. SentencePiece skips sentences longer than
// max_sentence_length bytes; we split such lines at spaces (or, failing that, at a UTF-8
// character boundary) into pieces within the limit before the trainer sees them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pentamesh::data {

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;  // text files; one sentence (paragraph) per line
  std::string model_prefix;         // writes <prefix>.model and <prefix>.vocab
  int vocab_size = 8000;            // > 259 with byte_fallback (256 bytes + unk/bos/eos)
  int max_sentence_length = 4192;   // bytes; longer lines are split, never dropped
  int num_threads = 2;
  int64_t input_sentence_size = 0;  // > 0: train on a random sample of this many lines
  double character_coverage = 0.9995;
  bool byte_fallback = true;               // unknown characters become byte tokens, not <unk>
  std::string normalization = "identity";  // identity keeps text exact; nmt_nfkc normalises
  uint32_t seed = 1234;  // SentencePiece's RNG (sampling when input_sentence_size > 0)
  bool verbose = false;  // SentencePiece's INFO log (hundreds of lines)
};

struct TokenizerTrainStats {
  int64_t lines = 0;        // non-empty input lines
  int64_t lines_split = 0;  // lines longer than max_sentence_length, split into pieces
  int64_t sentences = 0;    // what the trainer received
  int64_t bytes = 0;
  double seconds = 0;
};

// Streams the inputs line by line into SentencePiece's BPE trainer. Errors name the flag or file
// (inputs without a single non-empty line are refused as such).
core::Result<TokenizerTrainStats> TrainTokenizer(const TokenizerTrainOptions& options);

// True when the file at `path` can be read and holds a line with a character other than
// whitespace (reads only up to the first such line).
bool HasText(const std::string& path);

// Splits `line` into pieces of at most max_bytes bytes, preferring to cut before a space and
// never inside a UTF-8 character. Concatenating the pieces gives back `line`.
std::vector<std::string_view> SplitLongLine(std::string_view line, size_t max_bytes);

// A loaded model. Move-only. Encode/Decode are const and thread-compatible.
class Tokenizer {
 public:
  static core::Result<Tokenizer> Load(const std::string& model_path);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  int vocab_size() const;
  int eos_id() const;  // the end-of-document token (SentencePiece's </s>)
  const std::string& path() const { return path_; }

  // Appends the ids of `text` to `ids`.
  void Encode(std::string_view text, std::vector<int>* ids) const;
  std::vector<int> Encode(std::string_view text) const;
  // Errors if an id is outside [0, vocab_size).
  core::Result<std::string> Decode(const std::vector<int>& ids) const;

 private:
  Tokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string path_;
};

}  // namespace pentamesh::data

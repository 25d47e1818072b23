// SentencePiece wrappers: a streaming SentenceIterator over text files for training, and the
// processor for encode/decode. Invariant: every non-empty input byte reaches the trainer.
#include "data/tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/check.h"
#include "core/input.h"
#include "data/xz_text.h"

// Exported by libsentencepiece 0.1.97 but not declared in its public headers.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace pentamesh::data {

using core::Result;
using core::Status;

std::vector<std::string_view> SplitLongLine(std::string_view line, size_t max_bytes) {
  PM_CHECK(max_bytes >= 4) << max_bytes;
  std::vector<std::string_view> pieces;
  while (line.size() > max_bytes) {
    size_t cut = line.rfind(' ', max_bytes);  // the space starts the next piece
    if (cut == std::string_view::npos || cut == 0) {
      cut = max_bytes;  // no space: back up to a UTF-8 lead byte
      while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
      if (cut == 0) cut = max_bytes;
    }
    pieces.push_back(line.substr(0, cut));
    line.remove_prefix(cut);
  }
  if (!line.empty()) pieces.push_back(line);
  return pieces;
}

namespace {

// Streams non-empty lines of the input files, splitting those over the limit.
class FileLineIterator : public sentencepiece::SentenceIterator {
 public:
  FileLineIterator(const std::vector<std::string>& paths, size_t max_bytes,
                   TokenizerTrainStats* stats)
      : paths_(paths), max_bytes_(max_bytes), stats_(stats) {
    Next();
  }
  bool done() const override { return done_; }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }

  void Next() override {
    if (!pending_.empty()) return Emit();
    while (true) {
      if (!in_.is_open()) {
        if (file_ == paths_.size()) {
          done_ = true;
          return;
        }
        in_.open(paths_[file_]);
        if (!in_) {
          status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound,
                                                "cannot open " + paths_[file_]);
          done_ = true;
          return;
        }
      }
      if (!std::getline(in_, line_)) {
        in_.close();
        ++file_;
        continue;
      }
      if (line_.empty()) continue;
      ++stats_->lines;
      stats_->bytes += static_cast<int64_t>(line_.size()) + 1;
      for (std::string_view piece : SplitLongLine(line_, max_bytes_)) {
        pending_.emplace_back(piece);
      }
      if (pending_.size() > 1) ++stats_->lines_split;
      return Emit();
    }
  }

 private:
  void Emit() {
    value_ = std::move(pending_.front());
    pending_.erase(pending_.begin());
    ++stats_->sentences;
  }

  std::vector<std::string> paths_;
  size_t max_bytes_;
  TokenizerTrainStats* stats_;
  size_t file_ = 0;
  std::ifstream in_;
  std::string line_, value_;
  std::vector<std::string> pending_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

Status CheckTrainOptions(const TokenizerTrainOptions& o) {
  if (o.inputs.empty()) return Status::Error("tokenizer train: --input: at least one file needed");
  for (const auto& path : o.inputs) {
    if (!std::filesystem::is_regular_file(path)) {
      return Status::Error(
          fmt::format("tokenizer train: --input: '{}' is not a readable file", path));
    }
  }
  if (o.model_prefix.empty()) return Status::Error("tokenizer train: --model-prefix: empty");
  const int min_vocab = o.byte_fallback ? 260 : 4;
  if (o.vocab_size < min_vocab) {
    return Status::Error(fmt::format("tokenizer train: --vocab-size: {} must be >= {}{}",
                                     o.vocab_size, min_vocab,
                                     o.byte_fallback ? " (256 byte tokens + unk/bos/eos)" : ""));
  }
  if (o.max_sentence_length < 16) {
    return Status::Error(fmt::format("tokenizer train: --max-sentence-length: {} must be >= 16",
                                     o.max_sentence_length));
  }
  if (o.num_threads < 1) return Status::Error("tokenizer train: --threads: must be >= 1");
  if (!(o.character_coverage > 0 && o.character_coverage <= 1)) {
    return Status::Error(fmt::format("tokenizer train: --character-coverage: {} must be in (0, 1]",
                                     o.character_coverage));
  }
  const std::vector<std::string> rules = {"identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf"};
  if (std::find(rules.begin(), rules.end(), o.normalization) == rules.end()) {
    return Status::Error(fmt::format(
        "tokenizer train: --normalization: '{}' is not one of identity, nmt_nfkc, nfkc, "
        "nmt_nfkc_cf, nfkc_cf",
        o.normalization));
  }
  if (o.input_sentence_size < 0) {
    return Status::Error("tokenizer train: --input-sentence-size: must be >= 0");
  }
  return Status::Ok();
}

}  // namespace

Result<TokenizerTrainStats> TrainTokenizer(const TokenizerTrainOptions& options) {
  PM_RETURN_IF_ERROR(CheckTrainOptions(options));
  const auto parent = std::filesystem::path(options.model_prefix).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent)) {
    return Status::Error(
        fmt::format("tokenizer train: --model-prefix: directory '{}' does not "
                    "exist",
                    parent.string()));
  }
  TokenizerTrainOptions o = options;  // .xz inputs read from their unpacked copies beside the model
  PM_ASSIGN_OR_RETURN(o.inputs,
                      UnpackedTexts(options.inputs, parent.empty() ? "." : parent.string(),
                                    "tokenizer train: --input"));
  for (const std::string& input : o.inputs) {  // regular files within the limit (core/input.h)
    if (Status st = core::CheckInputFile(input, core::kMaxDataFileBytes, "corpus file"); !st.ok()) {
      return Status::Error("tokenizer train: --input: " + st.message());
    }
  }
  // Refused here, before SentencePiece's own (internal-sounding) complaint.
  if (std::none_of(o.inputs.begin(), o.inputs.end(), HasText)) {
    return Status::Error(
        fmt::format("tokenizer train: --input: {} holds no text (no line with a visible character)",
                    fmt::join(o.inputs, ", ")));
  }
  TokenizerTrainStats stats;
  const auto start = std::chrono::steady_clock::now();
  FileLineIterator lines(o.inputs, static_cast<size_t>(o.max_sentence_length), &stats);
  const std::unordered_map<std::string, std::string> args = {
      {"model_prefix", o.model_prefix},
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"max_sentence_length", std::to_string(o.max_sentence_length)},
      {"num_threads", std::to_string(o.num_threads)},
      {"input_sentence_size", std::to_string(o.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"character_coverage", fmt::format("{}", o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"normalization_rule_name", o.normalization},
      {"hard_vocab_limit", "true"},
  };
  sentencepiece::SetRandomGeneratorSeed(o.seed);              // else seeded from std::random_device
  sentencepiece::logging::SetMinLogLevel(o.verbose ? 0 : 1);  // 1: warnings and errors only
  const sentencepiece::util::Status st = sentencepiece::SentencePieceTrainer::Train(args, &lines);
  if (!st.ok()) {
    return Status::Error(fmt::format("tokenizer train: SentencePiece failed: {}", st.ToString()));
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

bool HasText(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r\f\v") != std::string::npos) return true;
  }
  return false;
}

Tokenizer::Tokenizer() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::Load(const std::string& model_path) {
  Tokenizer tok;
  tok.path_ = model_path;
  if (!std::filesystem::is_regular_file(model_path)) {
    return Status::Error(fmt::format("{}: tokenizer model not found", model_path));
  }
  PM_RETURN_IF_ERROR(core::CheckInputFile(model_path, core::kMaxDataFileBytes, "tokenizer model"));
  const auto st = tok.processor_->Load(model_path);
  if (!st.ok()) {
    return Status::Error(
        fmt::format("{}: not a SentencePiece model: {}", model_path, st.ToString()));
  }
  if (tok.processor_->eos_id() < 0) {
    return Status::Error(fmt::format("{}: the model has no </s> (eos) piece", model_path));
  }
  return tok;
}

int Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }
int Tokenizer::eos_id() const { return processor_->eos_id(); }

void Tokenizer::Encode(std::string_view text, std::vector<int>* ids) const {
  std::vector<int> piece_ids;
  const auto st = processor_->Encode(text, &piece_ids);
  PM_CHECK(st.ok()) << st.ToString();  // encode fails only on an unloaded model
  ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
}

std::vector<int> Tokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  Encode(text, &ids);
  return ids;
}

Result<std::string> Tokenizer::Decode(const std::vector<int>& ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return Status::Error(
          fmt::format("decode: id {} at {} is outside [0, {})", ids[i], i, vocab_size()));
    }
  }
  std::string text;
  const auto st = processor_->Decode(ids, &text);
  if (!st.ok()) return Status::Error("decode: " + st.ToString());
  return text;
}

}  // namespace pentamesh::data

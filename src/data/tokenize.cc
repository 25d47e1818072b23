// Streaming corpus tokenization into train/heldout shards. Invariant: each split's stream is
// exactly "for each document: its lines' tokens in that split, then eos_id" (see tokenize.h).
#include "data/tokenize.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "data/dataset.h"
#include "data/tokenizer.h"

namespace pentamesh::data {

using core::Result;
using core::Status;

bool IsHeldoutLine(uint64_t split_seed, double heldout_fraction, uint64_t line_index) {
  if (heldout_fraction <= 0) return false;
  uint64_t x = split_seed * 0x9e3779b97f4a7c15ULL + line_index + 0x632be59bd9b4e019ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  // Top 53 bits as a double in [0, 1).
  return static_cast<double>(x >> 11) * 0x1.0p-53 < heldout_fraction;
}

namespace {

// Buffers one split's tokens and flushes a shard every shard_tokens tokens.
class SplitWriter {
 public:
  SplitWriter(Split split, const TokenizeOptions& o, TokenDtype dtype, uint32_t vocab, uint32_t eos)
      : split_(split), options_(o), dtype_(dtype), vocab_(vocab), eos_(eos) {}

  void AddTokens(const std::vector<int>& ids) {
    for (int id : ids) tokens_.push_back(static_cast<uint32_t>(id));
    doc_open_ = doc_open_ || !ids.empty();
  }
  // Ends the current document (adds eos_id) if it received any token.
  void EndDocument() {
    if (!doc_open_) return;
    tokens_.push_back(eos_);
    doc_ends_.push_back(tokens_.size());
    doc_open_ = false;
  }
  // Writes full shards; with `final` also the remainder.
  Status Flush(bool final) {
    const auto limit = static_cast<size_t>(options_.shard_tokens);
    while (tokens_.size() >= limit || (final && !tokens_.empty())) {
      const size_t n = std::min(tokens_.size(), limit);
      size_t docs = 0;
      while (docs < doc_ends_.size() && doc_ends_[docs] <= n) ++docs;
      ShardEntry entry{fmt::format("{}-{:05d}.bin", SplitName(split_), entry_.shards.size()), n,
                       docs};
      PM_RETURN_IF_ERROR(WriteShard(options_.output_dir + "/" + entry.file, dtype_, vocab_, eos_,
                                    {tokens_.data(), n}, {doc_ends_.data(), docs}));
      tokens_.erase(tokens_.begin(), tokens_.begin() + static_cast<int64_t>(n));
      doc_ends_.erase(doc_ends_.begin(), doc_ends_.begin() + static_cast<int64_t>(docs));
      for (uint64_t& end : doc_ends_) end -= n;
      entry_.tokens += entry.tokens;
      entry_.documents += entry.documents;
      entry_.shards.push_back(std::move(entry));
    }
    return Status::Ok();
  }
  const SplitEntry& entry() const { return entry_; }

 private:
  Split split_;
  const TokenizeOptions& options_;
  TokenDtype dtype_;
  uint32_t vocab_, eos_;
  std::vector<uint32_t> tokens_;
  std::vector<uint64_t> doc_ends_;
  bool doc_open_ = false;
  SplitEntry entry_;
};

Status CheckOptions(const TokenizeOptions& o) {
  if (o.inputs.empty()) return Status::Error("tokenize: --input: at least one file needed");
  for (const auto& path : o.inputs) {
    if (!std::filesystem::is_regular_file(path)) {
      return Status::Error(fmt::format("tokenize: --input: '{}' is not a readable file", path));
    }
  }
  if (!(o.heldout_fraction >= 0 && o.heldout_fraction < 1)) {
    return Status::Error(
        fmt::format("tokenize: --heldout-fraction: {} must be in [0, 1)", o.heldout_fraction));
  }
  if (o.shard_tokens < 1024) {
    return Status::Error(
        fmt::format("tokenize: --shard-tokens: {} must be >= 1024", o.shard_tokens));
  }
  if (o.output_dir.empty()) return Status::Error("tokenize: --output: empty");
  return Status::Ok();
}

}  // namespace

Result<TokenizeStats> TokenizeCorpus(const TokenizeOptions& o) {
  PM_RETURN_IF_ERROR(CheckOptions(o));
  PM_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load(o.model_path));
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) {
    return Status::Error(
        fmt::format("tokenize: --output: cannot create '{}': {}", o.output_dir, ec.message()));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto vocab = static_cast<uint32_t>(tok.vocab_size());
  const auto eos = static_cast<uint32_t>(tok.eos_id());
  const TokenDtype dtype = TokenDtypeForVocab(vocab);
  SplitWriter train(Split::kTrain, o, dtype, vocab, eos);
  SplitWriter heldout(Split::kHeldout, o, dtype, vocab, eos);
  TokenizeStats stats;
  std::string line;
  std::vector<int> ids;
  bool in_doc = false;
  auto end_document = [&]() {
    if (in_doc) ++stats.documents;
    in_doc = false;
    train.EndDocument();
    heldout.EndDocument();
  };
  for (const auto& path : o.inputs) {
    std::ifstream in(path);
    if (!in) return Status::Error(fmt::format("tokenize: --input: cannot open '{}'", path));
    while (std::getline(in, line)) {
      stats.bytes += static_cast<int64_t>(line.size()) + 1;
      if (line.empty()) {
        end_document();
        continue;
      }
      in_doc = true;
      ids.clear();
      tok.Encode(line, &ids);
      const bool held =
          IsHeldoutLine(o.split_seed, o.heldout_fraction, static_cast<uint64_t>(stats.lines));
      (held ? heldout : train).AddTokens(ids);
      ++stats.lines;
      PM_RETURN_IF_ERROR((held ? heldout : train).Flush(/*final=*/false));
    }
    if (in.bad()) return Status::Error(fmt::format("tokenize: --input: read error in '{}'", path));
    end_document();  // a file's end ends its last document
  }
  PM_RETURN_IF_ERROR(train.Flush(/*final=*/true));
  PM_RETURN_IF_ERROR(heldout.Flush(/*final=*/true));

  Manifest m;
  m.tokenizer_path = std::filesystem::absolute(o.model_path).string();
  PM_ASSIGN_OR_RETURN(m.tokenizer_fnv1a64, FileFnv1a64(o.model_path));
  m.vocab_size = vocab;
  m.eos_id = static_cast<int32_t>(eos);
  m.dtype = dtype;
  m.heldout_fraction = o.heldout_fraction;
  m.split_seed = o.split_seed;
  m.document_rule =
      "non-empty lines up to an empty line or end of file; lines encoded "
      "separately; eos_id after each document";
  m.inputs = o.inputs;
  m.train = train.entry();
  m.heldout = heldout.entry();
  PM_RETURN_IF_ERROR(WriteManifest(o.output_dir, m));

  stats.train_tokens = m.train.tokens;
  stats.heldout_tokens = m.heldout.tokens;
  stats.shards = static_cast<int64_t>(m.train.shards.size() + m.heldout.shards.size());
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace pentamesh::data

// Streaming corpus tokenization into train/heldout shards. Invariant: each split's stream is
// exactly "for each document: its lines' tokens in that split, then eos_id" (see tokenize.h).
#include "data/tokenize.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/check.h"
#include "core/input.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "data/xz_text.h"

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
  if (o.num_threads < 1 || o.num_threads > 256) {
    return Status::Error(fmt::format("tokenize: --threads: {} must be in [1, 256]", o.num_threads));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Non-empty lines read and encoded per block: bounds memory and feeds the encode threads.
constexpr size_t kBlockLines = 2048;

// ids[i] = encoding of lines[i] (empty for an empty line), on up to `threads` threads, each a
// contiguous range of lines. The result does not depend on the thread count.
void EncodeBlock(const Tokenizer& tok, const std::vector<std::string>& lines,
                 std::vector<std::vector<int>>& ids, int threads) {
  ids.resize(lines.size());
  auto encode = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      ids[i].clear();
      if (!lines[i].empty()) tok.Encode(lines[i], &ids[i]);
    }
  };
  const size_t n = lines.size();
  const auto workers = static_cast<size_t>(std::max(1, threads));
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers && n >= 64; ++w) {
    pool.emplace_back(encode, n * w / workers, n * (w + 1) / workers);
  }
  encode(0, pool.empty() ? n : n / workers);
  for (auto& t : pool) t.join();
}

// Routes encoded lines to the two splits and counts documents.
class CorpusWriter {
 public:
  CorpusWriter(const TokenizeOptions& o, TokenDtype dtype, uint32_t vocab, uint32_t eos,
               TokenizeStats* stats)
      : options_(o),
        stats_(stats),
        train_(Split::kTrain, o, dtype, vocab, eos),
        heldout_(Split::kHeldout, o, dtype, vocab, eos) {}

  Status AddLine(const std::vector<int>& ids) {
    const bool held = IsHeldoutLine(options_.split_seed, options_.heldout_fraction,
                                    static_cast<uint64_t>(stats_->lines));
    ++stats_->lines;
    in_doc_ = true;
    SplitWriter& w = held ? heldout_ : train_;
    w.AddTokens(ids);
    return w.Flush(/*final=*/false);
  }
  void EndDocument() {
    if (in_doc_) ++stats_->documents;
    in_doc_ = false;
    train_.EndDocument();
    heldout_.EndDocument();
  }
  Status Finish() {
    EndDocument();
    PM_RETURN_IF_ERROR(train_.Flush(/*final=*/true));
    return heldout_.Flush(/*final=*/true);
  }
  const SplitEntry& train() const { return train_.entry(); }
  const SplitEntry& heldout() const { return heldout_.entry(); }

 private:
  const TokenizeOptions& options_;
  TokenizeStats* stats_;
  SplitWriter train_, heldout_;
  bool in_doc_ = false;
};

// Streams one file in blocks of lines; the file's end ends its last document.
Status TokenizeFile(const std::string& path, const Tokenizer& tok, const TokenizeOptions& o,
                    CorpusWriter& writer, TokenizeStats& stats) {
  if (Status st = core::CheckInputFile(path, core::kMaxDataFileBytes, "corpus file"); !st.ok()) {
    return Status::Error("tokenize: --input: " + st.message());
  }
  std::ifstream in(path);
  if (!in) return Status::Error(fmt::format("tokenize: --input: cannot open '{}'", path));
  std::vector<std::string> block;
  std::vector<std::vector<int>> ids;
  bool eof = false;
  while (!eof) {
    block.clear();
    size_t non_empty = 0;
    std::string line;
    while (non_empty < kBlockLines) {
      if (!std::getline(in, line)) {
        eof = true;
        break;
      }
      stats.bytes += static_cast<int64_t>(line.size()) + 1;
      non_empty += line.empty() ? 0 : 1;
      block.push_back(std::move(line));
    }
    EncodeBlock(tok, block, ids, o.num_threads);
    for (size_t i = 0; i < block.size(); ++i) {
      if (block[i].empty()) {
        writer.EndDocument();
      } else {
        PM_RETURN_IF_ERROR(writer.AddLine(ids[i]));
      }
    }
  }
  if (in.bad()) return Status::Error(fmt::format("tokenize: --input: read error in '{}'", path));
  writer.EndDocument();
  return Status::Ok();
}

}  // namespace

Result<TokenizeStats> TokenizeCorpus(const TokenizeOptions& options) {
  PM_RETURN_IF_ERROR(CheckOptions(options));
  PM_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load(options.model_path));
  std::error_code ec;
  std::filesystem::create_directories(options.output_dir, ec);
  if (ec) {
    return Status::Error(fmt::format("tokenize: --output: cannot create '{}': {}",
                                     options.output_dir, ec.message()));
  }
  TokenizeOptions o = options;  // .xz inputs read from their unpacked copies in output_dir
  PM_ASSIGN_OR_RETURN(o.inputs, UnpackedTexts(options.inputs, o.output_dir, "tokenize: --input"));
  // A previous dataset here stops being valid before its shards are overwritten: a crash from
  // now on leaves no manifest rather than one listing half-replaced shards.
  std::filesystem::remove(std::filesystem::path(o.output_dir) / kManifestFile, ec);
  if (ec) {
    return Status::Error(fmt::format("tokenize: --output: cannot remove the old {}/{}: {}",
                                     o.output_dir, kManifestFile, ec.message()));
  }
  const auto start = std::chrono::steady_clock::now();
  Manifest m;
  m.vocab_size = tok.vocab_size();
  m.eos_id = tok.eos_id();
  m.dtype = TokenDtypeForVocab(m.vocab_size);
  TokenizeStats stats;
  CorpusWriter writer(o, m.dtype, static_cast<uint32_t>(m.vocab_size),
                      static_cast<uint32_t>(m.eos_id), &stats);
  for (const auto& path : o.inputs) {
    PM_RETURN_IF_ERROR(TokenizeFile(path, tok, o, writer, stats));
  }
  PM_RETURN_IF_ERROR(writer.Finish());

  m.tokenizer_path = std::filesystem::absolute(o.model_path).string();
  PM_ASSIGN_OR_RETURN(m.tokenizer_fnv1a64, FileFnv1a64(o.model_path));
  m.heldout_fraction = o.heldout_fraction;
  m.split_seed = o.split_seed;
  m.document_rule =
      "non-empty lines up to an empty line or end of file; lines encoded "
      "separately; eos_id after each document";
  m.inputs = o.inputs;
  m.train = writer.train();
  m.heldout = writer.heldout();
  PM_RETURN_IF_ERROR(WriteManifest(o.output_dir, m));

  stats.train_tokens = m.train.tokens;
  stats.heldout_tokens = m.heldout.tokens;
  stats.shards = static_cast<int64_t>(m.train.shards.size() + m.heldout.shards.size());
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace pentamesh::data

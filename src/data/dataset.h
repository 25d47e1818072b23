// A tokenized dataset on disk: a directory holding manifest.json and the token shards it lists,
// split into train and heldout. Schema: docs/data_format.md.
// Invariant: each split is ONE token stream, the concatenation of its shards in manifest order;
// every document in it is followed by eos_id, so packing never needs document metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/token_shards.h"

namespace pentamesh::data {

enum class Split { kTrain, kHeldout };
const char* SplitName(Split split);  // "train" / "heldout"

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr int kManifestVersion = 1;

struct ShardEntry {
  std::string file;        // relative to the dataset directory
  uint64_t tokens = 0;     // must equal the shard header's token_count
  uint64_t documents = 0;  // must equal the shard header's doc_count
};

struct SplitEntry {
  std::vector<ShardEntry> shards;
  uint64_t tokens = 0;     // sum over shards
  uint64_t documents = 0;  // sum over shards
};

// manifest.json, typed. The tokenizer is identified by path and FNV-1a 64 of its .model bytes.
struct Manifest {
  int version = kManifestVersion;
  std::string tokenizer_path;
  uint64_t tokenizer_fnv1a64 = 0;
  int64_t vocab_size = 0;
  int32_t eos_id = 0;
  TokenDtype dtype = TokenDtype::kU16;
  double heldout_fraction = 0.0;
  uint64_t split_seed = 0;
  std::string document_rule;        // how the input was cut into documents (informative)
  std::vector<std::string> inputs;  // the corpus files, in order (informative)
  SplitEntry train;
  SplitEntry heldout;

  const SplitEntry& split(Split s) const { return s == Split::kTrain ? train : heldout; }
};

std::string ManifestToJson(const Manifest& manifest);
// Parses and checks the schema; errors name "<path>: <field>: reason".
core::Result<Manifest> ManifestFromJson(const std::string& text, const std::string& path);
// Writes dir/manifest.json atomically (temporary name, then rename).
core::Status WriteManifest(const std::string& dir, const Manifest& manifest);

// An opened dataset: the manifest plus every shard memory-mapped and validated. Move-only.
class Dataset {
 public:
  struct Options {
    bool verify_checksums = true;  // hash every shard's tokens once at open (reads all bytes)
  };
  // Opens dir/manifest.json and all its shards. Errors name the file and the mismatch (missing
  // shard, bad magic, truncated, count differing from the manifest, vocab differing).
  static core::Result<Dataset> Open(const std::string& dir, Options options);
  static core::Result<Dataset> Open(const std::string& dir) { return Open(dir, Options{}); }

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  int64_t vocab_size() const { return manifest_.vocab_size; }
  int32_t eos_id() const { return manifest_.eos_id; }
  uint64_t tokens(Split split) const;
  // Identifies a split's content: FNV-1a 64 over (token_count, tokens_fnv1a64) of its shards.
  uint64_t fingerprint(Split split) const { return stream(split).fingerprint; }

  // OK iff a model with `model_vocab` embedding rows matches this dataset's tokenizer; the error
  // names the field: "model.vocab=N does not match the tokenizer's vocab_size=M (<manifest>)".
  core::Status CheckModelVocab(int64_t model_vocab) const;
  // OK iff the file at `model_path` is byte-identical (FNV-1a 64) to the tokenizer the shards
  // were made with; use before decoding tokens with a tokenizer loaded from elsewhere.
  core::Status CheckTokenizer(const std::string& model_path) const;

  // Copies tokens [start, start + count) of a split's stream (crossing shards) as int32.
  // REQUIRES: start + count <= tokens(split).
  void Read(Split split, uint64_t start, uint64_t count, int32_t* out) const;

 private:
  struct Stream {
    std::vector<ShardReader> shards;
    std::vector<uint64_t> starts;  // starts[i] = first stream index of shard i
    uint64_t tokens = 0;
    uint64_t fingerprint = kFnv1a64Offset;
  };
  const Stream& stream(Split split) const { return split == Split::kTrain ? train_ : heldout_; }
  static core::Result<Stream> OpenStream(const std::string& dir, const Manifest& manifest,
                                         const SplitEntry& entry, bool verify);

  std::string dir_;
  Manifest manifest_;
  Stream train_;
  Stream heldout_;
};

// The unigram baseline a language model must beat to show it learned context: the entropy of
// the train split's token frequencies, and the cross-entropy of the heldout split under those
// frequencies with add-one smoothing over the vocabulary (both in nats per token).
struct UnigramStats {
  double train_entropy_nats = 0;
  double heldout_cross_entropy_nats = 0;  // 0 when the heldout split is empty
  uint64_t train_tokens = 0;
  uint64_t heldout_tokens = 0;
};
UnigramStats ComputeUnigramStats(const Dataset& dataset);

}  // namespace pentamesh::data

// Binary token shards: one self-describing file holding a run of token ids (uint16 or uint32)
// followed by the index of the documents that end inside it. Byte layout: docs/data_format.md.
// Invariant: a shard on disk is complete or absent (WriteShard writes a temporary name, then
// renames), and ShardReader::Open validates magic, version, dtype, size, counts and the token
// checksum before a token is handed out: a bad file is a Status naming the file, never a crash.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace pentamesh::data {

inline constexpr char kShardMagic[8] = {'P', 'M', 'T', 'O', 'K', 'S', 'H', 'D'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint64_t kShardHeaderBytes = 64;

// How a token id is stored: uint16 when every id fits (vocab_size <= 65535), else uint32.
enum class TokenDtype : uint32_t { kU16 = 1, kU32 = 2 };

constexpr uint64_t TokenDtypeBytes(TokenDtype dtype) { return dtype == TokenDtype::kU16 ? 2 : 4; }
const char* TokenDtypeName(TokenDtype dtype);                       // "uint16" / "uint32"
core::Result<TokenDtype> ParseTokenDtype(const std::string& name);  // inverse of the above
// The narrowest dtype that holds every id of a vocabulary of `vocab_size` pieces.
TokenDtype TokenDtypeForVocab(int64_t vocab_size);

// The 64-byte little-endian header at offset 0 of every shard.
struct ShardHeader {
  char magic[8];            // kShardMagic
  uint32_t version;         // kShardVersion
  uint32_t dtype;           // TokenDtype
  uint64_t token_count;     // number of tokens stored after the header
  uint64_t doc_count;       // number of documents whose EOS token lies in this shard
  uint32_t vocab_size;      // every token id is < vocab_size
  uint32_t eos_id;          // the end-of-document token id
  uint64_t tokens_fnv1a64;  // FNV-1a 64 of the token bytes exactly as stored
  uint8_t reserved[16];     // zero
};
static_assert(sizeof(ShardHeader) == kShardHeaderBytes);

// FNV-1a 64-bit hash, chainable: Fnv1a64(b, Fnv1a64(a)) == Fnv1a64(a ++ b).
inline constexpr uint64_t kFnv1a64Offset = 14695981039346656037ULL;
uint64_t Fnv1a64(const void* data, size_t bytes, uint64_t hash = kFnv1a64Offset);
// FNV-1a 64 of a whole file's bytes, streamed.
core::Result<uint64_t> FileFnv1a64(const std::string& path);

// Bytes of a shard with these counts: header, tokens padded to 8 bytes, then the doc index.
uint64_t ShardFileBytes(TokenDtype dtype, uint64_t token_count, uint64_t doc_count);

// Writes one shard atomically: `path`.tmp, fsync-free flush, then rename to `path`.
// doc_ends[k] is the index (within this shard) one past the EOS token ending document k; it must
// be strictly increasing and <= tokens.size(). Every token must be < vocab_size.
core::Status WriteShard(const std::string& path, TokenDtype dtype, uint32_t vocab_size,
                        uint32_t eos_id, std::span<const uint32_t> tokens,
                        std::span<const uint64_t> doc_ends);

// A validated, read-only, memory-mapped shard. Move-only; unmaps in the destructor (RAII).
class ShardReader {
 public:
  // Maps and validates `path`. With verify_checksum the token bytes are hashed once (reads the
  // whole file); without it only the header, size and doc index are checked.
  static core::Result<ShardReader> Open(const std::string& path, bool verify_checksum = true);

  ShardReader(ShardReader&& other) noexcept;
  ShardReader& operator=(ShardReader&& other) noexcept;
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;
  ~ShardReader();

  const std::string& path() const { return path_; }
  const ShardHeader& header() const { return header_; }
  TokenDtype dtype() const { return static_cast<TokenDtype>(header_.dtype); }
  uint64_t token_count() const { return header_.token_count; }
  uint64_t doc_count() const { return header_.doc_count; }

  // REQUIRES: index < token_count().
  uint32_t token(uint64_t index) const;
  // Copies tokens [start, start + count) widened to int32. REQUIRES: the range is in bounds.
  void Read(uint64_t start, uint64_t count, int32_t* out) const;
  // Index one past each document's EOS within this shard (doc_count entries).
  std::span<const uint64_t> doc_ends() const;

 private:
  ShardReader() = default;
  void Release();

  std::string path_;
  ShardHeader header_{};
  const uint8_t* map_ = nullptr;
  uint64_t map_bytes_ = 0;
};

}  // namespace pentamesh::data

// Token shard writing (atomic) and reading (mmap + validation). Layout: docs/data_format.md.
// Invariant: every check on a file happens in Open; accessors after a successful Open cannot fail.
#include "data/token_shards.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "core/input.h"

namespace pentamesh::data {

static_assert(std::endian::native == std::endian::little, "shards are little-endian");

using core::Result;
using core::Status;

const char* TokenDtypeName(TokenDtype dtype) {
  return dtype == TokenDtype::kU16 ? "uint16" : "uint32";
}

Result<TokenDtype> ParseTokenDtype(const std::string& name) {
  if (name == "uint16") return TokenDtype::kU16;
  if (name == "uint32") return TokenDtype::kU32;
  return Status::Error(fmt::format("dtype '{}' is not uint16 or uint32", name));
}

TokenDtype TokenDtypeForVocab(int64_t vocab_size) {
  return vocab_size <= 65535 ? TokenDtype::kU16 : TokenDtype::kU32;
}

uint64_t Fnv1a64(const void* data, size_t bytes, uint64_t hash) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ULL;
  }
  return hash;
}

Result<uint64_t> FileFnv1a64(const std::string& path) {
  PM_RETURN_IF_ERROR(core::CheckInputFile(path, core::kMaxDataFileBytes, "data file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(fmt::format("{}: cannot open for reading", path));
  std::vector<char> buf(1 << 20);
  uint64_t hash = kFnv1a64Offset;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    hash = Fnv1a64(buf.data(), static_cast<size_t>(in.gcount()), hash);
  }
  if (in.bad()) return Status::Error(fmt::format("{}: read error", path));
  return hash;
}

uint64_t ShardFileBytes(TokenDtype dtype, uint64_t token_count, uint64_t doc_count) {
  const uint64_t token_bytes = token_count * TokenDtypeBytes(dtype);
  return kShardHeaderBytes + (token_bytes + 7) / 8 * 8 + doc_count * 8;
}

namespace {

// Packs tokens into their stored width; returns the FNV-1a of the stored bytes.
std::vector<uint8_t> PackTokens(TokenDtype dtype, std::span<const uint32_t> tokens) {
  const uint64_t width = TokenDtypeBytes(dtype);
  std::vector<uint8_t> bytes((tokens.size() * width + 7) / 8 * 8, 0);
  if (dtype == TokenDtype::kU16) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto v = static_cast<uint16_t>(tokens[i]);
      std::memcpy(bytes.data() + i * 2, &v, 2);
    }
  } else {
    std::memcpy(bytes.data(), tokens.data(), tokens.size() * 4);
  }
  return bytes;
}

Status WriteAll(std::FILE* f, const void* data, size_t bytes, const std::string& path) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, f) != bytes) {
    return Status::Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace

Status WriteShard(const std::string& path, TokenDtype dtype, uint32_t vocab_size, uint32_t eos_id,
                  std::span<const uint32_t> tokens, std::span<const uint64_t> doc_ends) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    PM_CHECK(tokens[i] < vocab_size) << "token " << tokens[i] << " at " << i;
  }
  for (size_t k = 0; k < doc_ends.size(); ++k) {
    PM_CHECK(doc_ends[k] <= tokens.size() && (k == 0 || doc_ends[k] > doc_ends[k - 1]));
  }
  PM_CHECK(dtype == TokenDtype::kU32 || vocab_size <= 65536) << "vocab " << vocab_size;
  const std::vector<uint8_t> packed = PackTokens(dtype, tokens);
  ShardHeader header{};
  std::memcpy(header.magic, kShardMagic, sizeof(kShardMagic));
  header.version = kShardVersion;
  header.dtype = static_cast<uint32_t>(dtype);
  header.token_count = tokens.size();
  header.doc_count = doc_ends.size();
  header.vocab_size = vocab_size;
  header.eos_id = eos_id;
  header.tokens_fnv1a64 = Fnv1a64(packed.data(), tokens.size() * TokenDtypeBytes(dtype));

  const std::string tmp = fmt::format("{}.tmp-{}", path, getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return Status::Error(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  }
  Status st = WriteAll(f, &header, sizeof(header), tmp);
  if (st.ok()) st = WriteAll(f, packed.data(), packed.size(), tmp);
  if (st.ok()) st = WriteAll(f, doc_ends.data(), doc_ends.size() * 8, tmp);
  if (std::fclose(f) != 0 && st.ok()) {
    st = Status::Error(fmt::format("{}: close failed: {}", tmp, std::strerror(errno)));
  }
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::Error(
        fmt::format("{}: rename from {} failed: {}", path, tmp, std::strerror(errno)));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

// ---------------------------------------------------------------------------------------------

namespace {

// Checks the header alone against the file size; names the first violated field.
Status ValidateHeader(const ShardHeader& h, uint64_t file_bytes, const std::string& path) {
  if (std::memcmp(h.magic, kShardMagic, sizeof(kShardMagic)) != 0) {
    return Status::Error(fmt::format("{}: bad magic (not a pentamesh token shard)", path));
  }
  if (h.version != kShardVersion) {
    return Status::Error(fmt::format("{}: version {} is not supported (expected {})", path,
                                     h.version, kShardVersion));
  }
  if (h.dtype != static_cast<uint32_t>(TokenDtype::kU16) &&
      h.dtype != static_cast<uint32_t>(TokenDtype::kU32)) {
    return Status::Error(
        fmt::format("{}: dtype code {} is not 1 (uint16) or 2 (uint32)", path, h.dtype));
  }
  for (uint8_t byte : h.reserved) {
    if (byte != 0)
      return Status::Error(fmt::format("{}: reserved header bytes must be zero", path));
  }
  if (h.eos_id >= h.vocab_size) {
    return Status::Error(
        fmt::format("{}: eos_id {} >= vocab_size {}", path, h.eos_id, h.vocab_size));
  }
  // Guard the size arithmetic against absurd counts before multiplying.
  if (h.token_count > file_bytes || h.doc_count > file_bytes) {
    return Status::Error(fmt::format(
        "{}: truncated or corrupt: header claims {} tokens and {} documents but the file has {} "
        "bytes",
        path, h.token_count, h.doc_count, file_bytes));
  }
  const uint64_t expected =
      ShardFileBytes(static_cast<TokenDtype>(h.dtype), h.token_count, h.doc_count);
  if (expected != file_bytes) {
    return Status::Error(fmt::format(
        "{}: {}: header claims {} tokens and {} documents ({} bytes) but the file has {} bytes",
        path, file_bytes < expected ? "truncated" : "trailing bytes", h.token_count, h.doc_count,
        expected, file_bytes));
  }
  return Status::Ok();
}

}  // namespace

Result<ShardReader> ShardReader::Open(const std::string& path, bool verify_checksum) {
  PM_ASSIGN_OR_RETURN(const int fd,
                      core::OpenInputFile(path, core::kMaxDataFileBytes, "token shard"));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::Error(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  }
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < kShardHeaderBytes) {
    ::close(fd);
    return Status::Error(fmt::format("{}: truncated: {} bytes is smaller than the {}-byte header",
                                     path, file_bytes, kShardHeaderBytes));
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return Status::Error(fmt::format("{}: mmap failed: {}", path, std::strerror(errno)));
  }
  ShardReader reader;
  reader.path_ = path;
  reader.map_ = static_cast<const uint8_t*>(map);
  reader.map_bytes_ = file_bytes;
  std::memcpy(&reader.header_, reader.map_, sizeof(ShardHeader));
  const ShardHeader& h = reader.header_;
  PM_RETURN_IF_ERROR(ValidateHeader(h, file_bytes, path));

  const uint64_t token_bytes = h.token_count * TokenDtypeBytes(reader.dtype());
  if (verify_checksum) {
    const uint64_t hash = Fnv1a64(reader.map_ + kShardHeaderBytes, token_bytes);
    if (hash != h.tokens_fnv1a64) {
      return Status::Error(
          fmt::format("{}: token checksum mismatch (stored {:016x}, computed "
                      "{:016x}): the file is corrupt",
                      path, h.tokens_fnv1a64, hash));
    }
    for (uint64_t i = 0; i < h.token_count; ++i) {
      const uint32_t id = reader.token(i);
      if (id >= h.vocab_size) {
        return Status::Error(
            fmt::format("{}: token {} at index {} is >= vocab_size {}", path, id, i, h.vocab_size));
      }
    }
  }
  for (uint64_t at = kShardHeaderBytes + token_bytes; at % 8 != 0; ++at) {
    if (reader.map_[at] != 0) {
      return Status::Error(fmt::format("{}: padding byte at offset {} is not zero", path, at));
    }
  }
  const std::span<const uint64_t> ends = reader.doc_ends();
  for (size_t k = 0; k < ends.size(); ++k) {
    const bool ordered = k == 0 || ends[k] > ends[k - 1];
    if (ends[k] == 0 || ends[k] > h.token_count || !ordered) {
      return Status::Error(
          fmt::format("{}: document index entry {} = {} is out of order or outside [1, {}]", path,
                      k, ends[k], h.token_count));
    }
    if (reader.token(ends[k] - 1) != h.eos_id) {
      return Status::Error(
          fmt::format("{}: document {} does not end with eos_id {}", path, k, h.eos_id));
    }
  }
  return reader;
}

ShardReader::ShardReader(ShardReader&& other) noexcept { *this = std::move(other); }

ShardReader& ShardReader::operator=(ShardReader&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    header_ = other.header_;
    map_ = other.map_;
    map_bytes_ = other.map_bytes_;
    other.map_ = nullptr;
    other.map_bytes_ = 0;
  }
  return *this;
}

ShardReader::~ShardReader() { Release(); }

void ShardReader::Release() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

uint32_t ShardReader::token(uint64_t index) const {
  PM_CHECK(index < header_.token_count) << index << " >= " << header_.token_count;
  const uint8_t* base = map_ + kShardHeaderBytes;
  if (dtype() == TokenDtype::kU16) {
    uint16_t v;
    std::memcpy(&v, base + index * 2, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, base + index * 4, 4);
  return v;
}

void ShardReader::Read(uint64_t start, uint64_t count, int32_t* out) const {
  PM_CHECK(start + count <= header_.token_count) << start << "+" << count;
  const uint8_t* base = map_ + kShardHeaderBytes;
  if (dtype() == TokenDtype::kU16) {
    for (uint64_t i = 0; i < count; ++i) {
      uint16_t v;
      std::memcpy(&v, base + (start + i) * 2, 2);
      out[i] = v;
    }
  } else {
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t v;
      std::memcpy(&v, base + (start + i) * 4, 4);
      out[i] = static_cast<int32_t>(v);
    }
  }
}

std::span<const uint64_t> ShardReader::doc_ends() const {
  const uint64_t token_bytes = header_.token_count * TokenDtypeBytes(dtype());
  const uint8_t* index = map_ + kShardHeaderBytes + (token_bytes + 7) / 8 * 8;
  // The index starts at an 8-byte aligned offset of a page-aligned map.
  return {reinterpret_cast<const uint64_t*>(index), header_.doc_count};
}

}  // namespace pentamesh::data

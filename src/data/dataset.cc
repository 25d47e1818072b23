// Manifest (de)serialisation and the Dataset that opens and validates every shard of it.
// Invariant: a Dataset exists only if every shard matches its manifest entry exactly.
#include "data/dataset.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/check.h"
#include "core/input.h"

namespace pentamesh::data {

using core::Result;
using core::Status;
using nlohmann::json;

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "heldout"; }

namespace {

json SplitToJson(const SplitEntry& s) {
  json shards = json::array();
  for (const auto& e : s.shards) {
    shards.push_back({{"file", e.file}, {"tokens", e.tokens}, {"documents", e.documents}});
  }
  return {{"tokens", s.tokens}, {"documents", s.documents}, {"shards", shards}};
}

// Reads j[key] as T, or an error naming the field.
template <typename T>
Status Get(const json& j, const std::string& key, const std::string& where, T* out) {
  if (!j.is_object() || !j.contains(key)) {
    return Status::Error(fmt::format("{}{}: missing", where, key));
  }
  try {
    *out = j.at(key).get<T>();
  } catch (const json::exception& e) {
    return Status::Error(fmt::format("{}{}: wrong type ({})", where, key, e.what()));
  }
  return Status::Ok();
}

Status SplitFromJson(const json& j, const std::string& where, SplitEntry* out) {
  PM_RETURN_IF_ERROR(Get(j, "tokens", where, &out->tokens));
  PM_RETURN_IF_ERROR(Get(j, "documents", where, &out->documents));
  if (!j.contains("shards") || !j.at("shards").is_array()) {
    return Status::Error(fmt::format("{}shards: missing or not an array", where));
  }
  uint64_t tokens = 0, documents = 0;
  for (size_t i = 0; i < j.at("shards").size(); ++i) {
    const std::string w = fmt::format("{}shards[{}].", where, i);
    ShardEntry e;
    PM_RETURN_IF_ERROR(Get(j.at("shards")[i], "file", w, &e.file));
    PM_RETURN_IF_ERROR(Get(j.at("shards")[i], "tokens", w, &e.tokens));
    PM_RETURN_IF_ERROR(Get(j.at("shards")[i], "documents", w, &e.documents));
    if (e.file.empty() || e.file.find('/') != std::string::npos) {
      return Status::Error(fmt::format("{}file: '{}' must be a plain file name", w, e.file));
    }
    tokens += e.tokens;
    documents += e.documents;
    out->shards.push_back(std::move(e));
  }
  if (tokens != out->tokens || documents != out->documents) {
    return Status::Error(
        fmt::format("{}tokens/documents: {}/{} differ from the sum over shards {}/{}", where,
                    out->tokens, out->documents, tokens, documents));
  }
  return Status::Ok();
}

}  // namespace

std::string ManifestToJson(const Manifest& m) {
  json j = {
      {"format", "pentamesh-token-shards"},
      {"version", m.version},
      {"tokenizer",
       {{"path", m.tokenizer_path}, {"fnv1a64", fmt::format("{:016x}", m.tokenizer_fnv1a64)}}},
      {"vocab_size", m.vocab_size},
      {"eos_id", m.eos_id},
      {"dtype", TokenDtypeName(m.dtype)},
      {"heldout_fraction", m.heldout_fraction},
      {"split_seed", m.split_seed},
      {"document_rule", m.document_rule},
      {"inputs", m.inputs},
      {"splits", {{"train", SplitToJson(m.train)}, {"heldout", SplitToJson(m.heldout)}}}};
  return j.dump(2) + "\n";
}

Result<Manifest> ManifestFromJson(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Status::Error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  const std::string w = path + ": ";
  Manifest m;
  std::string format, dtype, hash_hex;
  PM_RETURN_IF_ERROR(Get(j, "format", w, &format));
  if (format != "pentamesh-token-shards") {
    return Status::Error(fmt::format("{}format: '{}' is not pentamesh-token-shards", w, format));
  }
  PM_RETURN_IF_ERROR(Get(j, "version", w, &m.version));
  if (m.version != kManifestVersion) {
    return Status::Error(fmt::format("{}version: {} is not supported (expected {})", w, m.version,
                                     kManifestVersion));
  }
  if (!j.contains("tokenizer")) return Status::Error(w + "tokenizer: missing");
  PM_RETURN_IF_ERROR(Get(j.at("tokenizer"), "path", w + "tokenizer.", &m.tokenizer_path));
  PM_RETURN_IF_ERROR(Get(j.at("tokenizer"), "fnv1a64", w + "tokenizer.", &hash_hex));
  m.tokenizer_fnv1a64 = std::strtoull(hash_hex.c_str(), nullptr, 16);
  PM_RETURN_IF_ERROR(Get(j, "vocab_size", w, &m.vocab_size));
  PM_RETURN_IF_ERROR(Get(j, "eos_id", w, &m.eos_id));
  if (m.vocab_size <= 0 || m.eos_id < 0 || m.eos_id >= m.vocab_size) {
    return Status::Error(fmt::format("{}vocab_size/eos_id: {}/{} (need 0 <= eos_id < vocab_size)",
                                     w, m.vocab_size, m.eos_id));
  }
  PM_RETURN_IF_ERROR(Get(j, "dtype", w, &dtype));
  auto parsed = ParseTokenDtype(dtype);
  if (!parsed.ok()) return Status::Error(w + "dtype: " + parsed.status().message());
  m.dtype = *parsed;
  PM_RETURN_IF_ERROR(Get(j, "heldout_fraction", w, &m.heldout_fraction));
  PM_RETURN_IF_ERROR(Get(j, "split_seed", w, &m.split_seed));
  PM_RETURN_IF_ERROR(Get(j, "document_rule", w, &m.document_rule));
  PM_RETURN_IF_ERROR(Get(j, "inputs", w, &m.inputs));
  if (!j.contains("splits")) return Status::Error(w + "splits: missing");
  const json& splits = j.at("splits");
  if (!splits.is_object() || !splits.contains("train") || !splits.contains("heldout")) {
    return Status::Error(w + "splits: needs objects 'train' and 'heldout'");
  }
  PM_RETURN_IF_ERROR(SplitFromJson(splits.at("train"), w + "splits.train.", &m.train));
  PM_RETURN_IF_ERROR(SplitFromJson(splits.at("heldout"), w + "splits.heldout.", &m.heldout));
  return m;
}

Status WriteManifest(const std::string& dir, const Manifest& manifest) {
  const std::string path = dir + "/" + kManifestFile;
  const std::string tmp = fmt::format("{}.tmp-{}", path, getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << ManifestToJson(manifest);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::Error(fmt::format("{}: write failed", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::Error(fmt::format("{}: rename from {} failed", path, tmp));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------

Result<Dataset::Stream> Dataset::OpenStream(const std::string& dir, const Manifest& manifest,
                                            const SplitEntry& entry, bool verify) {
  Stream stream;
  for (const ShardEntry& e : entry.shards) {
    const std::string path = dir + "/" + e.file;
    PM_ASSIGN_OR_RETURN(ShardReader shard, ShardReader::Open(path, verify));
    const ShardHeader& h = shard.header();
    if (h.token_count != e.tokens || h.doc_count != e.documents) {
      return Status::Error(fmt::format(
          "{}: count mismatch: shard holds {} tokens and {} documents, manifest says {} and {}",
          path, h.token_count, h.doc_count, e.tokens, e.documents));
    }
    if (static_cast<int64_t>(h.vocab_size) != manifest.vocab_size ||
        static_cast<int32_t>(h.eos_id) != manifest.eos_id || shard.dtype() != manifest.dtype) {
      return Status::Error(
          fmt::format("{}: vocab_size/eos_id/dtype {}/{}/{} differ from the manifest's {}/{}/{}",
                      path, h.vocab_size, h.eos_id, TokenDtypeName(shard.dtype()),
                      manifest.vocab_size, manifest.eos_id, TokenDtypeName(manifest.dtype)));
    }
    stream.fingerprint = Fnv1a64(&h.token_count, 8, stream.fingerprint);
    stream.fingerprint = Fnv1a64(&h.tokens_fnv1a64, 8, stream.fingerprint);
    stream.starts.push_back(stream.tokens);
    stream.tokens += h.token_count;
    stream.shards.push_back(std::move(shard));
  }
  return stream;
}

Result<Dataset> Dataset::Open(const std::string& dir, Options options) {
  const std::string path = dir + "/" + kManifestFile;
  auto text = core::ReadInputFile(path, core::kMaxConfigFileBytes, "dataset manifest");
  if (!text.ok()) {
    return Status::Error(
        fmt::format("{} (is '{}' a tokenized dataset?)", text.status().message(), dir));
  }
  Dataset ds;
  ds.dir_ = dir;
  PM_ASSIGN_OR_RETURN(ds.manifest_, ManifestFromJson(*text, path));
  PM_ASSIGN_OR_RETURN(ds.train_,
                      OpenStream(dir, ds.manifest_, ds.manifest_.train, options.verify_checksums));
  PM_ASSIGN_OR_RETURN(
      ds.heldout_, OpenStream(dir, ds.manifest_, ds.manifest_.heldout, options.verify_checksums));
  return ds;
}

uint64_t Dataset::tokens(Split split) const { return stream(split).tokens; }

Status Dataset::CheckModelVocab(int64_t model_vocab) const {
  if (model_vocab == manifest_.vocab_size) return Status::Ok();
  return Status::Error(fmt::format(
      "model.vocab={} does not match the tokenizer's vocab_size={} "
      "({}/{}, tokenizer {})",
      model_vocab, manifest_.vocab_size, dir_, kManifestFile, manifest_.tokenizer_path));
}

Status Dataset::CheckTokenizer(const std::string& model_path) const {
  PM_ASSIGN_OR_RETURN(uint64_t hash, FileFnv1a64(model_path));
  if (hash == manifest_.tokenizer_fnv1a64) return Status::Ok();
  return Status::Error(fmt::format(
      "{}: tokenizer checksum {:016x} differs from {:016x} recorded in {}/{} (made with {})",
      model_path, hash, manifest_.tokenizer_fnv1a64, dir_, kManifestFile,
      manifest_.tokenizer_path));
}

namespace {

// Token counts of one split, read in bounded chunks.
std::vector<uint64_t> CountTokens(const Dataset& ds, Split split) {
  std::vector<uint64_t> counts(static_cast<size_t>(ds.vocab_size()), 0);
  std::vector<int32_t> chunk(1 << 16);
  const uint64_t total = ds.tokens(split);
  for (uint64_t start = 0; start < total; start += chunk.size()) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), total - start);
    ds.Read(split, start, n, chunk.data());
    for (uint64_t i = 0; i < n; ++i) ++counts[static_cast<size_t>(chunk[i])];
  }
  return counts;
}

}  // namespace

UnigramStats ComputeUnigramStats(const Dataset& ds) {
  UnigramStats stats;
  stats.train_tokens = ds.tokens(Split::kTrain);
  stats.heldout_tokens = ds.tokens(Split::kHeldout);
  const std::vector<uint64_t> train = CountTokens(ds, Split::kTrain);
  const auto n = static_cast<double>(stats.train_tokens);
  for (uint64_t c : train) {
    if (c > 0)
      stats.train_entropy_nats -= static_cast<double>(c) / n * std::log(static_cast<double>(c) / n);
  }
  if (stats.heldout_tokens == 0) return stats;
  const std::vector<uint64_t> heldout = CountTokens(ds, Split::kHeldout);
  const double denominator = n + static_cast<double>(train.size());  // add-one smoothing
  for (size_t id = 0; id < heldout.size(); ++id) {
    if (heldout[id] == 0) continue;
    const double p = (static_cast<double>(train[id]) + 1) / denominator;
    stats.heldout_cross_entropy_nats -= static_cast<double>(heldout[id]) * std::log(p);
  }
  stats.heldout_cross_entropy_nats /= static_cast<double>(stats.heldout_tokens);
  return stats;
}

void Dataset::Read(Split split, uint64_t start, uint64_t count, int32_t* out) const {
  const Stream& s = stream(split);
  PM_CHECK(start + count <= s.tokens) << start << "+" << count << " > " << s.tokens;
  if (count == 0) return;
  // The shard holding `start`: the last one whose first index is <= start.
  size_t i = std::upper_bound(s.starts.begin(), s.starts.end(), start) - s.starts.begin() - 1;
  while (count > 0) {
    const uint64_t offset = start - s.starts[i];
    const uint64_t n = std::min(count, s.shards[i].token_count() - offset);
    s.shards[i].Read(offset, n, out);
    out += n;
    start += n;
    count -= n;
    ++i;
  }
}

}  // namespace pentamesh::data

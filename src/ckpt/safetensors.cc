#include "ckpt/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace pentamesh::ckpt {

int64_t StDtypeSize(std::string_view dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  if (dtype == "I64" || dtype == "F64") return 8;
  if (dtype == "U8") return 1;
  return 0;
}

namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::string EncodeSafetensors(const std::vector<StTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const StTensor& t : tensors) {
    PM_CHECK(static_cast<int64_t>(t.data.size()) == StDtypeSize(t.dtype) * Numel(t.shape))
        << t.name << ": " << t.data.size() << " bytes for dtype " << t.dtype;
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out.reserve(8 + json.size() + offset);
  out += json;
  for (const StTensor& t : tensors) out.append(t.data);
  return out;
}

const StTensor* StFile::Find(std::string_view name) const {
  for (const StTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

core::Result<StTensor> ParseEntry(const std::string& name, const nlohmann::json& e,
                                  std::string_view data, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return core::Status::Error(fmt::format("{}: tensor '{}': {}", what, name, why));
  };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    return bad("needs dtype, shape and data_offsets");
  if (!e["dtype"].is_string()) return bad("dtype must be a string");
  StTensor t;
  t.name = name;
  t.dtype = e["dtype"].get<std::string>();
  if (StDtypeSize(t.dtype) == 0) return bad(fmt::format("unknown dtype '{}'", t.dtype));
  if (!e["shape"].is_array()) return bad("shape must be an array");
  int64_t numel = 1;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40))
      return bad("shape entries must be non-negative integers below 2^40");
    t.shape.push_back(d.get<int64_t>());
    if (t.shape.back() != 0 && numel > (int64_t{1} << 40) / t.shape.back())
      return bad("shape has more than 2^40 elements");
    numel *= t.shape.back();
  }
  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    return bad("data_offsets must be [begin, end]");
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > data.size())
    return bad(fmt::format("data_offsets [{}, {}) outside the {} data bytes (truncated file?)",
                           begin, end, data.size()));
  if (static_cast<int64_t>(end - begin) != numel * StDtypeSize(t.dtype))
    return bad(fmt::format("{} bytes for {} elements of {}", end - begin, numel, t.dtype));
  t.data = data.substr(begin, end - begin);
  return t;
}

}  // namespace

core::Result<StFile> ParseSafetensors(std::string_view file, const std::string& what) {
  if (file.size() < 8)
    return core::Status::Error(
        fmt::format("{}: {} bytes, shorter than the 8-byte header length", what, file.size()));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
  if (n > file.size() - 8)
    return core::Status::Error(
        fmt::format("{}: header length {} exceeds the file's {} bytes (truncated file?)", what, n,
                    file.size()));
  const std::string_view data = file.substr(8 + n);
  nlohmann::json header =
      nlohmann::json::parse(file.substr(8, n), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return core::Status::Error(fmt::format("{}: header is not a JSON object", what));
  StFile out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object())
        return core::Status::Error(fmt::format("{}: __metadata__ must be an object", what));
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string())
          return core::Status::Error(fmt::format("{}: __metadata__.{} must be a string", what, k));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    PM_ASSIGN_OR_RETURN(StTensor t, ParseEntry(name, e, data, what));
    out.tensors.push_back(std::move(t));
  }
  // The byte ranges must tile the data section: sorted by offset, no gap, no overlap.
  std::vector<const StTensor*> sorted;
  for (const StTensor& t : out.tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const StTensor* a, const StTensor* b) { return a->data.data() < b->data.data(); });
  size_t pos = 0;
  for (const StTensor* t : sorted) {
    if (static_cast<size_t>(t->data.data() - data.data()) != pos)
      return core::Status::Error(
          fmt::format("{}: tensor '{}' leaves a gap or overlaps", what, t->name));
    pos += t->data.size();
  }
  if (pos != data.size())
    return core::Status::Error(
        fmt::format("{}: {} trailing bytes after the last tensor", what, data.size() - pos));
  return out;
}

}  // namespace pentamesh::ckpt

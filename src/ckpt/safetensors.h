// The safetensors file format, written and read here (Debian has no C++ library for it):
//   bytes [0, 8):      N, the header length, uint64 little-endian
//   bytes [8, 8 + N):  a JSON object {name: {"dtype": "F32"|"BF16"|..., "shape": [..],
//                      "data_offsets": [begin, end]}, "__metadata__": {string: string}},
//                      padded with spaces to a multiple of 8
//   bytes [8 + N, ..): the tensors' raw little-endian bytes; offsets are relative to this point
// Invariant: ParseSafetensors accepts only files where every tensor's byte range lies inside the
// file, matches dtype size * shape, and the ranges tile the data section without gaps or overlap;
// anything else is an error naming the reason (it is fuzzed with arbitrary bytes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace pentamesh::ckpt {

struct StTensor {
  std::string name;
  std::string dtype;  // safetensors spelling: F32, BF16, F16, I32, I64, U8
  std::vector<int64_t> shape;
  std::string_view data;  // encode: the bytes to write; parse: a view into the parsed file
};

// Bytes per element of a safetensors dtype; 0 when unknown.
int64_t StDtypeSize(std::string_view dtype);

// The whole file. REQUIRES: each data.size() == StDtypeSize(dtype) * prod(shape).
std::string EncodeSafetensors(const std::vector<StTensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

struct StFile {
  std::vector<StTensor> tensors;  // in header order; data views into the parsed bytes
  std::map<std::string, std::string> metadata;
  const StTensor* Find(std::string_view name) const;
};
// `file` must outlive the result. `what` names the file in errors.
core::Result<StFile> ParseSafetensors(std::string_view file, const std::string& what);

}  // namespace pentamesh::ckpt

// Element types of tensors and communication buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pentamesh::core {

enum class Dtype : uint8_t { kF32, kBF16, kF16, kI32, kI64, kU8 };

constexpr size_t DtypeSize(Dtype d) {
  switch (d) {
    case Dtype::kF32:
      return 4;
    case Dtype::kBF16:
      return 2;
    case Dtype::kF16:
      return 2;
    case Dtype::kI32:
      return 4;
    case Dtype::kI64:
      return 8;
    case Dtype::kU8:
      return 1;
  }
  return 0;
}

constexpr const char* DtypeName(Dtype d) {
  switch (d) {
    case Dtype::kF32:
      return "f32";
    case Dtype::kBF16:
      return "bf16";
    case Dtype::kF16:
      return "f16";
    case Dtype::kI32:
      return "i32";
    case Dtype::kI64:
      return "i64";
    case Dtype::kU8:
      return "u8";
  }
  return "?";
}

}  // namespace pentamesh::core

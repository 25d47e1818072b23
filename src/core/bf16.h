// bfloat16 conversion: float -> bf16 with round-to-nearest-even; NaN stays NaN (quiet).
// Invariant: Bf16ToFloat(Bf16FromFloat(x)) == RoundBf16(x), and RoundBf16 is idempotent.
#pragma once

#include <bit>
#include <cstdint>

namespace pentamesh::core {

inline uint16_t Bf16FromFloat(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16);
}

inline float Bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline float RoundBf16(float x) { return Bf16ToFloat(Bf16FromFloat(x)); }

// Element-wise over arrays.
void Bf16FromFloat(uint16_t* out, const float* in, int64_t n);
void Bf16ToFloat(float* out, const uint16_t* in, int64_t n);
void RoundBf16InPlace(float* x, int64_t n);

}  // namespace pentamesh::core

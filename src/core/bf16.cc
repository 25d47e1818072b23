#include "core/bf16.h"

namespace pentamesh::core {

void Bf16FromFloat(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16FromFloat(in[i]);
}
void Bf16ToFloat(float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}
void RoundBf16InPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = RoundBf16(x[i]);
}

}  // namespace pentamesh::core

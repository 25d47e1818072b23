// Dot: a vectorizable dot product with a fixed summation order. FastExp: exp(x) for float in a
// form the compiler vectorizes (no libm call, no floor): Cody-Waite range reduction x = n ln2 + r
// with n rounded by the 1.5 * 2^23 trick, Cephes' degree-6 polynomial for exp(r), and 2^n built in
// the exponent bits. Relative error below 2e-7 on
// [-87, 88]; inputs below -87.3 return 2^-126 * exp(tiny) (about 1e-38) instead of 0, so callers
// never rely on it for -inf. Deterministic: pure float arithmetic in a fixed order.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace pentamesh::kernels {

// Eight independent partial sums, so the compiler vectorizes the reduction (a single running sum
// is a chain of dependent FMAs). The summation order is fixed: results are deterministic.
inline float Dot(const float* a, const float* b, int64_t n) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lanes[j] += a[i + j] * b[i + j];
  }
  float acc = 0;
  for (; i < n; ++i) acc += a[i] * b[i];
  for (int j = 0; j < 8; ++j) acc += lanes[j];
  return acc;
}

inline float FastExp(float x) {
  x = std::min(88.3762626647949f, std::max(-87.3365478515625f, x));
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

}  // namespace pentamesh::kernels

// Overflow-safe integer helpers shared by every reader of user numbers (TOML fields, CLI flags,
// layout strings): exact conversion from double, and products that report overflow instead of
// wrapping; and the median that measurements (timings, errors) are summarized by.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

namespace pentamesh {

// `d` as an int64_t when it is a whole number that int64_t can hold (1e6 -> 1000000); nullopt for
// fractions, NaN, infinities and magnitudes of 2^63 or more. Config readers use it so that input
// like `seq_len = 8e92` is an error with the field's name, never an out-of-range conversion.
inline std::optional<int64_t> ExactInt64(double d) {
  constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact in a double
  if (!std::isfinite(d) || d >= kTwo63 || d < -kTwo63 || d != std::trunc(d)) return std::nullopt;
  return static_cast<int64_t>(d);
}

// a * b, or nullopt when the product does not fit in int64_t.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of all factors, or nullopt as soon as a partial product overflows int64_t.
inline std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors) {
    std::optional<int64_t> next = CheckedMul(out, f);
    if (!next) return std::nullopt;
    out = *next;
  }
  return out;
}

// The median of `v` (the mean of the middle two for an even count); 0 for none.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace pentamesh

#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

namespace pentamesh {

// `d` as an int64_t when it is a whole number that int64_t can hold (1e6 -> 1000000); nullopt for
// fractions, NaN, infinities and magnitudes of 2^63 or more. Config readers use it so that input
// like `seq_len = 8e92` is an error with the field's name, never an out-of-range conversion.
inline std::optional<int64_t> ExactInt64(double d) {
  constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact in a double
  if (!std::isfinite(d) || d >= kTwo63 || d < -kTwo63 || d != std::trunc(d)) return std::nullopt;
  return static_cast<int64_t>(d);
}

}  // namespace pentamesh

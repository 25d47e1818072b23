#include "core/rng.h"

#include <cmath>
#include <numbers>

namespace pentamesh::core {

double CounterRng::Uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t bits = Bits(seed, stream, index) >> 11;  // 53 bits
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

double CounterRng::Normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = Uniform(seed, stream, 2 * index);
  const double u2 = Uniform(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace pentamesh::core

// CounterRng: stateless, counter-based random numbers. Normal(seed, stream, index) depends only on
// its three arguments, so a parameter's element gets the same initial value whatever shard, rank
// or layout computes it (the stream is a hash of the parameter's name, index its global offset).
// Invariant: pure functions; no hidden state, thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace pentamesh::core {

// splitmix64 finaliser: a bijective 64-bit mixer.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a of a name: the stream id of a named parameter.
constexpr uint64_t HashName(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

struct CounterRng {
  // 64 random bits for (seed, stream, index).
  static uint64_t Bits(uint64_t seed, uint64_t stream, uint64_t index) {
    return Mix64(Mix64(Mix64(seed) ^ stream) ^ index);
  }
  // Uniform in (0, 1): 53 bits, never 0.
  static double Uniform(uint64_t seed, uint64_t stream, uint64_t index);
  // Standard normal (Box-Muller on two counter draws).
  static double Normal(uint64_t seed, uint64_t stream, uint64_t index);
};

}  // namespace pentamesh::core

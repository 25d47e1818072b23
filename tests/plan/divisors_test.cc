// plan::Divisors: O(sqrt n) trial division, checked against the brute-force definition, and fast
// on the largest counts the limits allow.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "plan/space.h"

namespace pentamesh::plan {
namespace {

TEST(Divisors, EqualsBruteForce) {
  for (int64_t n = 1; n <= 3000; ++n) {
    std::vector<int64_t> want;
    for (int64_t d = 1; d <= n; ++d)
      if (n % d == 0) want.push_back(d);
    ASSERT_EQ(Divisors(n), want) << n;
  }
  EXPECT_TRUE(Divisors(0).empty());
  EXPECT_TRUE(Divisors(-6).empty());
}

TEST(Divisors, LargeCountsAreFast) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Divisors(int64_t{1} << 40).size(), 41u);
  EXPECT_EQ(Divisors(int64_t{1099511627689}).size(), 2u);  // a prime near 2^40: 2^20 steps
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
}

}  // namespace
}  // namespace pentamesh::plan

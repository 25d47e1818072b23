// The shared input rules (spec/limits.h, core/numeric.h): whole-text parses, ranges, finiteness,
// and products that report overflow instead of wrapping.
#include "spec/limits.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "core/numeric.h"

namespace pentamesh::spec {
namespace {

TEST(Limits, ParseIntTakesWholeNumbersOnly) {
  EXPECT_EQ(*ParseInt("--gpus", "64", 1), 64);
  EXPECT_EQ(*ParseInt("--gpus", "1e6", 1), 1000000);
  for (const char* bad :
       {"", " 8", "8 ", "1.5", "0x10", "nan", "inf", "1e300", "8k", "99999999999999999999"}) {
    auto r = ParseInt("--gpus", bad, 1);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), std::string("--gpus: '") + bad + "' is not an integer") << bad;
  }
  EXPECT_EQ(ParseInt("--gpus", "0", 1).status().message(), "--gpus: must be >= 1 (got 0)");
  EXPECT_EQ(ParseInt("--gpus", "4096", 1, 1024).status().message(),
            "--gpus: must be <= 1024 (got 4096)");
  EXPECT_EQ(ParseInt("", "0", 1).status().message(), "must be >= 1 (got 0)");  // unnamed
}

TEST(Limits, ParseNumberIsFiniteAndInRange) {
  EXPECT_DOUBLE_EQ(*ParseNumber("x", "1.25", 1), 1.25);
  for (const char* bad : {"nan", "inf", "-inf", "1e400"}) {
    EXPECT_NE(ParseNumber("x", bad, 0).status().message().find("must be finite"), std::string::npos)
        << bad;
  }
  EXPECT_EQ(ParseNumber("x", "-1", 1).status().message(), "x: must be >= 1 (got -1)");
  EXPECT_EQ(ParseNumber("x", "0", 0, 1, true).status().message(), "x: must be > 0 (got 0)");
  EXPECT_EQ(ParseNumber("x", "abc", 0).status().message(), "x: 'abc' is not a number");
}

TEST(Limits, ProductsNeverWrap) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(CheckedMul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(CheckedMul(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_FALSE(CheckedMul(kMax, -2));
  EXPECT_FALSE(CheckedProduct({2147483647, 2147483647, 2147483647}));
  EXPECT_EQ(CheckedProduct({2, 3, 7}), 42);
  EXPECT_EQ(*GpuProduct("g", {1024, 1024}), kMaxGpus);
  EXPECT_EQ(GpuProduct("nodes x gpus_per_node", {1025, 1024}).status().message(),
            "nodes x gpus_per_node = 1025 x 1024 exceeds the limit of 1048576 GPUs");
  EXPECT_FALSE(GpuProduct("g", {kMax, kMax}).ok());
}

}  // namespace
}  // namespace pentamesh::spec

#include "core/status.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace pentamesh::core {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::Error("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  PM_ASSIGN_OR_RETURN(int h, Half(x));
  PM_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Result, PropagatesErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_FALSE(Quarter(6).ok());
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_TRUE(Quarter(8).status().ok());
}

TEST(CheckDeathTest, PrintsExpressionAndContext) {
  int tp = 3;
  EXPECT_DEATH({ PM_CHECK(tp % 2 == 0) << "tp=" << tp; }, "check failed: tp % 2 == 0 tp=3");
}

}  // namespace
}  // namespace pentamesh::core

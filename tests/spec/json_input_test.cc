// spec/json_input.h: the JSON number policy and typed accessors. Every bad value is an error
// naming the source and the key (or the literal and its line); nothing throws.
#include "spec/json_input.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace pentamesh::spec {
namespace {

using json = nlohmann::json;

std::string ErrorOf(const core::Status& st) { return st.ok() ? "(ok)" : st.message(); }

TEST(ParseJson, NumbersOutOfRangeAreNamedNotThrown) {
  auto inf = ParseJson("{\n  \"a\": 1,\n  \"b\": 1e400\n}", "x.json");
  ASSERT_FALSE(inf.ok());
  EXPECT_EQ(inf.status().message(),
            "x.json: number '1e400' at line 3 is out of range (not a finite double)");
  auto huge = ParseJson(R"({"a": {"b": [1, 12345678901234567890]}})", "x.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "x.json: \"/a/b/1\": 12345678901234567890 is out of range (integers stop at "
            "9223372036854775807)");
  // A whole document that is one such integer, and keys holding '/' or '~' (once an uncaught
  // json_pointer exception: found by serve_trace_fuzz).
  huge = ParseJson("12345678901234567890", "x.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "x.json: \"/\": 12345678901234567890 is out of range (integers stop at "
            "9223372036854775807)");
  for (const char* key : {"a/b", "~x", "~1"}) {
    huge = ParseJson(fmt::format(R"({{"{}": 12345678901234567890}})", key), "x.json");
    ASSERT_FALSE(huge.ok()) << key;
    EXPECT_EQ(huge.status().message(),
              fmt::format("x.json: \"/{}\": 12345678901234567890 is out of range (integers stop "
                          "at 9223372036854775807)",
                          key));
  }
  auto bad = ParseJson("{\"a\": }", "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.json: not valid JSON: "), std::string::npos);
  EXPECT_NE(bad.status().message().find("line 1, column 7"), std::string::npos)
      << bad.status().message();
  auto good = ParseJson(R"({"a": 9223372036854775807, "b": 1e308})", "x.json");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ((*good)["a"].get<int64_t>(), 9223372036854775807);
}

TEST(JsonAccessors, WrongTypesAndRangesNameTheKey) {
  const json j = json::parse(
      R"({"bf16": {"enabled": "yes"}, "n": 1.5, "m": 2e3, "big": 1e30, "neg": -1, "s": "8",
          "t": true, "none": null})");
  EXPECT_EQ(ErrorOf(JsonBool(j["bf16"], "enabled", "bf16.enabled", "ds.json").status()),
            "ds.json: \"bf16.enabled\" must be true or false, not string \"yes\"");
  EXPECT_EQ(*JsonBool(j, "t", "t", "ds.json").value(), true);
  EXPECT_FALSE(JsonBool(j, "none", "none", "ds.json")->has_value());
  EXPECT_FALSE(JsonBool(j, "absent", "absent", "ds.json")->has_value());
  EXPECT_EQ(ErrorOf(JsonInt(j, "n", "n", "ds.json").status()),
            "ds.json: \"n\" must be a whole number, got 1.5");
  EXPECT_EQ(*JsonInt(j, "m", "m", "ds.json").value(), 2000);
  EXPECT_EQ(ErrorOf(JsonInt(j, "big", "big", "ds.json").status()),
            "ds.json: \"big\" 1e+30 is out of range [0, 2147483647]");
  EXPECT_EQ(ErrorOf(JsonInt(j, "neg", "neg", "ds.json").status()),
            "ds.json: \"neg\" -1 is out of range [0, 2147483647]");
  EXPECT_EQ(ErrorOf(JsonInt(j, "s", "s", "ds.json").status()),
            "ds.json: \"s\" must be a whole number, not string \"8\"");
  EXPECT_EQ(ErrorOf(JsonInt(j, "t", "t", "ds.json").status()),
            "ds.json: \"t\" must be a whole number, not boolean true");
  EXPECT_FALSE(JsonInt(j, "none", "none", "ds.json")->has_value());
}

}  // namespace
}  // namespace pentamesh::spec

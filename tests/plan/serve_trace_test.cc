// plan/serve_trace.h: the Mooncake JSONL request trace, its bad inputs named by line and field,
// and its summary.
#include "plan/serve_trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace pentamesh::plan {
namespace {

constexpr int64_t kContext = 8192;

core::Result<std::vector<TraceRequest>> Parse(const std::string& text) {
  return ParseServeTrace(text, "t.jsonl", kContext);
}

TEST(ServeTrace, ReadsTheMooncakeFormat) {
  // AIPerf's trace replay example (timestamps in ms, hash_ids ignored), a decimal timestamp,
  // two arrivals at once, a blank line and a CRLF line ending.
  const auto r = Parse(
      "{\"timestamp\": 0, \"input_length\": 655, \"output_length\": 52, \"hash_ids\": [46, 47]}\n"
      "\n"
      "{\"timestamp\": 10535, \"input_length\": 672, \"output_length\": 26, \"hash_ids\": [46, "
      "47]}\r\n"
      "{\"timestamp\": 10535, \"input_length\": 100, \"output_length\": 1}\n"
      "{\"output_length\": 7, \"input_length\": 8185, \"timestamp\": 27482.5}");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[1].arrival_s, 10.535);
  EXPECT_EQ((*r)[1].input_tokens, 672);
  EXPECT_EQ((*r)[1].output_tokens, 26);
  EXPECT_EQ((*r)[3].arrival_s, 27.4825);
  const TraceSummary s = SummarizeTrace(*r);
  EXPECT_EQ(s.requests, 4);
  EXPECT_DOUBLE_EQ(s.mean_input_tokens, (655.0 + 672 + 100 + 8185) / 4);
  EXPECT_DOUBLE_EQ(s.mean_output_tokens, (52.0 + 26 + 1 + 7) / 4);
  EXPECT_DOUBLE_EQ(s.duration_s, 27.4825);
  EXPECT_EQ(s.max_input_tokens, 8185);
  EXPECT_EQ(s.max_total_tokens, 8192);
}

TEST(ServeTrace, BadInputNamesTheLineAndField) {
  const std::string ok = "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n";
  struct Case {
    std::string text, error;
  };
  const Case cases[] = {
      {"", "t.jsonl: no requests"},
      {"\n  \n\r\n", "t.jsonl: no requests"},
      {ok + "{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 2: \"timestamp\" -1 is out of range [0, 1e+12] ms"},
      {ok + "{\"timestamp\": 1e400, \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 2: number '1e400' is out of range (not a finite double)"},
      {"{\"timestamp\": NaN, \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 1: not valid JSON"},
      {"{\"timestamp\": 1e13, \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 1: \"timestamp\" 10000000000000.0 is out of range [0, 1e+12] ms"},
      {"{\"timestamp\": 123456789012345678901, \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 1: \"timestamp\" 1.2345678901234568e+20 is out of range"},
      {"{\"timestamp\": 18446744073709551615, \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 1: \"/timestamp\": 18446744073709551615 is out of range"},
      {"{\"timestamp\": \"0\", \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 1: \"timestamp\" must be a number of milliseconds, not string"},
      {ok + ok + "{\"timestamp\": 4, \"input_length\": 10, \"output_length\": 2}",
       "t.jsonl line 3: \"timestamp\" 4 ms is before the line above's 5 ms"},
      {ok + "{\"timestamp\": 6, \"input_length\": 0, \"output_length\": 2}",
       "t.jsonl line 2: \"input_length\" 0 is out of range [1, "},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 1.5}",
       "t.jsonl line 1: \"output_length\" must be a whole number, got 1.5"},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 3000000000}",
       "t.jsonl line 1: \"output_length\" 3000000000 is out of range"},
      {"{\"timestamp\": 6, \"input_length\": 8000, \"output_length\": 193}",
       "t.jsonl line 1: \"input_length\" 8000 + \"output_length\" 193 = 8193 tokens exceed the "
       "model's context of 8192"},
      {"{\"timestamp\": 6, \"output_length\": 2}", "t.jsonl line 1: \"input_length\" is missing"},
      {"{\"input_length\": 6, \"output_length\": 2}", "t.jsonl line 1: \"timestamp\" is missing"},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": null}",
       "t.jsonl line 1: \"output_length\" is missing"},
      {ok + "{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 2, \"prompt\": \"hi\"}",
       "t.jsonl line 2: unknown key \"prompt\""},
      {"[0, 10, 2]", "t.jsonl line 1: must be a JSON object"},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": 3}",
       "t.jsonl line 1: \"hash_ids\" must be an array"},
      {ok + "{\"timestamp\": 6, \"input_length\": 10", "t.jsonl line 2: not valid JSON"},
      {"{\"timestamp\": 6} {\"timestamp\": 7}", "t.jsonl line 1: not valid JSON"},
  };
  for (const Case& c : cases) {
    const auto r = Parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.error), std::string::npos) << c.text << "\n"
                                                                     << r.status().message();
    EXPECT_EQ(r.status().message().find("at line 1"), std::string::npos) << r.status().message();
  }
}

TEST(ServeTrace, FileThroughTheInputLayer) {
  const std::string dir = ::testing::TempDir();
  auto r = ReadServeTrace(dir, kContext);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos) << r.status().message();
  r = ReadServeTrace(dir + "/no-such-trace.jsonl", kContext);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-trace.jsonl: cannot open"), std::string::npos)
      << r.status().message();
  r = ReadServeTrace(std::string(PM_SOURCE_DIR) + "/configs/example-trace.jsonl", 8192);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->size(), 1u);
}

}  // namespace
}  // namespace pentamesh::plan

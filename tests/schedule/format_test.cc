#include "schedule/format.h"

#include <gtest/gtest.h>

#include <cmath>

#include "schedule/estimate.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {
namespace {

TEST(Format, ProgramsOneLinePerRank) {
  auto programs = MakeAll({Schedule::kInterleaved, 2, 2, 2});
  ASSERT_TRUE(programs.ok());
  EXPECT_EQ(FormatPrograms(*programs, 2),
            "rank 0: F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0\n"
            "rank 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0\n");
  EXPECT_EQ(FormatProgram({F(0), B(0), W(0)}), "F0 B0 W0");
}

TEST(Format, GridShowsStepsByRank) {
  auto sim = SimulateSchedule({Schedule::kOneFOneB, 2, 2, 1}, Costs::Equal());
  ASSERT_TRUE(sim.ok());
  // Full B costs 2 slots: the second shows "-"; idle slots show ".".
  EXPECT_EQ(FormatGrid(*sim, 1),
            "step  rank 0 rank 1\n"
            "   0      F0      .\n"
            "   1      F1     F0\n"
            "   2       .     B0\n"
            "   3       .      -\n"
            "   4      B0     F1\n"
            "   5       -     B1\n"
            "   6       .      -\n"
            "   7      B1      .\n"
            "   8       -      .\n");
  const std::string capped = FormatGrid(*sim, 1, 0.0, 3);
  EXPECT_NE(capped.find("... 6 more rows"), std::string::npos) << capped;
  // Degenerate slot widths and row limits fall back to safe values instead of overflowing.
  EXPECT_EQ(FormatGrid(*sim, 1, std::nan("")), FormatGrid(*sim, 1));
  EXPECT_NE(FormatGrid(*sim, 1, 1e-300, 2).find("more rows"), std::string::npos);
  EXPECT_NE(FormatGrid(*sim, 1, 0.0, -5).find("... 9 more rows"), std::string::npos);
  // Wider slots: each row covers two time units.
  const std::string wide = FormatGrid(*sim, 1, 2.0);
  EXPECT_EQ(std::count(wide.begin(), wide.end(), '\n'), 1 + 5);
}

TEST(Format, ChromeTraceHasOneEventPerAction) {
  auto sim = SimulateSchedule({Schedule::kZeroBubble, 2, 2, 1}, Costs::Equal());
  ASSERT_TRUE(sim.ok());
  const nlohmann::json trace = ChromeTrace(*sim, 1, 1000.0);
  const auto& events = trace.at("traceEvents");
  int complete = 0, metadata = 0;
  for (const auto& e : events) {
    if (e.at("ph") == "X") {
      ++complete;
      EXPECT_GE(e.at("dur").get<double>(), 1000.0 - 1e-9);
    }
    if (e.at("ph") == "M") ++metadata;
  }
  EXPECT_EQ(complete, 2 * 2 * 3);  // pp * m * {F, B, W}
  EXPECT_EQ(metadata, 2);
  // The first action of rank 1 is F0 at t = 1 unit = 1000 us.
  const auto& first = events.at(1 + 6 + 1);  // rank 0's metadata + 6 events, rank 1's metadata
  EXPECT_EQ(first.at("name"), "F0");
  EXPECT_EQ(first.at("tid"), 1);
  EXPECT_DOUBLE_EQ(first.at("ts").get<double>(), 1000.0);
  EXPECT_EQ(first.at("args").at("kind"), "F");
  // Round-trips through text.
  EXPECT_EQ(nlohmann::json::parse(trace.dump()), trace);
}

}  // namespace
}  // namespace pentamesh::schedule

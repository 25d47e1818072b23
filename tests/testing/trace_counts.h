// Counting a Chrome trace's events per rank (namespace pentamesh::testing): the pipeline actions
// (complete events of category F, B or W) and the collectives each rank (pid) recorded.
// Invariant: only complete ("X") events count; an event of a pid outside [0, ranks) fails the test.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pentamesh::testing {

struct TraceCounts {
  std::vector<int> actions, collectives;  // by rank
};

// Fails fatally on a pid >= ranks (wrap in ASSERT_NO_FATAL_FAILURE).
inline void CountTraceEvents(const nlohmann::json& trace, int ranks, TraceCounts* counts) {
  counts->actions.assign(static_cast<size_t>(ranks), 0);
  counts->collectives.assign(static_cast<size_t>(ranks), 0);
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const auto pid = e.at("pid").get<size_t>();
    ASSERT_LT(pid, counts->actions.size());
    const std::string cat = e.at("cat").get<std::string>();
    if (cat == "F" || cat == "B" || cat == "W") ++counts->actions[pid];
    if (cat == "collective") ++counts->collectives[pid];
  }
}

}  // namespace pentamesh::testing

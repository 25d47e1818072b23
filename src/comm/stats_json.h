// JSON form of the communication counters, for metrics.jsonl ("comm_bytes" keyed by group).
// Invariant: the totals equal CommStats::total(); "ops" lists only the op kinds with calls, by
// their OpName, with the same four fields.
#pragma once

#include <nlohmann/json.hpp>

#include "comm/communicator.h"

namespace pentamesh::comm {

// {"calls": 3, "bytes_wire": 36.0, "bytes_payload": 48, "time_s": 1e-5,
//  "ops": {"all_reduce": {"calls": 2, ...}, "send": {...}}}
nlohmann::json ToJson(const CommStats& stats);

}  // namespace pentamesh::comm

// plan::ParseServeTrace / ReadServeTrace: a request trace for `pentamesh serve --request-trace`,
// the Mooncake trace format that AIPerf (--custom-dataset-type mooncake_trace) and NVIDIA Dynamo
// replay: JSON Lines, one request an object per line,
//
//   {"timestamp": 0, "input_length": 655, "output_length": 52}
//   {"timestamp": 10535, "input_length": 672, "output_length": 26, "hash_ids": [46, 47]}
//
// timestamp: the request's arrival in milliseconds from the trace's start (a whole or decimal
// number, 0 <= t <= kMaxTraceTimestampMs, never before the line above: the trace is sorted by
// arrival); input_length and output_length: prompt and generated tokens (whole numbers >= 1,
// their sum at most the model's context). hash_ids (the prompt's KV block hashes, for prefix
// caching) is accepted and ignored: the simulator does not model a prefix cache. Any other key
// is refused. Blank lines are skipped.
//
// Limits: the file at most core::kMaxLogFileBytes (1 GiB), at most kMaxTraceRequests requests.
// Errors name the source, the line and the field: "t.jsonl line 3: \"input_length\" 0 is out of
// range [1, 2147483647]" (exit 2 at the command line).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "plan/serve_sim.h"

namespace pentamesh::plan {

inline constexpr int64_t kMaxTraceRequests = int64_t{1} << 20;
inline constexpr double kMaxTraceTimestampMs = 1e12;  // about 32 years

// The requests of `text` (a whole trace), arrival_s = timestamp / 1000. `max_context`: the
// model's max_seq_len (input + output tokens of a request at most). `source` names the input in
// errors.
core::Result<std::vector<TraceRequest>> ParseServeTrace(std::string_view text,
                                                        const std::string& source,
                                                        int64_t max_context);

// The trace file at `path` through core::ReadInputFile (a regular file, at most 1 GiB).
core::Result<std::vector<TraceRequest>> ReadServeTrace(const std::string& path,
                                                       int64_t max_context);

// A trace's summary, as `serve` prints it.
struct TraceSummary {
  int64_t requests = 0;
  double mean_input_tokens = 0, mean_output_tokens = 0;
  double duration_s = 0;  // last arrival - first arrival
  int64_t max_input_tokens = 0, max_total_tokens = 0;
};
TraceSummary SummarizeTrace(const std::vector<TraceRequest>& trace);

}  // namespace pentamesh::plan

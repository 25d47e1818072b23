// The request trace reader (plan/serve_trace.h).
#include "plan/serve_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/input.h"
#include "spec/json_input.h"

namespace pentamesh::plan {
namespace {

core::Status Bad(const std::string& where, const std::string& why) {
  return core::Status::Error(fmt::format("{}: {}", where, why));
}

// ParseJson's error on one line of the file, without its position inside that line ("at line 1").
core::Status OneLine(const core::Status& st) {
  std::string m = st.message();
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"at line 1, column", "at column"},
        {" at line 1 ", " "}}) {
    if (const size_t at = m.find(from); at != std::string::npos) m.replace(at, from.size(), to);
  }
  return core::Status::Error(m);
}

// The arrival of one line's object, in ms; `where` names the source and line.
core::Result<double> Timestamp(const nlohmann::json& obj, const std::string& where) {
  if (!obj.contains("timestamp") || obj["timestamp"].is_null())
    return Bad(where, "\"timestamp\" is missing (the arrival in ms from the trace's start)");
  const nlohmann::json& v = obj["timestamp"];
  if (!v.is_number())
    return Bad(where, fmt::format("\"timestamp\" must be a number of milliseconds, not {} {}",
                                  v.type_name(), v.dump()));
  const double t = v.get<double>();  // an integer beyond int64 was refused by ParseJson
  if (!std::isfinite(t) || t < 0 || t > kMaxTraceTimestampMs)
    return Bad(where, fmt::format("\"timestamp\" {} is out of range [0, {:g}] ms", v.dump(),
                                  kMaxTraceTimestampMs));
  return t;
}

// input_length or output_length: a whole number >= 1 (kMaxField at most; the caller checks the
// sum against the context).
core::Result<int64_t> Length(const nlohmann::json& obj, const char* key, const std::string& where) {
  PM_ASSIGN_OR_RETURN(const std::optional<int64_t> n, spec::JsonInt(obj, key, key, where, 1));
  if (!n) return Bad(where, fmt::format("\"{}\" is missing (tokens, a whole number >= 1)", key));
  return *n;
}

}  // namespace

core::Result<std::vector<TraceRequest>> ParseServeTrace(std::string_view text,
                                                        const std::string& source,
                                                        int64_t max_context) {
  std::vector<TraceRequest> out;
  double previous_ms = 0;
  int64_t line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view row = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{} line {}", source, line);
    if (static_cast<int64_t>(out.size()) == kMaxTraceRequests)
      return Bad(where,
                 fmt::format("more than {} requests (the limit of a trace)", kMaxTraceRequests));
    auto parsed = spec::ParseJson(row, where);
    if (!parsed.ok()) return OneLine(parsed.status());
    const nlohmann::json& obj = *parsed;
    if (!obj.is_object())
      return Bad(where, fmt::format("must be a JSON object with \"timestamp\", \"input_length\" "
                                    "and \"output_length\", not {}",
                                    obj.type_name()));
    for (const auto& [key, value] : obj.items()) {
      if (key != "timestamp" && key != "input_length" && key != "output_length" &&
          key != "hash_ids") {
        return Bad(where, fmt::format("unknown key \"{}\" (known: timestamp, input_length, "
                                      "output_length, hash_ids)",
                                      key));
      }
    }
    if (obj.contains("hash_ids") && !obj["hash_ids"].is_array() && !obj["hash_ids"].is_null())
      return Bad(where,
                 fmt::format("\"hash_ids\" must be an array, not {}", obj["hash_ids"].type_name()));
    PM_ASSIGN_OR_RETURN(const double ms, Timestamp(obj, where));
    if (!out.empty() && ms < previous_ms)
      return Bad(where, fmt::format("\"timestamp\" {} ms is before the line above's {} ms (the "
                                    "trace must be sorted by arrival)",
                                    obj["timestamp"].dump(), previous_ms));
    PM_ASSIGN_OR_RETURN(const int64_t input, Length(obj, "input_length", where));
    PM_ASSIGN_OR_RETURN(const int64_t output, Length(obj, "output_length", where));
    if (input + output > max_context)
      return Bad(where, fmt::format("\"input_length\" {} + \"output_length\" {} = {} tokens "
                                    "exceed the model's context of {} (max_seq_len)",
                                    input, output, input + output, max_context));
    previous_ms = ms;
    out.push_back({.arrival_s = ms / 1e3, .input_tokens = input, .output_tokens = output});
  }
  if (out.empty())
    return Bad(source,
               "no requests (a trace has one JSON object per line: \"timestamp\" in ms, "
               "\"input_length\", \"output_length\")");
  return out;
}

core::Result<std::vector<TraceRequest>> ReadServeTrace(const std::string& path,
                                                       int64_t max_context) {
  PM_ASSIGN_OR_RETURN(const std::string text,
                      core::ReadInputFile(path, core::kMaxLogFileBytes, "request trace"));
  return ParseServeTrace(text, path, max_context);
}

TraceSummary SummarizeTrace(const std::vector<TraceRequest>& trace) {
  TraceSummary s;
  if (trace.empty()) return s;
  double input = 0, output = 0;
  for (const TraceRequest& r : trace) {
    input += static_cast<double>(r.input_tokens);
    output += static_cast<double>(r.output_tokens);
    s.max_input_tokens = std::max(s.max_input_tokens, r.input_tokens);
    s.max_total_tokens = std::max(s.max_total_tokens, r.input_tokens + r.output_tokens);
  }
  s.requests = static_cast<int64_t>(trace.size());
  s.mean_input_tokens = input / static_cast<double>(s.requests);
  s.mean_output_tokens = output / static_cast<double>(s.requests);
  s.duration_s = trace.back().arrival_s - trace.front().arrival_s;
  return s;
}

}  // namespace pentamesh::plan

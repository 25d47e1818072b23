// JSON form of CommStats; see stats_json.h.
#include "comm/stats_json.h"

namespace pentamesh::comm {
namespace {

nlohmann::json OpJson(const OpStats& s) {
  return {{"calls", s.calls},
          {"bytes_wire", s.bytes_wire},
          {"bytes_payload", s.bytes_payload},
          {"time_s", s.time_s}};
}

}  // namespace

nlohmann::json ToJson(const CommStats& stats) {
  nlohmann::json out = OpJson(stats.total());
  nlohmann::json ops = nlohmann::json::object();
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (stats[op].calls > 0) ops[OpName(op)] = OpJson(stats[op]);
  }
  out["ops"] = std::move(ops);
  return out;
}

}  // namespace pentamesh::comm

// JSON for a cost::Estimate (see estimate_json.h).
#include "cli/estimate_json.h"

namespace pentamesh::cli {

nlohmann::json LayoutJson(const spec::Layout& l) {
  return {{"dp", l.dp},
          {"tp", l.tp},
          {"pp", l.pp},
          {"cp", l.cp},
          {"ep", l.ep},
          {"zero", l.zero},
          {"mbs", l.mbs},
          {"recompute", spec::ToString(l.recompute)},
          {"schedule", spec::ToString(l.schedule)},
          {"virtual_stages", l.virtual_stages},
          {"cp_kind", spec::ToString(l.cp_kind)},
          {"ep_placement", spec::ToString(l.ep_placement)},
          {"sp", l.sp},
          {"text", spec::FormatLayout(l)}};
}

static nlohmann::json MemoryJson(const cost::Estimate& e) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, bytes] : e.memory.components()) j[name] = bytes;
  j["total"] = e.memory.total;
  j["capacity"] = e.memory.capacity;
  j["stage"] = e.memory_stage;
  return j;
}

static nlohmann::json TimeJson(const cost::Estimate& e) {
  nlohmann::json j;
  for (const cost::TimeTerm& term : cost::kTimeTerms) j[term.name] = e.time.*term.field;
  j["step"] = e.time.step;
  j["critical_stage"] = e.critical_stage;
  return j;
}

nlohmann::json EstimateJson(const cost::Estimate& e) {
  return {
      {"layout", LayoutJson(e.layout)},
      {"fits", e.fits},
      {"violations", e.violations},
      {"microbatches", e.microbatches},
      {"memory", MemoryJson(e)},
      {"time", TimeJson(e)},
      {"bubble_fraction", e.bubble_fraction},
      {"mfu", e.mfu},
      {"mfu_causal", e.mfu_causal},
      {"hfu", e.hfu},
      {"tokens_per_s", e.tokens_per_s},
      {"days", e.days},
      {"cost_usd", e.cost_usd},
      {"comm_bytes",
       {{"tp", e.comm_bytes.tp},
        {"cp", e.comm_bytes.cp},
        {"ep", e.comm_bytes.ep},
        {"pp", e.comm_bytes.pp},
        {"dp", e.comm_bytes.dp}}},
  };
}

}  // namespace pentamesh::cli

// JSON for a cost::Estimate (see estimate_json.h).
#include "cli/estimate_json.h"

#include "cost/stage_params.h"

namespace pentamesh::cli {

// Every field of spec::LayoutFields() under its key (enumerated fields as their word, sp as a
// bool, etp as the expert TP degree in effect, recompute_modules as its '+'-joined words, "" for
// the default), and the --layout text.
nlohmann::json LayoutJson(const spec::Layout& l) {
  nlohmann::json j = nlohmann::json::object();
  for (const spec::LayoutFieldInfo& f : spec::LayoutFields()) {
    const int64_t v = spec::FieldValue(l, f.field);
    if (f.field == spec::LayoutField::kSp) {
      j[f.key] = v != 0;
    } else if (f.field == spec::LayoutField::kRecomputeModules) {
      j[f.key] = spec::RecomputeModulesText(static_cast<uint32_t>(v));
    } else if (!f.words.empty()) {
      j[f.key] = spec::FieldWordFor(f.field, v);
    } else {
      j[f.key] = v;
    }
  }
  j["text"] = spec::FormatLayout(l);
  return j;
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

nlohmann::json StagesJson(const cost::Context& ctx, const spec::Layout& l) {
  nlohmann::json j = nlohmann::json::array();
  if (cost::CheckLayout(ctx, l) != cost::Rule::kOk) return j;
  for (int64_t r = 0; r < l.pp; ++r) {
    const cost::StageParams s = cost::ParamsForStage(ctx, l, r);
    j.push_back({{"pp_rank", r},
                 {"layers", s.layers},
                 {"moe_layers", s.moe_layers},
                 {"params_dense", s.params_dense},
                 {"params_expert", s.params_expert}});
  }
  return j;
}

}  // namespace pentamesh::cli

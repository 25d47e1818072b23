#include "spec/rope_toml.h"

#include <fmt/format.h>

#include "spec/field_reader.h"

namespace pentamesh::spec {

void ReadRopeScaling(const toml::table& t, const std::string& prefix,
                     std::vector<std::string>& errors, RopeScaling& rope) {
  FieldReader r(&t, prefix, &errors);
  std::string kind = "none";
  r.String("kind", kind, true);
  r.Double("theta", rope.theta, false);
  if (kind == "none") {
    rope.kind = RopeScalingKind::kNone;
  } else if (kind == "base") {
    rope.kind = RopeScalingKind::kBaseChange;
    if (t.get("theta") == nullptr) r.Error("theta", "missing (required for kind = \"base\")");
  } else if (kind == "llama3") {
    rope.kind = RopeScalingKind::kLlama3;
    r.Double("factor", rope.factor, true);
    r.Double("low_freq_factor", rope.low_freq_factor, true);
    r.Double("high_freq_factor", rope.high_freq_factor, true);
    r.Int("original_max_positions", rope.original_max_positions, true);
    if (rope.high_freq_factor <= rope.low_freq_factor && rope.low_freq_factor > 0) {
      r.Error("high_freq_factor", fmt::format("{} must exceed low_freq_factor={}",
                                              rope.high_freq_factor, rope.low_freq_factor));
    }
  } else if (kind == "yarn") {
    rope.kind = RopeScalingKind::kYarn;
    r.Double("factor", rope.factor, true);
    r.Int("original_max_positions", rope.original_max_positions, true);
    r.Double("beta_fast", rope.beta_fast, false);
    r.Double("beta_slow", rope.beta_slow, false);
    if (rope.beta_fast <= rope.beta_slow) {
      r.Error("beta_fast",
              fmt::format("{} must exceed beta_slow={}", rope.beta_fast, rope.beta_slow));
    }
  } else {
    r.Error("kind", fmt::format("'{}' is not one of none, llama3, yarn, base", kind));
  }
  if ((rope.kind == RopeScalingKind::kLlama3 || rope.kind == RopeScalingKind::kYarn) &&
      rope.factor < 1) {
    r.Error("factor", fmt::format("{} must be >= 1 (it stretches the context)", rope.factor));
  }
  r.RejectUnknown();
}

toml::table RopeScalingTable(const RopeScaling& rope) {
  toml::table t;
  t.insert("kind", RopeScalingName(rope.kind));
  if (rope.theta > 0) t.insert("theta", rope.theta);
  switch (rope.kind) {
    case RopeScalingKind::kNone:
    case RopeScalingKind::kBaseChange:
      break;
    case RopeScalingKind::kLlama3:
      t.insert("factor", rope.factor);
      t.insert("low_freq_factor", rope.low_freq_factor);
      t.insert("high_freq_factor", rope.high_freq_factor);
      t.insert("original_max_positions", rope.original_max_positions);
      break;
    case RopeScalingKind::kYarn:
      t.insert("factor", rope.factor);
      t.insert("original_max_positions", rope.original_max_positions);
      t.insert("beta_fast", rope.beta_fast);
      t.insert("beta_slow", rope.beta_slow);
      break;
  }
  return t;
}

}  // namespace pentamesh::spec

// RoPE scaling (spec::RopeScaling) in TOML, one set of keys wherever it appears: a recipe phase's
// `rope` table and a model's `rope_scaling` table ([model.rope_scaling], read by
// spec::ModelFromTomlText). Keys: kind = "none" | "base" | "llama3" | "yarn"; theta (the RoPE
// base, required for "base"); llama3: factor, low_freq_factor, high_freq_factor,
// original_max_positions; yarn: factor, original_max_positions, beta_fast, beta_slow. Keys the
// kind does not take are unknown keys. The writer gives back the table the reader reads
// (`train --recipe` puts each phase's scaling into the run's [model], so a checkpoint's saved
// config carries it to generate and HF export).
#pragma once

#include <toml++/toml.h>
#include <string>
#include <vector>

#include "spec/model_spec.h"

namespace pentamesh::spec {

// Reads `t` into `rope`; every error goes to `errors` named "<prefix>.<key>".
void ReadRopeScaling(const toml::table& t, const std::string& prefix,
                     std::vector<std::string>& errors, RopeScaling& rope);

// The table ReadRopeScaling reads back into `rope` (only the keys its kind takes).
toml::table RopeScalingTable(const RopeScaling& rope);

}  // namespace pentamesh::spec

// The JSON of one costed serving layout (cost::ServeEstimate): what `serve --json` prints per
// layout and `generate --host-profile --json` prints as "predicted" (cli/serve.cc).
#pragma once

#include <nlohmann/json.hpp>

#include "cost/inference.h"

namespace pentamesh::cli {

// Layout, fit and violations, memory bytes per category, KV cache, experts, the prefill and decode
// terms in ms ("prefill_ms", "decode_ms": each term and the total / itl), TTFT, ITL and cost.
nlohmann::json ServeEstimateJson(const cost::ServeEstimate& e);

}  // namespace pentamesh::cli

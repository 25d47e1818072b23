// The failure and checkpoint flags of `estimate` and `plan` (cost/goodput.h's inputs), their JSON
// and their text block. Bad values are parse errors naming the flag (exit 2). When no flag is
// given, cost::GoodputParams' defaults apply (Llama 3's failure rates, async checkpoints to a
// 2 TB/s file system) and the output says which inputs are defaults.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "cost/cost.h"
#include "cost/goodput.h"
#include "spec/cluster_spec.h"

namespace pentamesh::cli {

struct GoodputArgs {
  std::string per_gpu_day;   // "hardware=3e-4,network=0,software=7e-5"; empty = default
  std::string per_node_day;  // same kinds
  std::optional<double> storage_write_gbps, storage_read_gbps, host_copy_gbps, restart_s;
  std::string mode;  // sync, async, memory; empty = default (async)
};

// Adds --failures-per-gpu-day --failures-per-node-day --storage-write-gbps --storage-read-gbps
// --host-copy-gbps --restart-s --ckpt-mode.
void AddGoodputOptions(CLI::App& sub, GoodputArgs& args);

struct GoodputInputs {
  cost::GoodputParams params;
  std::vector<std::string> defaults;  // the inputs left at their defaults, by JSON key
};

// Either rate flag replaces all default rates (kinds and units not given are 0). Errors name the
// flag: an unknown kind, a rate that is not a number >= 0, --ckpt-mode memory on one node.
core::Result<GoodputInputs> MakeGoodputInputs(const GoodputArgs& args,
                                              const spec::ClusterSpec& cluster);

// The inputs with their values, the list of defaults and the rates' source.
nlohmann::json GoodputInputsJson(const GoodputInputs& in);
// Every field of a cost::Goodput; the infinite ones (mtbf_s and the intervals when nothing fails;
// days, days_lost and cost_usd when nothing progresses) are left out, so the JSON holds no null.
nlohmann::json GoodputJson(const cost::Goodput& g);

// The text block: checkpoint, stall, failures, interval, time lost, goodput, days and cost.
void PrintGoodput(const GoodputInputs& in, const cost::Estimate& e, const cost::Goodput& g,
                  const std::string& indent);

}  // namespace pentamesh::cli

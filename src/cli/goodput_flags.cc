// Failure and checkpoint flags, JSON and text (see goodput_flags.h). No formula lives here.
#include "cli/goodput_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "cli/flags.h"
#include "spec/limits.h"

namespace pentamesh::cli {
namespace {

constexpr double kMaxRate = 1e6;  // failures per GPU- or node-day: far above any real rate
constexpr double kMaxGbps = 1e9;
constexpr double kMaxRestartS = 1e8;
constexpr size_t kInputCount = 6;  // rates, write, read, host copy, restart, mode

CLI::Validator Above(double min_value, double max_value) {
  return CLI::Validator(
      [min_value, max_value](std::string& text) -> std::string {
        core::Result<double> v =
            spec::ParseNumber("", text, min_value, max_value, /*strictly_above=*/true);
        return v.ok() ? "" : v.status().message();
      },
      fmt::format("NUMBER > {:g}", min_value));
}

// "hardware=3e-4,software=7e-5" -> rates by kind (kinds not named are 0).
core::Result<std::array<double, 3>> ParseRates(const std::string& flag, const std::string& text) {
  std::array<double, 3> rates{};
  std::array<bool, 3> seen{};
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const size_t eq = item.find('=');
    bool known = false;
    for (cost::FailureKind kind : cost::kFailureKinds) {
      const auto i = static_cast<size_t>(kind);
      if (eq == std::string::npos || item.substr(0, eq) != cost::ToString(kind)) continue;
      if (seen[i]) {
        return core::Status::Error(
            fmt::format("{}: '{}' is given twice", flag, item.substr(0, eq)));
      }
      PM_ASSIGN_OR_RETURN(rates[i],
                          spec::ParseNumber(fmt::format("{}: {}", flag, item.substr(0, eq)),
                                            item.substr(eq + 1), 0, kMaxRate));
      seen[i] = known = true;
    }
    if (!known) {
      return core::Status::Error(fmt::format(
          "{}: '{}' is not KIND=RATE with KIND one of hardware, network, software", flag, item));
    }
    begin = end + 1;
  }
  return rates;
}

core::Result<cost::CheckpointMode> ParseMode(const std::string& text) {
  for (cost::CheckpointMode m :
       {cost::CheckpointMode::kSync, cost::CheckpointMode::kAsync, cost::CheckpointMode::kMemory}) {
    if (text == cost::ToString(m)) return m;
  }
  return core::Status::Error(
      fmt::format("--ckpt-mode: '{}' is not a checkpoint mode (sync, async, memory)", text));
}

// Sets `field` from `value` when given; otherwise records `name` as a default.
void Take(const std::optional<double>& value, double& field, const char* name,
          std::vector<std::string>& defaults) {
  if (value) {
    field = *value;
  } else {
    defaults.emplace_back(name);
  }
}

nlohmann::json RatesJson(const std::array<double, 3>& rates) {
  nlohmann::json j = nlohmann::json::object();
  for (cost::FailureKind kind : cost::kFailureKinds) {
    j[std::string(cost::ToString(kind))] = rates[static_cast<size_t>(kind)];
  }
  return j;
}

std::string Duration(double s) {
  if (!std::isfinite(s)) return "never";
  if (s < 120) return fmt::format("{:.3g} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.2f} h", s / 3600);
}

}  // namespace

void AddGoodputOptions(CLI::App& sub, GoodputArgs& a) {
  sub.add_option("--failures-per-gpu-day", a.per_gpu_day,
                 "job-stopping failures per GPU-day, KIND=RATE,... (KIND: hardware, network, "
                 "software); with --failures-per-node-day it replaces the default Llama 3 rates");
  sub.add_option("--failures-per-node-day", a.per_node_day,
                 "job-stopping failures per node-day, KIND=RATE,...");
  sub.add_option("--storage-write-gbps", a.storage_write_gbps,
                 "parallel file system's aggregate write bandwidth, GB/s (default 2000)")
      ->check(Above(0, kMaxGbps));
  sub.add_option("--storage-read-gbps", a.storage_read_gbps,
                 "parallel file system's aggregate read bandwidth, GB/s (default 2000)")
      ->check(Above(0, kMaxGbps));
  sub.add_option("--host-copy-gbps", a.host_copy_gbps,
                 "device-to-host copy per GPU, GB/s (default 50)")
      ->check(Above(0, kMaxGbps));
  sub.add_option("--restart-s", a.restart_s,
                 "seconds from a failure to training again, before reading the checkpoint "
                 "(default 600)")
      ->check(NumberIn(0, kMaxRestartS));
  sub.add_option("--ckpt-mode", a.mode,
                 "checkpoints: sync (training waits for the write), async (waits for the copy to "
                 "host; default), memory (in-memory, replicated to a partner node)");
}

core::Result<GoodputInputs> MakeGoodputInputs(const GoodputArgs& a,
                                              const spec::ClusterSpec& cluster) {
  GoodputInputs in;
  cost::GoodputParams& p = in.params;
  if (a.per_gpu_day.empty() && a.per_node_day.empty()) {
    in.defaults.emplace_back("failure_rates");
  } else {
    p.rates = {};
    if (!a.per_gpu_day.empty()) {
      PM_ASSIGN_OR_RETURN(p.rates.per_gpu_day, ParseRates("--failures-per-gpu-day", a.per_gpu_day));
    }
    if (!a.per_node_day.empty()) {
      PM_ASSIGN_OR_RETURN(p.rates.per_node_day,
                          ParseRates("--failures-per-node-day", a.per_node_day));
    }
  }
  Take(a.storage_write_gbps, p.storage_write_gbps, "storage_write_gbps", in.defaults);
  Take(a.storage_read_gbps, p.storage_read_gbps, "storage_read_gbps", in.defaults);
  Take(a.host_copy_gbps, p.host_copy_gbps, "host_copy_gbps", in.defaults);
  Take(a.restart_s, p.restart_s, "restart_s", in.defaults);
  if (a.mode.empty()) {
    in.defaults.emplace_back("checkpoint_mode");
  } else {
    PM_ASSIGN_OR_RETURN(p.mode, ParseMode(a.mode));
  }
  if (p.mode == cost::CheckpointMode::kMemory && cluster.nodes < 2) {
    return core::Status::Error(
        "--ckpt-mode memory: the partner copy must live on another node; the cluster has 1 node");
  }
  if (p.mode == cost::CheckpointMode::kMemory &&
      cluster.inter_node_gbps * static_cast<double>(cluster.nics_per_node) <= 0) {
    return core::Status::Error("--ckpt-mode memory: the cluster has no inter-node bandwidth");
  }
  return in;
}

nlohmann::json GoodputInputsJson(const GoodputInputs& in) {
  const cost::GoodputParams& p = in.params;
  return {{"failures_per_gpu_day", RatesJson(p.rates.per_gpu_day)},
          {"failures_per_node_day", RatesJson(p.rates.per_node_day)},
          {"storage_write_gbps", p.storage_write_gbps},
          {"storage_read_gbps", p.storage_read_gbps},
          {"host_copy_gbps", p.host_copy_gbps},
          {"restart_s", p.restart_s},
          {"checkpoint_mode", std::string(cost::ToString(p.mode))},
          {"defaults", in.defaults},
          {"default_rates_source",
           "Llama 3 (Dubey et al. 2024, Table 5): 419 unexpected interruptions in 54 days on "
           "16,384 H100s (2,048 nodes); docs/COST_MODEL.md, Goodput"}};
}

nlohmann::json GoodputJson(const cost::Goodput& g) {
  nlohmann::json j = {{"checkpoint_bytes_rank", g.checkpoint_bytes_rank},
                      {"checkpoint_bytes_total", g.checkpoint_bytes_total},
                      {"write_s", g.write_s},
                      {"stall_s", g.stall_s},
                      {"read_s", g.read_s},
                      {"failures_per_day", g.failures_per_day},
                      {"interval_rule", "Young 1974: sqrt(2 * stall_s * mtbf_s), at least write_s"},
                      {"lag_s", g.lag_s},
                      {"lost_per_failure_s", g.lost_per_failure_s},
                      {"lost_to_failures_per_day_s", g.lost_to_failures_per_day_s},
                      {"stalls_per_day_s", g.stalls_per_day_s},
                      {"goodput", g.goodput},
                      {"progresses", g.progresses}};
  // Infinite when nothing fails (the intervals) or nothing progresses (days, cost): left out.
  const std::pair<const char*, double> maybe_infinite[] = {
      {"mtbf_s", g.mtbf_s},         {"young_interval_s", g.young_interval_s},
      {"interval_s", g.interval_s}, {"days", g.days},
      {"days_lost", g.days_lost},   {"cost_usd", g.cost_usd}};
  for (const auto& [key, value] : maybe_infinite) {
    if (std::isfinite(value)) j[key] = value;
  }
  return j;
}

void PrintGoodput(const GoodputInputs& in, const cost::Estimate& e, const cost::Goodput& g,
                  const std::string& indent) {
  const bool all_defaults = in.defaults.size() == kInputCount;
  fmt::print(
      "{}failures and checkpoints, {} checkpoints; {}:\n", indent, cost::ToString(in.params.mode),
      all_defaults
          ? "every input a default (Llama 3's failure rates)"
          : "defaults: " + (in.defaults.empty() ? std::string("none")
                                                : fmt::format("{}", fmt::join(in.defaults, ", "))));
  fmt::print(
      "{}  checkpoint {:.2f} GB per rank, {:.4g} TB in all: {} to write, stalls training {}\n",
      indent, g.checkpoint_bytes_rank / 1e9, g.checkpoint_bytes_total / 1e12, Duration(g.write_s),
      Duration(g.stall_s));
  fmt::print(
      "{}  {:.3g} failures a day (MTBF {}); interval {} (Young sqrt(2 stall MTBF) {}, "
      "at least the write)\n",
      indent, g.failures_per_day, Duration(g.mtbf_s), Duration(g.interval_s),
      Duration(g.young_interval_s));
  fmt::print(
      "{}  lost per failure {} (interval/2 + write lag {} + restart {} + read {}); a "
      "day: {} to failures, {} to stalls\n",
      indent, Duration(g.lost_per_failure_s), Duration(g.lag_s), Duration(in.params.restart_s),
      Duration(g.read_s), Duration(g.lost_to_failures_per_day_s), Duration(g.stalls_per_day_s));
  if (!g.progresses) {
    fmt::print(
        "{}  goodput 0: failures come faster than a checkpoint and a restart; the run never "
        "finishes\n",
        indent);
    return;
  }
  fmt::print(
      "{}  goodput {:.1f}%: {:.1f} days and USD {:.4g} with failures ({:.1f} days without, "
      "{:.1f} lost)\n",
      indent, 100 * g.goodput, g.days, g.cost_usd, e.days, g.days_lost);
}

}  // namespace pentamesh::cli

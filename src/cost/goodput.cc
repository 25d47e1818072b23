// Goodput of a layout under failures and checkpoints (see goodput.h; docs/COST_MODEL.md,
// "Goodput").
#include "cost/goodput.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace pentamesh::cost {
namespace {

constexpr double kSecondsPerDay = 86400;
constexpr double kGB = 1e9;

// Table 5 of Dubey et al. 2024, grouped as goodput.h lists (the four groups add up to 419).
constexpr double kLlama3HardwareGpu = 148 + 72 + 19 + 17 + 6 + 6;
constexpr double kLlama3HardwareNode = 32 + 3 + 3 + 2 + 2 + 2 + 2;
constexpr double kLlama3NetworkNode = 35 + 7;
constexpr double kLlama3SoftwareGpu = 54 + 7 + 2;
static_assert(kLlama3HardwareGpu + kLlama3HardwareNode + kLlama3NetworkNode + kLlama3SoftwareGpu ==
              kLlama3Interruptions);

size_t Index(FailureKind kind) { return static_cast<size_t>(kind); }

// What one rank checkpoints: its weights and optimizer state (the most loaded stage's).
double CheckpointBytesRank(const Estimate& e) { return e.memory.weights + e.memory.optimizer; }

double JobFailuresPerDay(const spec::ClusterSpec& cluster, const FailureRates& rates) {
  double per_day = 0;
  for (FailureKind kind : kFailureKinds) {
    per_day += rates.per_gpu_day[Index(kind)] * static_cast<double>(cluster.gpus()) +
               rates.per_node_day[Index(kind)] * static_cast<double>(cluster.nodes);
  }
  return per_day;
}

void CheckParams(const spec::ClusterSpec& cluster, const Estimate& e, const GoodputParams& p) {
  for (FailureKind kind : kFailureKinds) {
    PM_CHECK(p.rates.per_gpu_day[Index(kind)] >= 0 && p.rates.per_node_day[Index(kind)] >= 0)
        << "negative failure rate (" << ToString(kind) << ")";
  }
  PM_CHECK(p.storage_write_gbps > 0 && p.storage_read_gbps > 0 && p.host_copy_gbps > 0)
      << "bandwidths must be positive";
  PM_CHECK(p.restart_s >= 0) << "restart_s " << p.restart_s;
  PM_CHECK(cluster.gpus() > 0 && e.days >= 0) << "goodput of an estimate that does not run";
  PM_CHECK(p.mode != CheckpointMode::kMemory || cluster.nodes >= 2)
      << "in-memory checkpoints need a partner on another node";
}

// write_s, stall_s, read_s and lag_s of one checkpoint of `bytes_rank` per rank.
void CheckpointTimes(const spec::ClusterSpec& cluster, const GoodputParams& p, Goodput& g) {
  const double copy_s = g.checkpoint_bytes_rank / (p.host_copy_gbps * kGB);
  switch (p.mode) {
    case CheckpointMode::kSync:
    case CheckpointMode::kAsync:
      g.write_s = copy_s + g.checkpoint_bytes_total / (p.storage_write_gbps * kGB);
      g.read_s = g.checkpoint_bytes_total / (p.storage_read_gbps * kGB);
      break;
    case CheckpointMode::kMemory: {
      // A rank's share of its node's NICs carries its copy to (and back from) its partner.
      const double nic_gbps = cluster.inter_node_gbps * static_cast<double>(cluster.nics_per_node) /
                              static_cast<double>(cluster.gpus_per_node);
      PM_CHECK(nic_gbps > 0) << "cluster without an inter-node link";
      g.write_s = copy_s + g.checkpoint_bytes_rank / (nic_gbps * kGB);
      g.read_s = g.checkpoint_bytes_rank / (nic_gbps * kGB);
      break;
    }
  }
  const bool sync = p.mode == CheckpointMode::kSync;
  g.stall_s = sync ? g.write_s : copy_s;
  g.lag_s = sync ? 0.0 : g.write_s;
}

}  // namespace

std::string_view ToString(FailureKind kind) {
  switch (kind) {
    case FailureKind::kHardware:
      return "hardware";
    case FailureKind::kNetwork:
      return "network";
    case FailureKind::kSoftware:
      return "software";
  }
  return "?";
}

std::string_view ToString(CheckpointMode mode) {
  switch (mode) {
    case CheckpointMode::kSync:
      return "sync";
    case CheckpointMode::kAsync:
      return "async";
    case CheckpointMode::kMemory:
      return "memory";
  }
  return "?";
}

FailureRates Llama3FailureRates() {
  const double gpu_days = kLlama3Days * kLlama3Gpus;
  const double node_days = kLlama3Days * kLlama3Nodes;
  FailureRates r;
  r.per_gpu_day[Index(FailureKind::kHardware)] = kLlama3HardwareGpu / gpu_days;
  r.per_node_day[Index(FailureKind::kHardware)] = kLlama3HardwareNode / node_days;
  r.per_node_day[Index(FailureKind::kNetwork)] = kLlama3NetworkNode / node_days;
  r.per_gpu_day[Index(FailureKind::kSoftware)] = kLlama3SoftwareGpu / gpu_days;
  return r;
}

Goodput EstimateGoodput(const spec::ClusterSpec& cluster, const Estimate& e,
                        const GoodputParams& p) {
  CheckParams(cluster, e, p);
  Goodput g;
  g.checkpoint_bytes_rank = CheckpointBytesRank(e);
  g.checkpoint_bytes_total = g.checkpoint_bytes_rank * static_cast<double>(cluster.gpus());
  CheckpointTimes(cluster, p, g);
  g.failures_per_day = JobFailuresPerDay(cluster, p.rates);
  if (g.failures_per_day <= 0) {  // never fails: never worth a checkpoint
    g.mtbf_s = g.young_interval_s = g.interval_s = INFINITY;
    g.goodput = 1;
  } else {
    g.mtbf_s = kSecondsPerDay / g.failures_per_day;
    g.young_interval_s = std::sqrt(2 * g.stall_s * g.mtbf_s);
    g.interval_s = std::max(g.young_interval_s, g.write_s);
    g.lost_per_failure_s = g.interval_s / 2 + g.lag_s + p.restart_s + g.read_s;
    g.lost_to_failures_per_day_s = g.failures_per_day * g.lost_per_failure_s;
    g.stalls_per_day_s = kSecondsPerDay * g.stall_s / g.interval_s;
    g.goodput = 1 - g.stall_s / g.interval_s - g.lost_per_failure_s / g.mtbf_s;
  }
  g.progresses = g.goodput > 0;
  if (!g.progresses) {
    g.goodput = 0;
    g.days = g.days_lost = g.cost_usd = INFINITY;
    return g;
  }
  g.days = e.days / g.goodput;
  g.days_lost = g.days - e.days;
  g.cost_usd = e.cost_usd / g.goodput;
  return g;
}

Reshard EstimateReshard(const spec::ClusterSpec& cluster, const Estimate& from, const Estimate& to,
                        const GoodputParams& p) {
  CheckParams(cluster, from, p);
  CheckParams(cluster, to, p);
  const double gpus = static_cast<double>(cluster.gpus());
  const double from_rank = CheckpointBytesRank(from);
  Reshard r;
  r.bytes_written = from_rank * gpus;
  r.bytes_read = CheckpointBytesRank(to) * gpus;
  r.write_s = from_rank / (p.host_copy_gbps * kGB) + r.bytes_written / (p.storage_write_gbps * kGB);
  r.read_s = r.bytes_read / (p.storage_read_gbps * kGB);
  r.restart_s = p.restart_s;
  r.seconds = r.write_s + r.restart_s + r.read_s;
  return r;
}

double GoodputTokensPerS(const spec::ClusterSpec& cluster, const Estimate& e,
                         const GoodputParams& p) {
  return e.tokens_per_s * EstimateGoodput(cluster, e, p).goodput;
}

}  // namespace pentamesh::cost

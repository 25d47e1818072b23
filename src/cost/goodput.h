// Goodput: what failures and checkpoints cost a training run. From the checkpoint a layout's
// memory model gives (weights + optimizer state per rank, cost::Memory), the failure rates, the
// storage bandwidths, the restart time and the checkpoint mode, it computes the checkpoint's write
// time and the stall it causes, the checkpoint interval (Young's first-order optimum), the
// expected time lost per failure and per day, the goodput fraction, and days and cost with
// failures. Every formula of it lives here; docs/COST_MODEL.md ("Goodput") states each with its
// parameters, defaults and sources, and works the Llama 3 405B case by hand.
//
// Units: seconds, bytes, GB/s = 1e9 bytes per second, rates in expected failures per GPU-day or
// per node-day (a day = 86,400 s of wall time).
//
// Usage:
//   cost::GoodputParams p;                       // Llama 3's failure rates, async to Tectonic
//   cost::Goodput g = cost::EstimateGoodput(cluster, estimate, p);
//   if (g.progresses) fmt::print("{:.1f}% goodput, {:.1f} days\n", 100 * g.goodput, g.days);
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "cost/cost.h"
#include "spec/cluster_spec.h"

namespace pentamesh::cost {

// What failed: hardware (GPU, host), network (switches, cables, NICs), software (bugs, hangs).
enum class FailureKind { kHardware, kNetwork, kSoftware };
inline constexpr std::array<FailureKind, 3> kFailureKinds = {
    FailureKind::kHardware, FailureKind::kNetwork, FailureKind::kSoftware};
std::string_view ToString(FailureKind kind);  // "hardware", "network", "software"

// Expected job-stopping failures per GPU-day and per node-day, by kind (index: FailureKind). A
// failure anywhere stops the synchronous job, so the job's rate is the sum over its GPUs and nodes.
struct FailureRates {
  std::array<double, 3> per_gpu_day{};
  std::array<double, 3> per_node_day{};
};

// The Llama 3 405B run's rates (Dubey et al. 2024, section 3.3.4, Table 5): 419 unexpected
// interruptions in 54 days on 16,384 H100s in 2,048 nodes, by the table's root-cause counts:
//   hardware, per GPU-day:  268 = faulty GPU 148 + HBM3 72 + SRAM 19 + GPU system processor 17
//                                 + silent data corruption 6 + thermal interface and sensor 6
//   hardware, per node-day:  46 = host maintenance 32 + SSD 3 + power supply 3 + chassis 2
//                                 + IO expansion board 2 + CPU 2 + system memory 2
//   network, per node-day:   42 = switch and cable 35 + NIC 7
//   software, per GPU-day:   63 = software bug 54 + NCCL watchdog time-out 7 + dependency 2
// each divided by 54 x 16,384 GPU-days or 54 x 2,048 node-days.
inline constexpr double kLlama3Interruptions = 419;
inline constexpr double kLlama3Days = 54;
inline constexpr double kLlama3Gpus = 16384;
inline constexpr double kLlama3Nodes = 2048;
FailureRates Llama3FailureRates();

// How checkpoints are taken. kSync: training waits for the whole write to the file system.
// kAsync: training waits for the device-to-host copy only; the host writes to the parallel file
// system in the background. kMemory: in-memory replicated: the device-to-host copy, then a
// background send of the copy to a partner rank on another node, over that rank's NIC share;
// recovery reads the lost node's state back from its partners.
enum class CheckpointMode { kSync, kAsync, kMemory };
std::string_view ToString(CheckpointMode mode);  // "sync", "async", "memory"

struct GoodputParams {
  FailureRates rates = Llama3FailureRates();
  // Aggregate bandwidth of the parallel file system, GB/s. Default: Tectonic as Llama 3 used it,
  // 2 TB/s sustained (Dubey et al. 2024, section 3.3.1); reads use the same sustained rate.
  double storage_write_gbps = 2000;
  double storage_read_gbps = 2000;
  // Device-to-host copy per GPU, GB/s: PCIe Gen5 x16 is 64 GB/s per direction; 50 assumed reached.
  double host_copy_gbps = 50;
  // From the failure to training again: detection, rescheduling, process start, NCCL init. An
  // assumption (10 minutes): no source states Llama 3's.
  double restart_s = 600;
  CheckpointMode mode = CheckpointMode::kAsync;
};

struct Goodput {
  double checkpoint_bytes_rank = 0;   // weights + optimizer of the most loaded stage's rank
  double checkpoint_bytes_total = 0;  // every rank writes its own state (Llama 3: per GPU)
  double write_s = 0;                 // until a checkpoint is durable (sync/async) or replicated
  double stall_s = 0;                 // training time one checkpoint costs
  double read_s = 0;                  // reading the state back after a failure
  double failures_per_day = 0;        // of the whole job
  double mtbf_s = 0;                  // 86,400 / failures_per_day
  double young_interval_s = 0;        // sqrt(2 * stall_s * mtbf_s): Young 1974
  double interval_s = 0;              // max(young_interval_s, write_s): one write at a time
  double lag_s = 0;                   // newest complete checkpoint's age beyond the interval: the
                                      // background write (async, memory), 0 for sync
  double lost_per_failure_s = 0;      // interval_s / 2 + lag_s + restart_s + read_s
  double lost_to_failures_per_day_s = 0;  // failures_per_day * lost_per_failure_s
  double stalls_per_day_s = 0;            // 86,400 * stall_s / interval_s
  double goodput = 0;                     // 1 - stall_s / interval_s - lost_per_failure_s / mtbf_s
  bool progresses = false;                // goodput > 0; otherwise days and cost are not finite
  double days = 0;                        // estimate.days / goodput
  double days_lost = 0;                   // days - estimate.days
  double cost_usd = 0;                    // estimate.cost_usd / goodput
};

// REQUIRES: the estimate fits (its memory and days are set), every rate >= 0, bandwidths and
// cluster sizes > 0, restart_s >= 0; kMemory needs at least 2 nodes (a partner off the node).
Goodput EstimateGoodput(const spec::ClusterSpec& cluster, const Estimate& estimate,
                        const GoodputParams& params);

// A layout change between two phases of a recipe: the old layout's ranks write a checkpoint to the
// parallel file system (each its weights + optimizer state, the checkpoint EstimateGoodput counts;
// the training waits, as a sync checkpoint: copy to host, then the file system), the job restarts,
// and the new layout's ranks read their shards of it back (any layout reads any checkpoint,
// docs/checkpoint_format.md). The file system always carries it, whatever params.mode: an
// in-memory copy is laid out for the old layout. Closed form:
//   seconds = bytes_rank(from) / host_copy + bytes_total(from) / storage_write + restart_s
//             + bytes_total(to) / storage_read
struct Reshard {
  double bytes_written = 0;  // from's checkpoint_bytes_total
  double bytes_read = 0;     // to's checkpoint_bytes_total (every rank reads its own shard)
  double write_s = 0;        // host copy + file-system write
  double read_s = 0;
  double restart_s = 0;
  double seconds = 0;  // write_s + restart_s + read_s
};
// REQUIRES: both estimates fit; bandwidths > 0, restart_s >= 0 (EstimateGoodput's requirements).
Reshard EstimateReshard(const spec::ClusterSpec& cluster, const Estimate& from, const Estimate& to,
                        const GoodputParams& params);

// Effective tokens/s: tokens_per_s * goodput (0 when the run does not progress). `plan --rank
// goodput` orders layouts by it.
double GoodputTokensPerS(const spec::ClusterSpec& cluster, const Estimate& estimate,
                         const GoodputParams& params);

}  // namespace pentamesh::cost

// metrics.jsonl: one JSON object per optimizer step (schema in docs/engine.md); a skipped
// (non-finite) step attempt gets a short line with "skipped": true instead. Keys of a step:
//   step, loss, ce_loss, lr, grad_norm, tokens, step_time_s, tokens_per_s, mfu, nonfinite_total
//   (steps skipped so far), loss_spike (train/divergence.h),
//   for pp > 1: bubble (measured idle / makespan of the step's pipeline actions, mean over pp
//   ranks), bubble_simulated (schedule::Simulate with the measured action times), microbatches,
//   pipeline_action_s {F, B, W} (mean durations; train/pipeline.h PipelineBubble),
//   peak_bytes {weights, grads, optimizer, activations, logits, comm, other, total},
//   for MoE: aux_loss, z_loss, tokens_per_expert [E], expert_load_imbalance, dropped_tokens,
//   max_expert_share, expert_collapse_share, expert_collapse (cost/expert_balance.h),
//   eval_loss when evaluated; in distributed runs comm_bytes {tp, cp, dp, pp, ep, dp_cp, expert_dp}
//   with each group's counters during the step (comm::ToJson: calls, bytes_wire, bytes_payload,
//   time_s, ops); predicted {peak_bytes, flops_per_token, time_s {every cost::kTimeTerms term,
//   step}, mfu} when a prediction is given, and then comm_time_s {tp, cp, ep, pp, dp}: the
//   measured collective time of each communication term's mesh groups, next to its prediction.
// When a MetricsWriter closes (the run finished or stopped with an error) it writes
// <dir>/summary.json, what the run did (RunOutcome): steps logged, skipped steps, loss spikes,
// first/last/max loss, for pp > 1 the median bubble measured and simulated, for MoE the expert
// imbalance early and late, the last max expert share and the steps flagged as collapse.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "train/trainer.h"

namespace pentamesh::train {

// `predicted` (may be null): the cost model's memory per category, FLOPs and time terms.
std::string StepStatsToJson(const StepStats& stats, const cost::Estimate* predicted = nullptr,
                            double flops_per_token = 0);
// A skipped step (non-finite loss or gradient norm): {"step": attempted step, "skipped": true,
// "cause", "lr", "nonfinite_in_row", "nonfinite_total"}; no update was applied.
std::string SkippedStepToJson(const StepStats& stats);

// What a run did, from the lines written to metrics.jsonl.
class RunOutcome {
 public:
  void AddStep(const StepStats& s);
  void AddSkipped() { ++skipped_; }
  // {"steps", "skipped_steps", "loss_spikes", "spike_steps", "first_loss", "last_loss", "max_loss",
  //  "bubble": {"steps", "microbatches", "measured", "simulated"} (medians over the steps after
  //  the first, whose allocations and page faults are not the schedule's; pp > 1 only),
  //  "moe": {"imbalance_early", "imbalance_late" (means of expert_load_imbalance over the first
  //  and last quarter of the steps), "max_expert_share_last", "collapse_steps"} (MoE only)}.
  nlohmann::ordered_json ToJson() const;

 private:
  int64_t steps_ = 0, skipped_ = 0;
  std::vector<int64_t> spike_steps_;
  std::vector<double> losses_;
  int microbatches_ = 0;
  std::vector<double> bubble_, bubble_simulated_;
  std::vector<double> imbalance_;
  double max_expert_share_last_ = 0;
  int64_t collapse_steps_ = 0;
};

class MetricsWriter {
 public:
  // Creates (truncates, or appends to when `append`: a resumed run) dir/metrics.jsonl; the
  // directory is created if missing.
  static core::Result<MetricsWriter> Open(const std::string& dir, bool append = false);
  MetricsWriter(MetricsWriter&& o) noexcept
      : file_(o.file_), path_(std::move(o.path_)), outcome_(std::move(o.outcome_)) {
    o.file_ = nullptr;
  }
  MetricsWriter& operator=(MetricsWriter&&) = delete;
  ~MetricsWriter();  // closes the file and writes summary.json beside it
  // One line, flushed.
  core::Status Write(const StepStats& stats, const cost::Estimate* predicted = nullptr,
                     double flops_per_token = 0);
  // The line of a skipped (non-finite) step: SkippedStepToJson.
  core::Status WriteSkipped(const StepStats& stats);
  const std::string& path() const { return path_; }
  const RunOutcome& outcome() const { return outcome_; }

 private:
  MetricsWriter(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  core::Status WriteLine(const std::string& line);
  std::FILE* file_;
  std::string path_;
  RunOutcome outcome_;
};

}  // namespace pentamesh::train

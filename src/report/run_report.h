// The training run's report: parses the metrics.jsonl that `pentamesh train` writes (one JSON
// object per step, see train/metrics.cc) and renders one self-contained HTML page (charts by
// report/chart.h, Vega inlined; nothing fetched): loss and eval loss, learning rate, throughput,
// measured vs predicted memory per category,
// and for MoE runs the expert load over time: a heatmap of each expert's share of the routed
// tokens per step, the load imbalance (max/mean) with the expert-collapse threshold, dropped
// tokens, and the steps that tripped the collapse warning; with a Chrome trace (LoadRunTrace,
// `report --trace`) also the measured timeline (report/timeline.h).
// Invariant: the page only presents numbers read from the file; a malformed line or a missing
// required key is an error naming the file and the 1-based line, never a partial page.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "report/timeline.h"

namespace pentamesh::report {

struct RunStep {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double step_time_s = 0;
  std::map<std::string, double> peak_bytes;  // by tag, plus "total"
  std::optional<double> eval_loss;
  std::optional<double> aux_loss;
  std::optional<double> expert_load_imbalance;
  std::optional<double> max_expert_share;  // the most loaded expert's share of routed tokens
  std::vector<double> tokens_per_expert;
  std::optional<double> dropped_tokens;
  std::optional<bool> expert_collapse;          // the engine's warning, when the line carries it
  std::optional<double> expert_collapse_share;  // the warning's threshold (max expert share)
  std::map<std::string, double> predicted_peak_bytes;  // empty when the line has no prediction
  // predicted.time_s: every cost::kTimeTerms term and "step" (empty without a prediction);
  // comm_time_s: the measured collective seconds of each communication term's mesh groups;
  // bubble: the measured pipeline bubble fraction (pp > 1).
  std::map<std::string, double> predicted_time_s;
  std::map<std::string, double> comm_time_s;
  std::optional<double> bubble;
};

struct RunMetrics {
  std::string source;  // the file's path, for the heading
  std::vector<RunStep> steps;
  // Optional: a Chrome trace of the run (train --trace), drawn as a timeline (LoadRunTrace).
  std::string trace_source;
  std::vector<TimelineRow> trace;
};

// Parses the text of a metrics.jsonl; `source` names the file in errors. Blank lines are skipped;
// a file with no step is an error.
core::Result<RunMetrics> ParseRunMetrics(const std::string& text, const std::string& source);

// Reads DIR/metrics.jsonl and parses it.
core::Result<RunMetrics> LoadRunMetrics(const std::string& run_dir);

// Reads a Chrome trace (pentamesh train --trace FILE) into run->trace; errors name the file.
core::Status LoadRunTrace(const std::string& path, RunMetrics* run);

std::string RenderRunHtml(const RunMetrics& run);

// The expert-load heatmap: one row per expert, one column per logged step with tokens_per_expert
// (consecutive steps are averaged into one column when there are more than max_columns), a cell's
// colour its share of the step's routed tokens relative to the uniform share 1/E (blue below,
// white at 1, red above), a red mark above each column with a collapse warning. Every cell has
// class "expert-cell" and the title "expert E steps A-B share S tokens T" (%.9g); every mark
// class "collapse". Empty when no step has tokens_per_expert.
std::string ExpertLoadHeatmap(const RunMetrics& run, size_t max_columns = 400);

// Writes the page; the error names the path and the OS reason.
core::Status WriteRunHtml(const RunMetrics& run, const std::string& path);

}  // namespace pentamesh::report

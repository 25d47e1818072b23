// The training run's report: parses the metrics.jsonl that `pentamesh train` writes (one JSON
// object per step, see train/metrics.cc) and renders one self-contained HTML page (inline SVG, no
// script, no network): loss and eval loss, throughput, measured vs predicted memory per category,
// and for MoE runs the expert load imbalance and tokens per expert over steps.
// Invariant: the page only presents numbers read from the file; a malformed line or a missing
// required key is an error naming the file and the 1-based line, never a partial page.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

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
  std::vector<double> tokens_per_expert;
  std::map<std::string, double> predicted_peak_bytes;  // empty when the line has no prediction
};

struct RunMetrics {
  std::string source;  // the file's path, for the heading
  std::vector<RunStep> steps;
};

// Parses the text of a metrics.jsonl; `source` names the file in errors. Blank lines are skipped;
// a file with no step is an error.
core::Result<RunMetrics> ParseRunMetrics(const std::string& text, const std::string& source);

// Reads DIR/metrics.jsonl and parses it.
core::Result<RunMetrics> LoadRunMetrics(const std::string& run_dir);

std::string RenderRunHtml(const RunMetrics& run);

// Writes the page; the error names the path and the OS reason.
core::Status WriteRunHtml(const RunMetrics& run, const std::string& path);

}  // namespace pentamesh::report

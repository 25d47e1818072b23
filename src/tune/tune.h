// `pentamesh tune`: plan a run for this host, then measure the candidates on it (seed 004: the
// final choice is empirical). Plans with the planner's search (plan::Search) over the host as a
// cluster of N ranks (train::HostCluster, train::EngineCostParams, the run's host profile), keeps
// the layouts the CPU engine runs (train::EngineLayoutViolations), and launches each of the top K,
// the FSDP-only baseline (ZeRO-3, dp = N) and the single-process run as `pentamesh train` for S
// steps (`mpirun -np N` for N ranks). Each run's metrics.jsonl gives its measured step time
// (median of the steps after the warm-up), tokens/s, MFU, peak memory per category, bubble and
// expert imbalance, next to the planner's prediction for the same layout.
// Invariants: every prediction is cost::EstimateLayout's for the run's layout (the planner's and
// the run's own `predicted` agree); a run that fails is a row with its error and the others go on;
// nothing but the runs' output directories under `work_dir` is written.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mem_tag.h"
#include "core/status.h"
#include "cost/cost.h"
#include "train/run_config.h"

namespace pentamesh::tune {

// Most ranks a tune launches on one host (oversubscribed ranks share the cores).
inline constexpr int kMaxRanks = 64;
// Predicted step times closer than this (relative) are a tie: the cost model does not separate
// them, and on this host one layout's step time moves more than that from run to run.
inline constexpr double kTie = 0.01;

struct Options {
  std::string config;             // run TOML (`pentamesh train --config`)
  std::vector<std::string> sets;  // "table.key=value" overrides, applied to every run
  int np = 2;                     // ranks of the candidates and the baseline
  int top_k = 5;                  // planned layouts launched
  int steps = 20;                 // optimizer steps per run
  std::string allow;              // plan::Constraints clauses restricting the candidates
  std::string work_dir;           // runs go to work_dir/<index>-<name>; REQUIRED
  std::string exe;                // the pentamesh binary to launch; "" = this process's
  std::string mpirun = "mpirun";  // launcher (looked up on PATH)
  // A measured host (`pentamesh calibrate --host`). "" = the config's run.host_profile, else Tune
  // measures this host first (`calibrate --host --np N` into work_dir/host.toml).
  std::string host_profile;
  bool single = true;    // also run the single-process layout
  bool fsdp = true;      // also run the FSDP baseline
  double timeout_s = 0;  // per run; 0 = from the prediction (generous)
  // The failure injections' outcomes (`scripts/inject.sh --out FILE`: a JSON array of {name,
  // command, outcome, numbers}) to show on the page; "" = none.
  std::string injections;
};

enum class Kind { kPlanned, kFsdp, kSingle };
const char* KindName(Kind kind);

// What one run measured (from its metrics.jsonl).
struct Measured {
  double step_time_s = 0;  // median over the steps after the warm-up
  double tokens_per_s = 0;
  double mfu = 0;
  std::array<double, core::kMemTagCount> peak_bytes{};  // max over the run, per allocator tag
  double peak_total = 0;
  std::optional<double> bubble;            // measured pipeline bubble (pp > 1), when reported
  std::optional<double> expert_imbalance;  // mean expert_load_imbalance (MoE)
  std::optional<double> max_expert_share;  // mean over the measured steps (MoE)
  nlohmann::json comm_time_s = nlohmann::json::object();  // mean measured seconds per term
  double final_loss = 0;
  int steps_measured = 0;
};

struct Row {
  Kind kind = Kind::kPlanned;
  int predicted_rank = 0;  // 1-based in the planner's list of N-rank layouts; 0 = single
  // 1 + the layouts the planner predicts faster by more than kTie: equal predictions share a rank.
  int tied_rank = 0;
  int ranks = 1;
  spec::Layout layout;
  cost::Estimate predicted;
  std::optional<Measured> measured;  // empty when the run failed
  std::string error;                 // why it failed
  std::string dir;                   // the run's out_dir (metrics.jsonl, log.txt)
  double wall_s = 0;
  double Error() const;  // (predicted - measured) / measured step time; 0 without a measurement
};

struct Summary {
  int measured_runs = 0;
  double median_abs_error = 0;  // median |predicted - measured| / measured step time, all runs
  double spearman = 0;          // rank agreement of predicted and measured step time, N-rank runs
  int best_measured = -1;       // index into rows of the fastest measured N-rank run
  int best_predicted_rank = 0;  // its predicted rank (1 = the planner's first choice)
  int best_tied_rank = 0;       // the same with ties (Row::tied_rank)
};

struct Result {
  Options options;
  std::string model_name;
  std::string host;          // the host cluster's one-line description
  std::string host_profile;  // the measured host the predictions use ("" = run.peak_gflops etc.)
  int64_t space = 0, runnable = 0;  // layouts the planner costed; those the engine runs
  std::vector<Row> rows;
  Summary summary;
  nlohmann::json injections;  // Options::injections, read and checked by Plan
};

// The overrides every run and the plan use: options.sets, then run.host_profile when given.
std::vector<std::string> RunSets(const Options& options);

// What a caller is told while runs go: before each run (done = false) and after (done = true).
using Progress = std::function<void(const Row& row, int index, int total, bool done)>;

// The candidates, predicted but not run: top K runnable layouts at np ranks, the FSDP baseline
// (when not already among them) and the single-process run. Errors (exit 2 material): an
// unreadable or invalid config, np outside [2, kMaxRanks], a config the planner cannot place on
// np ranks (with the planner's explanation), no layout the engine runs.
core::Result<Result> Plan(const Options& options);
// Plans (measuring the host first when no profile is given), then runs every candidate in order.
// Errors: those of Plan, and a launcher that is not on PATH or a missing binary; a failed run is
// only a row's error.
core::Result<Result> Tune(const Options& options, const Progress& progress = {});
// Fills rows[i].measured from the metrics.jsonl in rows[i].dir (the runs' parsing; for tests).
core::Status ReadMeasured(Row& row, int steps);
Summary Summarize(const std::vector<Row>& rows);

// Spearman's rank correlation of two equally long lists (average ranks for ties); 0 for n < 2.
double Spearman(const std::vector<double>& a, const std::vector<double>& b);

std::string Table(const Result& result);  // the terminal table, the agreement and the best
nlohmann::ordered_json ToJson(const Result& result);
// The comparison page (one self-contained file): the table, throughput per layout, memory per
// category predicted next to measured, bubble and expert load (tune/html.cc).
std::string Html(const Result& result);

}  // namespace pentamesh::tune

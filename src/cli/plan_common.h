// Shared by `pentamesh plan`, `scale` and `sweep`: the common options, loading the specs, building
// plan::SearchOptions, the no-fit explanation; `estimate` and `import-config` use its Inputs and
// ApplyStack (--stack). JSON for an Estimate comes from cli/estimate_json.h (included here).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "calib/profile.h"
#include "calib/regime_interval.h"
#include "cli/estimate_json.h"  // EstimateJson
#include "core/status.h"
#include "cost/cost.h"
#include "plan/scale.h"
#include "plan/search.h"
#include "spec/cluster_spec.h"
#include "spec/limits.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::cli {

inline constexpr int kMaxThreads = 1024;  // --threads

struct SearchArgs {
  std::string model;
  std::string cluster = "h100-sxm";
  std::string train;
  std::optional<int64_t> gpus;
  std::string allow;
  int threads = 0;
  int64_t mbs_max = 0;
  bool no_gpipe = false;
  bool json = false;
  std::string html;
  std::string stack;  // --stack; empty: the engine's (--emit, --engine), else calib::kDefaultStack
};

// Adds --cluster --gpus --train --allow --threads --mbs-max --no-gpipe --json --html
// (and --model when with_model).
void AddSearchOptions(CLI::App& sub, SearchArgs& args, bool with_model);

struct Inputs {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;  // with the stack profile's GPU parameters
  spec::TrainSpec train;
  calib::Profile stack;       // --stack
  bool shipped_stack = true;  // --stack names a preset (its runs are in the regime table)
  cost::CostParams params;    // the stack's cost parameters
};
// with_train = false leaves Inputs::train empty (plan --recipe: each phase brings its own).
core::Result<Inputs> LoadInputs(const SearchArgs& args, bool with_train = true);
// Loads --stack into the cluster and cost parameters (estimate and the search commands).
core::Status ApplyStack(const std::string& stack, Inputs& in);
core::Result<plan::SearchOptions> MakeSearchOptions(const SearchArgs& args, const Inputs& in,
                                                    int top_k);
// The regime interval for a shipped stack (calib/regime_interval.h); nullopt for a user's profile
// (its own runs are not in the shipped table: its stack-wide interval stands) or when the table
// cannot be read. The table's Neighbour pointers point into `points`: keep the struct whole.
struct RegimeLookup {
  std::vector<calib::CalibrationPoint> points;
  calib::Regime query;
  calib::RegimeInterval iv;
};
std::optional<RegimeLookup> LookUpRegime(const Inputs& in, const spec::TrainSpec& train);

// The 80% interval of tokens_per_s from the calibration runs nearest the query's regime
// (calib/regime_interval.h): "587K tokens/s, 80% interval 540K-610K from the 10 calibration runs
// nearest (...)", the runs it used, the stack-wide interval beside it and, when no run is near,
// "uncalibrated regime: ...". A user's profile (--stack FILE) keeps its stack-wide interval.
std::vector<std::string> IntervalLines(const Inputs& in, const spec::TrainSpec& train,
                                       double tokens_per_s);
nlohmann::json IntervalJson(const Inputs& in, const spec::TrainSpec& train, double tokens_per_s);

// "128,256,512" -> {128, 256, 512}, each in [1, max_value]; the error names the option and the bad
// item.
core::Result<std::vector<int64_t>> ParseIntList(const std::string& option, const std::string& text,
                                                int64_t max_value);

nlohmann::json CountsJson(const plan::Counts& c);

// Prints the explanation to stderr (and to stdout as JSON when json, with the nearest miss's
// estimate when there is one), returns a non-zero code.
int FailNoFit(const std::string& command, const std::vector<std::string>& lines, bool json,
              const cost::Estimate* nearest_miss = nullptr);

}  // namespace pentamesh::cli

namespace pentamesh::cli {

// The benchmarking study of seeds/004 section 5: sequence 4096, 1M-token batch, 1 to 64 nodes.
inline constexpr const char* kSweepModels = "llama2-7b,llama2-13b,llama3-8b,llama2-70b,llama3-70b";
inline constexpr const char* kSweepNodes = "1,2,4,8,16,32,64";
inline constexpr const char* kSweepTrain = "pretrain-4k";
inline constexpr int64_t kSweepBatchTokens = 1048576;

// Loads each model of a comma-separated list and runs plan::Sweep.
core::Result<plan::SweepResult> RunSweep(const std::string& models,
                                         const spec::ClusterSpec& cluster,
                                         const spec::TrainSpec& train,
                                         const std::vector<int64_t>& nodes,
                                         const plan::SearchOptions& options);

}  // namespace pentamesh::cli

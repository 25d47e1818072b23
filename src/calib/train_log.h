// A training job's own log read back into a measured run (`pentamesh calibrate --log`): the
// per-iteration lines Megatron-LM, Megatron-DeepSpeed and torchtitan print, their median
// throughput after the warm-up steps, and the run's row in the calibration format (runs.h).
//
// The lines, at the versions read (docs/calibration.md lists the sources):
//   Megatron-LM (core_v0.16.1 training.py training_log): " [date] iteration N/ M | consumed
//     samples: ... | elapsed time per iteration (ms): X | throughput per GPU (TFLOP/s/GPU): Y |
//     learning rate: ... | global batch size: G | ...", and once "... memory (MB) | allocated: ...
//     | max reserved: R";
//   Megatron-DeepSpeed (4efb479d megatron/training.py): the same iteration line with "elapsed
//     time per iteration (ms)" (BigScience's fork: "(s)"), then "samples per second: S |", in
//     newer versions "tokens per gpu per second (tgs): T |", and "TFLOPs: F |";
//   torchtitan (v0.2.2 components/metrics.py): "step: N  loss: L  [grad_norm: g]  memory:
//     XGiB(P%)  tps: T  tflops: F  mfu: M%", in ANSI colours unless disabled; "validate step:"
//     lines are evaluation, not training.
// Any prefix before them (a timestamp, torchrun's "[rank0]:" or "[default7]:", srun's "7: ") is
// ignored, and a step printed by several ranks is read once (the first line).
//
// Throughput: Megatron's elapsed time is the mean over the log interval; tokens per second of
// the job = the line's global batch size x the sequence length / that time. torchtitan's tps is
// tokens per second per GPU (its tokens since the last log / (time x the non-data-parallel
// degree)), so the job's is tps x GPUs. The measured value is the median over the steps after
// the warm-up (steps numbered at most `skip_steps`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "calib/runs.h"
#include "core/status.h"

namespace pentamesh::calib {

enum class LogFormat { kMegatron, kTorchtitan };

// One training step's line.
struct LogStep {
  int64_t step = 0;
  int line = 0;              // 1-based line in the log
  double iteration_s = 0;    // Megatron: elapsed time per iteration (0: torchtitan)
  int64_t global_batch = 0;  // Megatron: global batch size (0: not printed)
  // Megatron-DeepSpeed: "actual seqlen", else consumed tokens / consumed samples (0: neither)
  int64_t seq_len = 0;
  double tokens_per_s_gpu = 0;       // torchtitan tps; Megatron-DeepSpeed tgs (0: not printed)
  double samples_per_s = 0;          // Megatron-DeepSpeed (0: not printed)
  double tflops_per_gpu = 0;         // as the engine printed it (0: not printed)
  std::optional<double> memory_gib;  // torchtitan: max reserved of this rank
};

struct TrainLog {
  LogFormat format = LogFormat::kMegatron;
  // The engine the lines' own fields name: "megatron" (TFLOP/s/GPU), "deepspeed" (samples per
  // second, TFLOPs, tgs, or seconds), "torchtitan"; "" for Megatron lines with none of them
  // (either Megatron engine).
  std::string engine;
  std::vector<LogStep> steps;        // in log order, one per step
  std::optional<double> memory_gib;  // the largest max-reserved memory printed (GiB)
};

// Reads a log's text; `name` is used in messages. Errors name the line and the field: a line
// that starts an iteration or step line but whose number cannot be read, lines of two formats,
// or no training line at all (the engine cannot be told).
core::Result<TrainLog> ParseTrainLog(const std::string& name, const std::string& text);

// What the launch file said about the run (launch::Imported, converted by the caller).
struct LogRunConfig {
  std::string engine;  // "megatron", "torchtitan", "deepspeed"
  spec::ModelSpec model;
  spec::TrainSpec train;  // seq_len, global_batch_tokens, precision
  spec::Layout layout;
  int64_t gpus = 0;
  int64_t gpus_per_node = 0;       // 0: the cluster preset's
  std::string config_file;         // named in the row's source
  std::vector<std::string> notes;  // import-config's notes, carried into the row
};

struct LogRunOptions {
  std::string id;      // the row's id
  std::string sku;     // cluster preset naming the GPU (h100-sxm, a100-80gb, ...)
  int skip_steps = 2;  // steps numbered at most this are warm-up
};

struct Measured {
  int steps_used = 0;
  int steps_skipped = 0;
  int64_t first_step = 0, last_step = 0;
  double tokens_per_s = 0;      // the job's, median over the steps used
  double tokens_per_s_gpu = 0;  // per GPU
  double step_time_s = 0;       // global batch tokens / the job's tokens per second
  double tflops_per_gpu = 0;    // the engine's own figure, median (0: not printed)
  std::string formula;          // how tokens per second follow from the lines
};

// The median throughput of the log's steps after the warm-up, for the run the config describes.
// Errors: every step is warm-up; the log's format or fields name another engine than the config;
// the log's sequence length (Megatron-DeepSpeed) or world size (its tgs) is not the config's;
// a Megatron line without a global batch size when the config has none either.
core::Result<Measured> MeasureLog(const TrainLog& log, const LogRunConfig& config,
                                  const LogRunOptions& options);

// The run as a calibration row (RunRowJson), read back through RunsFromJson to check that
// pentamesh can estimate it; the error names why not.
core::Result<nlohmann::json> LogRunRow(const std::string& log_name, const TrainLog& log,
                                       const LogRunConfig& config, const LogRunOptions& options,
                                       Measured* measured = nullptr);

}  // namespace pentamesh::calib

// Training logs -> measured runs. The line formats and the throughput rules are in train_log.h.
#include "calib/train_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/numeric.h"
#include "spec/load_toml.h"

namespace pentamesh::calib {
namespace {

using nlohmann::json;

std::string StripAnsi(const std::string& line) {
  static const std::regex kEscape("\x1b\\[[0-9;]*m");
  return line.find('\x1b') == std::string::npos ? line : std::regex_replace(line, kEscape, "");
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// A number as the engines print it ("5444.9", "10,050", "1.825991E+00"), or an error naming the
// line and the field.
core::Result<double> Number(const std::string& name, int line, const std::string& field,
                            const std::string& text) {
  std::string digits;
  for (char c : Trim(text)) {
    if (c != ',') digits += c;
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(digits.c_str(), &end);
  if (digits.empty() || end == digits.c_str() || *end != '\0' || errno == ERANGE ||
      !std::isfinite(v) || v < 0) {
    return core::Status::Error(fmt::format("{}: line {}: {} '{}' is not a non-negative number",
                                           name, line, field, Trim(text)));
  }
  return v;
}

// Megatron's " iteration N/ M | key: value | key: value | ..." into the step.
core::Result<LogStep> MegatronLine(const std::string& name, int line_no, const std::string& line,
                                   size_t fields_at, int64_t step, std::string& engine_words) {
  LogStep s;
  s.step = step;
  s.line = line_no;
  std::istringstream fields(line.substr(fields_at));
  std::string field;
  bool have_time = false;
  double consumed_samples = 0, consumed_tokens = 0;
  int64_t actual_seq = 0;
  while (std::getline(fields, field, '|')) {
    const size_t colon = field.rfind(':');
    if (colon == std::string::npos) continue;
    // Keys as printed, with one space before a unit's parenthesis (a fork writes "elapsed time
    // per iteration(ms)").
    static const std::regex kUnitSpace(R"(\s*\()");
    const std::string key = std::regex_replace(Trim(field.substr(0, colon)), kUnitSpace, " (");
    const std::string value = field.substr(colon + 1);
    if (key == "elapsed time per iteration (ms)" || key == "elapsed time per iteration (s)") {
      PM_ASSIGN_OR_RETURN(const double t, Number(name, line_no, key, value));
      if (t <= 0) {
        return core::Status::Error(
            fmt::format("{}: line {}: {} is 0: no time measured", name, line_no, key));
      }
      s.iteration_s = key.ends_with("(s)") ? t : t / 1000.0;
      if (key.ends_with("(s)")) engine_words = "deepspeed";  // BigScience's fork prints seconds
      have_time = true;
    } else if (key == "consumed samples") {
      PM_ASSIGN_OR_RETURN(consumed_samples, Number(name, line_no, key, value));
    } else if (key == "consumed tokens") {
      PM_ASSIGN_OR_RETURN(consumed_tokens, Number(name, line_no, key, value));
    } else if (key == "actual seqlen") {
      PM_ASSIGN_OR_RETURN(const double n, Number(name, line_no, key, value));
      actual_seq = static_cast<int64_t>(n);
    } else if (key == "global batch size") {
      PM_ASSIGN_OR_RETURN(const double g, Number(name, line_no, key, value));
      s.global_batch = static_cast<int64_t>(g);
    } else if (key == "throughput per GPU (TFLOP/s/GPU)") {
      PM_ASSIGN_OR_RETURN(s.tflops_per_gpu, Number(name, line_no, key, value));
      if (engine_words.empty()) engine_words = "megatron";
    } else if (key == "TFLOPs") {
      PM_ASSIGN_OR_RETURN(s.tflops_per_gpu, Number(name, line_no, key, value));
      engine_words = "deepspeed";
    } else if (key == "samples per second") {
      PM_ASSIGN_OR_RETURN(s.samples_per_s, Number(name, line_no, key, value));
      engine_words = "deepspeed";
    } else if (key == "tokens per gpu per second (tgs)") {
      PM_ASSIGN_OR_RETURN(s.tokens_per_s_gpu, Number(name, line_no, key, value));
      engine_words = "deepspeed";
    }
  }
  // Megatron-DeepSpeed counts tokens and samples: their ratio is the sequence length it ran.
  if (actual_seq > 0) {
    s.seq_len = actual_seq;
  } else if (consumed_samples > 0 && consumed_tokens > 0 &&
             consumed_tokens / consumed_samples == std::floor(consumed_tokens / consumed_samples)) {
    s.seq_len = static_cast<int64_t>(consumed_tokens / consumed_samples);
  }
  if (!have_time) {
    return core::Status::Error(
        fmt::format("{}: line {}: iteration {} has no 'elapsed time per iteration (ms)' field",
                    name, line_no, step));
  }
  return s;
}

// torchtitan's "step: N  loss: ...  memory: XGiB(P%)  tps: T  tflops: F  mfu: M%".
core::Result<LogStep> TorchtitanLine(const std::string& name, int line_no, const std::string& line,
                                     int64_t step) {
  static const std::regex kTps(R"(\btps:\s*([0-9][0-9,]*(\.[0-9]*)?))");
  static const std::regex kTflops(R"(\btflops:\s*([0-9][0-9,]*(\.[0-9]*)?))");
  static const std::regex kMemory(R"(\bmemory:\s*([0-9.]+)\s*GiB)");
  LogStep s;
  s.step = step;
  s.line = line_no;
  std::smatch m;
  if (!std::regex_search(line, m, kTps)) {
    return core::Status::Error(
        fmt::format("{}: line {}: step {} has no 'tps:' field (torchtitan's tokens per second per "
                    "GPU)",
                    name, line_no, step));
  }
  PM_ASSIGN_OR_RETURN(s.tokens_per_s_gpu, Number(name, line_no, "tps", m[1].str()));
  if (s.tokens_per_s_gpu <= 0) {
    return core::Status::Error(fmt::format("{}: line {}: tps is 0", name, line_no));
  }
  if (std::regex_search(line, m, kTflops)) {
    PM_ASSIGN_OR_RETURN(s.tflops_per_gpu, Number(name, line_no, "tflops", m[1].str()));
  }
  if (std::regex_search(line, m, kMemory)) {
    PM_ASSIGN_OR_RETURN(const double gib, Number(name, line_no, "memory", m[1].str()));
    s.memory_gib = gib;
  }
  return s;
}

// The step number after `at` (digits, at most 2^62), or nullopt.
std::optional<int64_t> StepNumber(const std::string& text) {
  if (text.empty() || text.size() > 18 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(text);
}

}  // namespace

core::Result<TrainLog> ParseTrainLog(const std::string& name, const std::string& text) {
  // The iteration marker Megatron prints ("iteration", the step, "/", the total, "|"), and
  // torchtitan's training step (not "validate step:").
  static const std::regex kIteration(R"((^|[^a-zA-Z_])iteration\s+(\S+?)\s*/\s*\d+\s*\|)");
  static const std::regex kStep(R"((^|[^a-zA-Z_])step:\s*(\S+)\s+loss:)");
  TrainLog log;
  std::optional<int> first_megatron, first_titan;
  std::set<int64_t> seen;
  std::string engine_words;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string line = StripAnsi(raw);
    std::smatch m;
    if (line.find("memory (MB)") != std::string::npos) {
      static const std::regex kMaxReserved(R"(max reserved:\s*([0-9.]+))");
      if (std::regex_search(line, m, kMaxReserved)) {
        PM_ASSIGN_OR_RETURN(const double mb, Number(name, line_no, "max reserved", m[1].str()));
        log.memory_gib = std::max(log.memory_gib.value_or(0), mb / 1024.0);  // MB = 2^20 bytes
      }
      continue;
    }
    std::optional<LogStep> step;
    if (std::regex_search(line, m, kIteration) &&
        line.find("elapsed time per iteration") != std::string::npos) {
      const auto n = StepNumber(m[2].str());
      if (!n) {
        return core::Status::Error(fmt::format("{}: line {}: iteration number '{}' is not a count",
                                               name, line_no, m[2].str()));
      }
      if (!first_megatron) first_megatron = line_no;
      std::string words;
      PM_ASSIGN_OR_RETURN(
          step, MegatronLine(name, line_no, line, static_cast<size_t>(m.position(0) + m.length(0)),
                             *n, words));
      if (words == "deepspeed" || (words == "megatron" && engine_words.empty())) {
        engine_words = words;
      }
    } else if (std::regex_search(line, m, kStep) &&
               line.find("validate step:") == std::string::npos) {
      const auto n = StepNumber(m[2].str());
      if (!n) {
        return core::Status::Error(
            fmt::format("{}: line {}: step number '{}' is not a count", name, line_no, m[2].str()));
      }
      if (!first_titan) first_titan = line_no;
      PM_ASSIGN_OR_RETURN(step, TorchtitanLine(name, line_no, line, *n));
      if (step->memory_gib) {
        log.memory_gib = std::max(log.memory_gib.value_or(0), *step->memory_gib);
      }
    }
    if (!step) continue;
    if (first_megatron && first_titan) {
      return core::Status::Error(fmt::format(
          "{}: line {} is a Megatron iteration line and line {} a torchtitan step line: one log "
          "of one engine, please",
          name, *first_megatron, *first_titan));
    }
    if (seen.insert(step->step).second) log.steps.push_back(*step);  // once per step (ranks)
  }
  if (log.steps.empty()) {
    return core::Status::Error(fmt::format(
        "{}: no training step lines in {} lines, so the engine cannot be told (Megatron-LM and "
        "Megatron-DeepSpeed print ' iteration N/ M | ... | elapsed time per iteration (ms): X "
        "|', torchtitan 'step: N  loss: ...  tps: T')",
        name, line_no));
  }
  log.format = first_titan ? LogFormat::kTorchtitan : LogFormat::kMegatron;
  log.engine = first_titan ? "torchtitan" : engine_words;
  return log;
}

core::Result<Measured> MeasureLog(const TrainLog& log, const LogRunConfig& config,
                                  const LogRunOptions& options) {
  const bool titan_log = log.format == LogFormat::kTorchtitan;
  if (titan_log != (config.engine == "torchtitan") ||
      (!log.engine.empty() && log.engine != "torchtitan" && log.engine != config.engine)) {
    return core::Status::Error(fmt::format("the log's lines are {}'s but the config is a {} file",
                                           log.engine.empty() ? "Megatron" : log.engine,
                                           config.engine));
  }
  if (config.gpus <= 0) return core::Status::Error("the run's GPU count is not known: pass --gpus");
  if (config.train.seq_len <= 0) {
    return core::Status::Error("the config does not say the sequence length: pass --seq-len");
  }
  Measured out;
  std::vector<double> job_tps, tflops, tgs;
  for (const LogStep& s : log.steps) {
    if (s.step <= options.skip_steps) {
      ++out.steps_skipped;
      continue;
    }
    if (out.steps_used == 0) out.first_step = s.step;
    out.last_step = s.step;
    ++out.steps_used;
    if (s.seq_len > 0 && s.seq_len != config.train.seq_len) {
      return core::Status::Error(fmt::format(
          "line {}: the log's sequence length is {} (consumed tokens / consumed samples, or "
          "actual seqlen), the config's {}",
          s.line, s.seq_len, config.train.seq_len));
    }
    if (titan_log) {
      job_tps.push_back(s.tokens_per_s_gpu * static_cast<double>(config.gpus));
    } else {
      const int64_t batch = s.global_batch > 0 ? s.global_batch : config.train.global_batch_seqs();
      if (batch <= 0) {
        return core::Status::Error(fmt::format(
            "line {}: no global batch size, and the config does not say it either", s.line));
      }
      job_tps.push_back(static_cast<double>(batch) * static_cast<double>(config.train.seq_len) /
                        s.iteration_s);
    }
    if (s.tflops_per_gpu > 0) tflops.push_back(s.tflops_per_gpu);
    if (!titan_log && s.tokens_per_s_gpu > 0) tgs.push_back(s.tokens_per_s_gpu);
  }
  if (out.steps_used == 0) {
    return core::Status::Error(fmt::format(
        "all {} step lines are warm-up (steps numbered up to {}): give a longer log or a smaller "
        "--skip-steps",
        out.steps_skipped, options.skip_steps));
  }
  out.tokens_per_s = Median(job_tps);
  // Megatron-DeepSpeed's tgs is its own tokens/s over its world size: disagreeing by more than
  // 2%, the launch file (or --gpus) describes another run than the log.
  if (!tgs.empty()) {
    const double gpus = out.tokens_per_s / Median(tgs);
    if (std::fabs(gpus / static_cast<double>(config.gpus) - 1) > 0.02) {
      return core::Status::Error(fmt::format(
          "the log's tokens per gpu per second (tgs, {:.3f}) imply {:.0f} GPUs, the run has {}",
          Median(tgs), gpus, config.gpus));
    }
  }
  out.tokens_per_s_gpu = out.tokens_per_s / static_cast<double>(config.gpus);
  const int64_t batch_tokens = config.train.global_batch_tokens;
  out.step_time_s = batch_tokens > 0 ? static_cast<double>(batch_tokens) / out.tokens_per_s : 0;
  out.tflops_per_gpu = tflops.empty() ? 0 : Median(tflops);
  out.formula = titan_log
                    ? fmt::format("median tps (tokens/s per GPU) over steps {}-{}", out.first_step,
                                  out.last_step)
                    : fmt::format(
                          "median of global batch size x seq_len {} / elapsed time per iteration "
                          "over iterations {}-{}, / {} GPUs",
                          config.train.seq_len, out.first_step, out.last_step, config.gpus);
  return out;
}

core::Result<json> LogRunRow(const std::string& log_name, const TrainLog& log,
                             const LogRunConfig& config, const LogRunOptions& options,
                             Measured* measured) {
  PM_ASSIGN_OR_RETURN(const Measured m, MeasureLog(log, config, options));
  Run run;
  run.id = options.id;
  run.group = "training_log";
  run.software = config.engine == "megatron"    ? "Megatron-LM"
                 : config.engine == "deepspeed" ? "Megatron-DeepSpeed (DeepSpeed)"
                                                : "torchtitan";
  run.sku = options.sku;
  PM_ASSIGN_OR_RETURN(run.cluster, spec::LoadCluster(options.sku));
  if (config.gpus_per_node > 0) run.cluster.gpus_per_node = config.gpus_per_node;
  PM_RETURN_IF_ERROR(spec::SetGpuCount(run.cluster, config.gpus));
  run.model = config.model;
  run.train = config.train;
  run.layout = config.layout;
  run.tokens_per_s_gpu = m.tokens_per_s_gpu;
  run.memory_gib = log.memory_gib;
  std::vector<std::string> dropped;
  json row = RunRowJson(run, &dropped);
  row["source"]["reference"] = fmt::format("{} with {}", log_name, config.config_file);
  row["measured"]["tokens_per_sec_total"] = m.tokens_per_s;
  row["measured"]["step_time_s"] = m.step_time_s > 0 ? json(m.step_time_s) : json(nullptr);
  row["measured"]["tflops_per_gpu"] = m.tflops_per_gpu > 0 ? json(m.tflops_per_gpu) : json(nullptr);
  row["measured"]["derived"] = m.formula;
  json notes = json::array();
  for (const std::string& n : config.notes) notes.push_back(n);
  row["inferred_fields"] = notes;
  // Read back as a calibration row: what pentamesh cannot estimate is an error here, not later.
  PM_ASSIGN_OR_RETURN(const std::vector<Run> back, RunsFromJson(json::array({row}), log_name));
  if (!back.front().usable()) {
    return core::Status::Error(
        fmt::format("the run cannot be estimated as a calibration row: {}", back.front().unusable));
  }
  if (measured != nullptr) *measured = m;
  return row;
}

}  // namespace pentamesh::calib

// tune::Tune: launches each candidate as `pentamesh train` (under `mpirun -np N` for N ranks) in
// its own process group, output to <dir>/log.txt, killed after its time limit; then reads the
// run's metrics.jsonl (ReadMeasured) and summarizes (Summarize).
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/input.h"
#include "core/numeric.h"
#include "core/quote.h"
#include "core/subprocess.h"
#include "report/run_report.h"
#include "spec/layout.h"
#include "tune/tune.h"

namespace pentamesh::tune {
namespace {

namespace fs = std::filesystem;

// The command line of one run.
std::vector<std::string> Command(const Options& o, const std::string& exe,
                                 const std::string& mpirun, const Row& row) {
  std::vector<std::string> argv;
  if (row.ranks > 1) argv = core::MpirunArgs(mpirun, row.ranks);
  argv.insert(argv.end(), {exe, "train", "--config", o.config});
  for (const std::string& s : RunSets(o)) argv.insert(argv.end(), {"--set", s});
  argv.insert(argv.end(), {"--layout", spec::FormatLayout(row.layout)});
  argv.insert(argv.end(), {"--set", "run.out_dir=" + core::TomlString(row.dir)});
  return argv;
}

// What the log says failed, for the table: the first line naming an error with the indented
// lines under it (a config's field list), else the last line.
std::string LogReason(const std::string& log) {
  std::ifstream in(log);
  std::string line, error, last;
  bool in_error = false;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (in_error && line[0] == ' ') {
      error += " " + line.substr(line.find_first_not_of(' '));
      continue;
    }
    in_error = false;
    if (line.find("error") != std::string::npos && error.empty()) {
      error = line;
      in_error = true;
    }
    last = line;
  }
  return error.empty() ? last : error;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

double Row::Error() const {
  if (!measured || measured->step_time_s <= 0) return 0;
  return (predicted.time.step - measured->step_time_s) / measured->step_time_s;
}

core::Status ReadMeasured(Row& row, int steps) {
  const std::string path = (fs::path(row.dir) / "metrics.jsonl").string();
  if (!fs::exists(path)) {
    return core::Status::Error(fmt::format("{}: no metrics (the run wrote none)", path));
  }
  PM_ASSIGN_OR_RETURN(const std::string text,
                      core::ReadInputFile(path, core::kMaxLogFileBytes, "metrics.jsonl"));
  // The one metrics.jsonl reader (report/run_report.h, what `pentamesh report` reads): every
  // line's keys typed, skipped steps left out, errors naming the file and the line.
  PM_ASSIGN_OR_RETURN(const report::RunMetrics run, report::ParseRunMetrics(text, path));
  const std::vector<report::RunStep>& good = run.steps;
  // The first quarter of the steps (at least one) warms caches, pools and the BLAS threads.
  const size_t warm = static_cast<size_t>(std::max(1, steps / 4));
  if (good.size() <= warm) {
    return core::Status::Error(
        fmt::format("{}: {} steps, fewer than the {} warm-up steps + 1", path, good.size(), warm));
  }
  // What the table, the summary and the page show must be a number: a step's value the writer
  // printed as null (NaN) or a negative one is refused naming the step and the key.
  auto finite = [&](const report::RunStep& s, const char* key, double v) -> core::Status {
    if (std::isfinite(v) && v >= 0) return core::Status::Ok();
    return core::Status::Error(
        fmt::format("{}: step {}: {} is {}, not a finite number >= 0", path, s.step, key, v));
  };
  Measured m;
  std::vector<double> time, tps, mfu, imbalance, share, bubble;
  std::map<std::string, std::vector<double>> comm;
  for (size_t i = warm; i < good.size(); ++i) {
    const report::RunStep& s = good[i];
    PM_RETURN_IF_ERROR(finite(s, "step_time_s", s.step_time_s));
    PM_RETURN_IF_ERROR(finite(s, "tokens_per_s", s.tokens_per_s));
    PM_RETURN_IF_ERROR(finite(s, "mfu", s.mfu));
    if (!(s.step_time_s > 0)) {
      return core::Status::Error(
          fmt::format("{}: step {}: step_time_s is {}, not positive", path, s.step, s.step_time_s));
    }
    time.push_back(s.step_time_s);
    tps.push_back(s.tokens_per_s);
    mfu.push_back(s.mfu);
    if (s.expert_load_imbalance) {
      PM_RETURN_IF_ERROR(finite(s, "expert_load_imbalance", *s.expert_load_imbalance));
      imbalance.push_back(*s.expert_load_imbalance);
    }
    if (s.max_expert_share) {
      PM_RETURN_IF_ERROR(finite(s, "max_expert_share", *s.max_expert_share));
      share.push_back(*s.max_expert_share);
    }
    if (s.bubble && !std::isnan(*s.bubble)) {
      PM_RETURN_IF_ERROR(finite(s, "bubble", *s.bubble));
      bubble.push_back(*s.bubble);
    }
    for (const auto& [k, v] : s.comm_time_s) comm[k].push_back(v);  // checked by the reader
  }
  for (const report::RunStep& s : good) {
    for (const auto& [tag, bytes] : s.peak_bytes) {
      PM_RETURN_IF_ERROR(finite(s, "peak_bytes", bytes));
    }
    for (int t = 0; t < core::kMemTagCount; ++t) {
      const auto it = s.peak_bytes.find(core::MemTagName(static_cast<core::MemTag>(t)));
      if (it == s.peak_bytes.end()) continue;
      double& peak = m.peak_bytes[static_cast<size_t>(t)];
      peak = std::max(peak, it->second);
    }
    m.peak_total = std::max(m.peak_total, s.peak_bytes.at("total"));
  }
  m.step_time_s = Median(time);
  m.tokens_per_s = Median(tps);
  m.mfu = Median(mfu);
  if (!imbalance.empty()) m.expert_imbalance = Mean(imbalance);
  if (!share.empty()) m.max_expert_share = Mean(share);
  if (!bubble.empty()) m.bubble = Median(bubble);
  for (const auto& [k, v] : comm) m.comm_time_s[k] = Mean(v);
  PM_RETURN_IF_ERROR(finite(good.back(), "loss", good.back().loss));
  m.final_loss = good.back().loss;
  m.steps_measured = static_cast<int>(time.size());
  row.measured = m;
  return core::Status::Ok();
}

// The options with run.host_profile set: the given profile, the config's own, or this host
// measured now by `pentamesh calibrate --host --np N` (its output in work_dir/calibrate.log).
core::Result<Options> WithHostProfile(const Options& options, const std::string& exe) {
  Options o = options;
  if (o.host_profile.empty()) {
    PM_ASSIGN_OR_RETURN(train::RunConfig config, train::LoadRunConfig(o.config, RunSets(o)));
    if (config.run.host) return o;
    o.host_profile = (fs::path(o.work_dir) / "host.toml").string();
    const std::string log = (fs::path(o.work_dir) / "calibrate.log").string();
    const std::vector<std::string> argv = {
        exe, "calibrate", "--host", "--np", std::to_string(o.np), "--out", o.host_profile};
    if (const core::Status run = core::RunProcess(argv, {.log = log, .timeout_s = 600});
        !run.ok()) {
      return core::Status::Error(fmt::format("measuring the host ({}) failed: {}: {}",
                                             fmt::join(argv, " "), run.message(), LogReason(log)));
    }
  }
  return o;
}

core::Result<Result> Tune(const Options& given, const Progress& progress) {
  PM_RETURN_IF_ERROR(Plan(given).status());  // bad input fails before anything runs
  const Options& options = given;
  PM_ASSIGN_OR_RETURN(const std::string mpirun, core::FindLauncher(options.mpirun, "--mpirun"));
  std::error_code ec;
  const std::string exe = options.exe.empty() ? core::SelfExecutable() : options.exe;
  if (exe.empty() || access(exe.c_str(), X_OK) != 0) {
    return core::Status::Error(fmt::format("--exe: cannot run '{}'", exe));
  }
  fs::create_directories(options.work_dir, ec);
  if (ec) {
    return core::Status::Error(
        fmt::format("--out-dir: cannot create {}: {}", options.work_dir, ec.message()));
  }
  PM_ASSIGN_OR_RETURN(const Options measured, WithHostProfile(given, exe));
  PM_ASSIGN_OR_RETURN(Result result, Plan(measured));
  const int total = static_cast<int>(result.rows.size());
  for (int i = 0; i < total; ++i) {
    Row& row = result.rows[static_cast<size_t>(i)];
    row.dir = (fs::path(options.work_dir) /
               fmt::format("{:02d}-{}-{}", i + 1, KindName(row.kind), row.ranks))
                  .string();
    fs::remove_all(row.dir, ec);
    fs::create_directories(row.dir, ec);
    if (progress) progress(row, i, total, false);
    const double limit = options.timeout_s > 0
                             ? options.timeout_s
                             : 300.0 + 50.0 * options.steps * row.predicted.time.step;
    const auto start = std::chrono::steady_clock::now();
    const std::string log = (fs::path(row.dir) / "log.txt").string();
    const core::Status run =
        core::RunProcess(Command(measured, exe, mpirun, row), {.log = log, .timeout_s = limit});
    const std::string failed = run.ok() ? "" : run.message();
    row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!failed.empty()) {
      const std::string reason = LogReason(log);
      row.error = reason.empty() ? failed : fmt::format("{}: {}", failed, reason);
    } else if (core::Status s = ReadMeasured(row, options.steps); !s.ok()) {
      row.error = s.message();
    }
    if (progress) progress(row, i, total, true);
  }
  result.summary = Summarize(result.rows);
  return result;
}

}  // namespace pentamesh::tune

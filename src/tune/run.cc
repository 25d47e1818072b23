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
  std::istringstream in(text);
  std::vector<nlohmann::json> good;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return core::Status::Error(fmt::format("{}:{}: not a JSON object", path, n));
    }
    if (!j.value("skipped", false) && j.contains("step_time_s")) good.push_back(std::move(j));
  }
  // The first quarter of the steps (at least one) warms caches, pools and the BLAS threads.
  const size_t warm = static_cast<size_t>(std::max(1, steps / 4));
  if (good.size() <= warm) {
    return core::Status::Error(
        fmt::format("{}: {} steps, fewer than the {} warm-up steps + 1", path, good.size(), warm));
  }
  Measured m;
  std::vector<double> time, tps, mfu, imbalance, share, bubble;
  std::map<std::string, std::vector<double>> comm;
  for (size_t i = warm; i < good.size(); ++i) {
    const nlohmann::json& j = good[i];
    time.push_back(j.value("step_time_s", 0.0));
    tps.push_back(j.value("tokens_per_s", 0.0));
    mfu.push_back(j.value("mfu", 0.0));
    if (j.contains("expert_load_imbalance")) imbalance.push_back(j["expert_load_imbalance"]);
    if (j.contains("max_expert_share")) share.push_back(j["max_expert_share"]);
    if (j.contains("bubble") && j["bubble"].is_number()) bubble.push_back(j["bubble"]);
    if (j.contains("comm_time_s")) {
      for (const auto& [k, v] : j["comm_time_s"].items()) comm[k].push_back(v.get<double>());
    }
  }
  for (const nlohmann::json& j : good) {
    const nlohmann::json& peak = j.value("peak_bytes", nlohmann::json::object());
    for (int t = 0; t < core::kMemTagCount; ++t) {
      const char* tag = core::MemTagName(static_cast<core::MemTag>(t));
      m.peak_bytes[static_cast<size_t>(t)] =
          std::max(m.peak_bytes[static_cast<size_t>(t)], peak.value(tag, 0.0));
    }
    m.peak_total = std::max(m.peak_total, peak.value("total", 0.0));
  }
  m.step_time_s = Median(time);
  m.tokens_per_s = Median(tps);
  m.mfu = Median(mfu);
  if (!imbalance.empty()) m.expert_imbalance = Mean(imbalance);
  if (!share.empty()) m.max_expert_share = Mean(share);
  if (!bubble.empty()) m.bubble = Median(bubble);
  for (const auto& [k, v] : comm) m.comm_time_s[k] = Mean(v);
  m.final_loss = good.back().value("loss", 0.0);
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

// `pentamesh calibrate --runs FILE.json [--stack S] [--cluster C] --out profile.toml`: fits a stack
// profile's free parameters to a user's own measured runs (calib::Fit, Levenberg-Marquardt on log
// throughput, pulled toward the stack's shipped values) and prints the in-sample and
// leave-one-out errors, so the user sees whether the fit generalizes. The profile it writes is
// usable as `--stack profile.toml` by estimate and plan. `calibrate --host [--np N ...] --out
// host.toml` measures this machine instead (train::MeasureHost; with --np, the MPI collectives at
// N ranks: `mpirun -np N` of this executable in the hidden --comm-worker mode, which runs
// train::MeasureCollectives and writes one [[comm]] entry) for run.host_profile. `calibrate --log
// FILE --config FILE --cluster GPU` reads a training job's log and its launch file
// (launch::ImportConfig) into one measured-run row (calib::LogRunRow), printed as JSON or added
// to a runs file with --append. Thin: parse, call calib, launch or train, print.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "calib/fit.h"
#include "calib/profile.h"
#include "calib/runs.h"
#include "calib/train_log.h"
#include "calib/validate.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "comm/mpi_communicator.h"
#include "core/input.h"
#include "core/output.h"
#include "core/subprocess.h"
#include "launch/launch.h"
#include "spec/limits.h"
#include "spec/load_toml.h"
#include "train/host_profile.h"

namespace pentamesh::cli {
namespace {

struct CalibrateArgs {
  std::string runs, stack, cluster, out, name;
  bool host = false;
  int threads = 0;
  std::vector<int> np;  // --host: rank counts whose collectives to measure
  int repetitions = 5;
  int64_t comm_max_bytes = 16 << 20;
  bool comm_worker = false;  // internal: one rank of the --np measurement
  // --log: a training job's log, the launch file it ran, and the row's id and target file.
  std::string log, config, id, append;
  std::optional<int64_t> gpus, seq_len;
  int skip_steps = 2;
};

// The launch file as the log's run (import-config's reading, converted for calib/).
core::Result<calib::LogRunConfig> LogConfig(const CalibrateArgs& a) {
  launch::ImportOptions o;
  o.gpus = a.gpus;
  o.seq_len = a.seq_len;
  PM_ASSIGN_OR_RETURN(const launch::Imported im, launch::ImportConfig(a.config, o));
  calib::LogRunConfig c;
  c.engine = launch::ToString(im.engine);
  c.model = im.model;
  c.train = im.train;
  c.layout = im.layout;
  c.gpus = a.gpus.value_or(im.gpus.value_or(0));
  c.gpus_per_node = im.gpus_per_node.value_or(0);
  c.config_file = a.config;
  c.notes = im.notes;
  for (const std::string& w : im.warnings) c.notes.push_back(w);
  return c;
}

// --log: the row on stdout, or appended to --append's file.
int RunCalibrateLog(const CalibrateArgs& a) {
  if (a.config.empty()) return Fail("--log: give --config FILE, the launch file the job ran");
  if (a.cluster.empty()) {
    return Fail("--log: give --cluster PRESET, the GPU the job ran on (h100-sxm, a100-80gb, ...)");
  }
  auto text = core::ReadInputFile(a.log, core::kMaxLogFileBytes, "training log");
  if (!text.ok()) return Fail("--log: " + text.status().message());
  auto log = calib::ParseTrainLog(a.log, *text);
  if (!log.ok()) return Fail("--log: " + log.status().message());
  auto config = LogConfig(a);
  if (!config.ok()) return Fail("--config: " + config.status().message());
  calib::LogRunOptions o;
  o.id = a.id.empty() ? std::filesystem::path(a.log).stem().string() : a.id;
  o.sku = a.cluster;
  o.skip_steps = a.skip_steps;
  calib::Measured m;
  auto row = calib::LogRunRow(a.log, *log, *config, o, &m);
  if (!row.ok()) return Fail(fmt::format("--log {}: {}", a.log, row.status().message()));
  if (!a.append.empty()) {
    if (core::Status st = calib::AppendRunRow(a.append, *row); !st.ok())
      return Fail("--append: " + st.message());
  }
  fmt::print(stderr,
             "pentamesh calibrate --log: {} ({} steps used, {} warm-up skipped): {:.1f} tokens/s, "
             "{:.2f} tokens/s per GPU on {} GPUs{}\n",
             log->engine.empty() ? config->engine : log->engine, m.steps_used, m.steps_skipped,
             m.tokens_per_s, m.tokens_per_s_gpu, config->gpus,
             a.append.empty() ? "" : fmt::format("; row '{}' added to {}", o.id, a.append));
  fmt::print("{}\n", row->dump(1));
  return 0;
}

// --comm-worker, as one rank of `mpirun -np N`: times the collectives over the engine's own
// communicator; rank 0 writes them, fitted, as one [[comm]] entry to --out.
int RunCommWorker(const CalibrateArgs& a) {
  auto world = comm::MpiWorld::Create();
  if (!world.ok()) return Fail(world.status().message());
  comm::Communicator& group = (*world)->world();
  if (group.size() < 2) return Fail("--comm-worker: run under mpirun with at least 2 ranks");
  train::CommProfile c;
  c.ranks = group.size();
  c.samples = train::MeasureCollectives(
      group, {.max_bytes = a.comm_max_bytes, .repetitions = a.repetitions});
  c.fit = train::FitCollectives(c.ranks, c.samples);
  if (group.rank() == 0) {
    if (const core::Status st = core::WriteFileAtomic(a.out, train::CommProfileToml(c)); !st.ok())
      return Fail("--out: " + st.message());
  }
  return 0;
}

// Each collective's own fit (latency and bandwidth: a reduction's sum and transfer both grow with
// its bytes, so one collective alone cannot tell them apart) and the joint fit's residuals on it:
// how well the cost model's link (latency, bandwidth, reduction rate) describes them.
void PrintCommFit(const train::CommProfile& c) {
  fmt::print("\n  collectives at {} ranks (mpirun -np {}, shared memory), cost-model forms:\n",
             c.ranks, c.ranks);
  fmt::print("  {:<15} {:>11} {:>9}   {:>22}   {:>22}\n", "", "own fit", "", "own fit |err|",
             "joint fit error");
  fmt::print("  {:<15} {:>11} {:>9}   {:>7} {:>7} {:>6}   {:>7} {:>7} {:>6}\n", "collective",
             "latency us", "GB/s", "median", "max", "bias", "median", "max", "bias");
  std::vector<std::string> off;
  for (cost::Collective op : cost::kCollectives) {
    const train::CommFit own = train::FitCollectives(c.ranks, c.samples, op);
    const train::FitResiduals r = train::Residuals(own, c.ranks, c.samples, op);
    const train::FitResiduals j = train::Residuals(c.fit, c.ranks, c.samples, op);
    fmt::print(
        "  {:<15} {:>11.2f} {:>9.2f}   {:>6.0f}% {:>6.0f}% {:>+5.0f}%   {:>6.0f}% {:>6.0f}% "
        "{:>+5.0f}%\n",
        cost::CollectiveName(op), own.latency_us, own.bus_gbps, 100 * r.median_abs, 100 * r.max_abs,
        100 * r.median, 100 * j.median_abs, 100 * j.max_abs, 100 * j.median);
    if (std::fabs(j.median) > 0.3) off.push_back(cost::CollectiveName(op));
  }
  const train::FitResiduals all = train::Residuals(c.fit, c.ranks, c.samples);
  fmt::print("  {:<15} {:>11.2f} {:>9.2f}   {:>6.0f}% {:>6.0f}% {:>+5.0f}%\n", "joint (stored)",
             c.fit.latency_us, c.fit.bus_gbps, 100 * all.median_abs, 100 * all.max_abs,
             100 * all.median);
  fmt::print("  {:<15} {:>11} {:>9.2f}   (the sum of all_reduce and reduce_scatter; 0 = free)\n",
             "joint reduce", "GB/s", c.fit.reduce_gbps);
  if (!off.empty()) {
    fmt::print("  note: the joint fit is off by more than 30% (median) on {}\n",
               fmt::join(off, ", "));
  }
}

// --host: this machine measured for the engine's time prediction (train::MeasureHost, and with
// --np train::MeasureCommAtRanks per rank count).
int RunCalibrateHost(const CalibrateArgs& a) {
  train::HostProfile collectives;
  if (!a.np.empty()) {
    const std::string exe = core::SelfExecutable();
    if (exe.empty()) return Fail("--np: cannot find this executable (/proc/self/exe)");
    const auto mpirun = train::FindMpirun();
    if (!mpirun.ok()) return Fail(mpirun.status().message());
    for (int np : std::set<int>(a.np.begin(), a.np.end())) {
      fmt::print("pentamesh calibrate --host: timing collectives at {} ranks (mpirun -np {})...\n",
                 np, np);
      std::fflush(stdout);
      auto c = train::MeasureCommAtRanks(
          np, *mpirun, exe,
          {"calibrate", "--comm-worker", "--repetitions", std::to_string(a.repetitions),
           "--comm-max-bytes", std::to_string(a.comm_max_bytes), "--out"});
      if (!c.ok()) return Fail(c.status().message());
      PrintCommFit(*c);
      collectives.comm.push_back(*c);
    }
  }
  fmt::print("pentamesh calibrate --host: timing sgemm shapes and a triad ({} threads)...\n",
             a.threads > 0 ? fmt::format("{}", a.threads) : "all");
  train::HostProfile p = train::MeasureHost(a.threads, a.repetitions);
  p.comm = std::move(collectives.comm);
  fmt::print("\n  {:>6} {:>6} {:>6} {:>12} {:>12} {:>12} {:>12}\n", "m", "n", "k", "GFLOP/s",
             "form", "1 thread", "form");
  for (size_t i = 0; i < p.gemms.size(); ++i) {
    const train::GemmSample& s = p.gemms[i];
    const train::GemmSample& s1 = p.gemms_1t.empty() ? s : p.gemms_1t[i];
    const double flop = 2.0 * static_cast<double>(s.m * s.n * s.k);
    fmt::print("  {:>6} {:>6} {:>6} {:>12.1f} {:>12.1f} {:>12.1f} {:>12.1f}\n", s.m, s.n, s.k,
               s.gflops(), flop / p.Form().Predict(s) / 1e9, s1.gflops(),
               flop / p.Form1t().Predict(s1) / 1e9);
  }
  fmt::print(
      "\n  large-GEMM rate {:.1f} GFLOP/s, per-dimension overhead {:.1f} elements ({} "
      "threads)\n",
      p.peak_gflops, p.gemm_dim_overhead, p.threads);
  fmt::print("  one thread: {:.1f} GFLOP/s, per-dimension overhead {:.1f} elements\n",
             p.peak_gflops_1t, p.gemm_dim_overhead_1t);
  fmt::print("  triad bandwidth {:.1f} GB/s\n", p.mem_gbps);
  if (const core::Status st = core::WriteFileAtomic(a.out, train::HostProfileToml(p)); !st.ok())
    return Fail("--out: " + st.message());
  fmt::print("\nwrote {} (use it in a run config as run.host_profile = \"{}\")\n", a.out, a.out);
  return 0;
}

// Every run must be usable: calibrating on a row pentamesh cannot estimate is a user error.
core::Result<std::vector<calib::Run>> LoadStrict(const CalibrateArgs& a) {
  PM_ASSIGN_OR_RETURN(std::vector<calib::Run> runs, calib::LoadRuns(a.runs));
  if (runs.empty()) return core::Status::Error(fmt::format("{}: no runs", a.runs));
  for (calib::Run& r : runs) {
    if (!a.cluster.empty() && r.usable()) {
      PM_ASSIGN_OR_RETURN(spec::ClusterSpec c, spec::LoadCluster(a.cluster));
      c.gpus_per_node = r.cluster.gpus_per_node;
      PM_RETURN_IF_ERROR(spec::SetGpuCount(c, r.cluster.gpus()));
      r.cluster = c;
      r.sku = c.name;
    }
    if (!a.stack.empty()) r.stack = a.stack;
    if (!r.usable()) {
      return core::Status::Error(fmt::format("{}: row '{}': {}", a.runs, r.id, r.unusable));
    }
  }
  return runs;
}

// The one stack every run comes from; several stacks are a user error.
core::Result<std::string> SingleStack(const std::vector<calib::Run>& runs) {
  std::set<std::string> stacks;
  for (const calib::Run& r : runs) stacks.insert(r.stack);
  if (stacks.size() > 1) {
    std::string names;
    for (const auto& s : stacks) names += (names.empty() ? "" : ", ") + s;
    return core::Status::Error(fmt::format(
        "--runs: the runs come from several stacks ({}); name yours with --stack, or split the "
        "file",
        names));
  }
  return *stacks.begin();
}

// GPU parameters the profile does not set start from the runs' cluster presets.
void SeedGpuPriors(const std::vector<const calib::Run*>& runs, calib::Calibration& prior) {
  for (const calib::Run* r : runs) {
    const std::string cls = calib::GpuClass(r->cluster.name);
    auto& gpu = prior.gpu[cls];
    if (!gpu.count("gemm_efficiency") && r->cluster.gemm_efficiency > 0) {
      gpu["gemm_efficiency"] = r->cluster.gemm_efficiency;
    }
    if (!gpu.count("attention_factor") && r->cluster.attention_factor > 0) {
      gpu["attention_factor"] = r->cluster.attention_factor;
    }
    if (!gpu.count("fp8_gemm_speedup") && r->cluster.fp8_gemm_speedup > 0) {
      gpu["fp8_gemm_speedup"] = r->cluster.fp8_gemm_speedup;
    }
  }
}

// The fitted parameters against the prior, each run's in-sample and left-out error, and the
// error statistics before and after.
void PrintFit(const std::vector<const calib::Run*>& ptrs, const calib::Calibration& prior,
              const calib::FitResult& fit, const std::vector<double>& before,
              const std::vector<double>& in_sample, const std::vector<double>& loo) {
  fmt::print("  {:<30} {:>8} {:>10} {:>8}\n", "parameter", "runs", "prior", "fitted");
  for (size_t i = 0; i < fit.free.size(); ++i) {
    const calib::FreeParam& f = fit.free[i];
    const auto& table = f.def->scope == calib::Scope::kGpu ? fit.cal.gpu : fit.cal.stack;
    fmt::print("  {:<30} {:>8} {:>10.4g} {:>8.4g}\n", f.Name(), fit.informed_by[i],
               prior.Get(*f.def, f.key), table.at(f.key).at(f.def->name));
  }
  fmt::print("\n  {:<50} {:>10} {:>10} {:>9} {:>9}\n", "run", "measured", "predicted", "in-sample",
             "left out");
  for (size_t i = 0; i < ptrs.size(); ++i) {
    fmt::print("  {:<50} {:>10.0f} {:>10.0f} {:>+8.1f}% {:>+8.1f}%\n", ptrs[i]->id.substr(0, 50),
               ptrs[i]->tokens_per_s_gpu, ptrs[i]->tokens_per_s_gpu * (1 + in_sample[i]),
               100 * in_sample[i], 100 * loo[i]);
  }
  const calib::ErrorStats s0 = calib::Stats(before), s1 = calib::Stats(in_sample),
                          s2 = calib::Stats(loo);
  fmt::print("\n  median |error|: before {:.1f}%, in-sample {:.1f}%, leave-one-out {:.1f}%\n",
             100 * s0.median_abs, 100 * s1.median_abs, 100 * s2.median_abs);
  fmt::print("  p90 |error|:    before {:.1f}%, in-sample {:.1f}%, leave-one-out {:.1f}%\n",
             100 * s0.p90_abs, 100 * s1.p90_abs, 100 * s2.p90_abs);
  if (s2.median_abs > 1.5 * s1.median_abs + 0.02) {
    fmt::print(
        "  note: leave-one-out error well above in-sample: the fit does not generalize "
        "across these runs; add runs or keep the shipped profile\n");
  }
}

// The preset with the fitted parameters and the runs' intervals, named for --out.
calib::Profile FittedProfile(const CalibrateArgs& a, const calib::Profile& preset,
                             const std::string& stack, const calib::FitResult& fit,
                             const std::vector<const calib::Run*>& ptrs,
                             const std::vector<double>& loo) {
  calib::Profile out = preset;
  out.name = a.name.empty() ? stack + "-calibrated" : a.name;
  out.stack = stack;
  out.fitted_on = fmt::format("{} ({} runs)", a.runs, ptrs.size());
  out.gpu.clear();
  out.intervals.clear();
  for (const calib::FreeParam& f : fit.free) {
    if (f.def->scope == calib::Scope::kGpu) {
      out.gpu[f.key][f.def->name] = fit.cal.gpu.at(f.key).at(f.def->name);
    } else {
      out.params[f.def->name] = fit.cal.stack.at(f.key).at(f.def->name);
    }
  }
  out.intervals = calib::IntervalsFrom(ptrs, loo);
  return out;
}

// The --np rules, checked before anything is measured.
core::Status CheckNp(const CalibrateArgs& a) {
  if (a.np.empty()) return core::Status::Ok();
  if (!a.host) {
    return core::Status::Error("--np: needs --host (it measures this host's MPI collectives)");
  }
  for (int np : a.np) {
    if (np < 2) {
      return core::Status::Error(fmt::format("--np: {} ranks; collectives need at least 2", np));
    }
    if (np > train::kMaxCommRanks) {
      return core::Status::Error(fmt::format(
          "--np: {} ranks is above the limit of {} ranks on one host", np, train::kMaxCommRanks));
    }
  }
  return core::Status::Ok();
}

int RunCalibrate(const CalibrateArgs& a) {
  if ((a.host || a.comm_worker) && a.out.empty()) return Fail("calibrate: --out is required");
  if (a.comm_worker) return RunCommWorker(a);
  if (core::Status st = CheckNp(a); !st.ok()) return Fail(st.message());
  if (a.host) return RunCalibrateHost(a);
  if (!a.log.empty()) return RunCalibrateLog(a);
  if (a.runs.empty()) {
    return Fail(
        "calibrate: --log FILE --config FILE reads a training log into a row; give --runs FILE "
        "(measured runs) or --host");
  }
  if (a.out.empty()) return Fail("calibrate: --out is required (the profile TOML to write)");
  auto runs = LoadStrict(a);
  if (!runs.ok()) return Fail(runs.status().message());
  auto stack_found = SingleStack(*runs);
  if (!stack_found.ok()) return Fail(stack_found.status().message());
  const std::string stack = *stack_found;
  auto preset = calib::LoadProfile(a.stack.empty() ? stack : a.stack);
  if (!preset.ok()) return Fail(preset.status().message());
  calib::FitOptions options;
  options.prior = calib::ToCalibration(*preset);
  std::vector<const calib::Run*> ptrs;
  for (const calib::Run& r : *runs) ptrs.push_back(&r);
  SeedGpuPriors(ptrs, options.prior);
  const auto before = calib::Errors(ptrs, options.prior);
  const calib::FitResult fit = calib::Fit(ptrs, options);
  const auto in_sample = calib::Errors(ptrs, fit.cal);
  const auto loo = ptrs.size() >= 2 ? calib::LeaveOneOutErrors(ptrs, options)
                                    : std::vector<double>(ptrs.size(), 0.0);
  fmt::print("pentamesh calibrate: {} runs of stack {} from {}\n\n", ptrs.size(), stack, a.runs);
  PrintFit(ptrs, options.prior, fit, before, in_sample, loo);
  const calib::Profile out = FittedProfile(a, *preset, stack, fit, ptrs, loo);
  if (const core::Status st = core::WriteFileAtomic(a.out, calib::ProfileToml(out)); !st.ok())
    return Fail("--out: " + st.message());
  fmt::print("\nwrote {} (use it as --stack {})\n", a.out, a.out);
  return 0;
}

}  // namespace

RunFn AddCalibrateCommand(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "Fit a stack profile to measured runs (--runs), read a training log into a measured run "
      "(--log), or measure this host for the engine's predictions (--host)");
  CLI::Option* runs =
      sub->add_option("--runs", args->runs, "runs file (bench/data/published_runs.json format)");
  CLI::Option* host = sub->add_flag(
      "--host", args->host,
      "measure this machine instead (sgemm and sgemv rates fitted to the GEMM form, triad "
      "bandwidth, attention): a host profile for run.host_profile");
  runs->excludes(host);
  CLI::Option* log = sub->add_option(
      "--log", args->log,
      "a training job's log (Megatron-LM, Megatron-DeepSpeed or torchtitan): its per-iteration "
      "lines become one measured-run row (JSON on stdout)");
  log->excludes(runs)->excludes(host);
  sub->add_option("--config", args->config,
                  "--log: the launch file the job ran (train.sh, job.toml, launch.sh or "
                  "ds_config.json; read as import-config reads it)");
  sub->add_option("--gpus", args->gpus, "--log: world size, where the launch file does not say it")
      ->check(IntIn(1, spec::kMaxGpus));
  sub->add_option("--seq-len", args->seq_len,
                  "--log: sequence length, where the launch file does not say it")
      ->check(IntIn(1));
  sub->add_option("--skip-steps", args->skip_steps,
                  "--log: warm-up steps left out (steps numbered up to N)")
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--id", args->id, "--log: the row's id (default: the log's file name)");
  sub->add_option("--append", args->append,
                  "--log: add the row to this runs file (created if missing; an id it has is "
                  "refused)")
      ->check(OutputFile());
  sub->add_option("--threads", args->threads, "--host: BLAS and triad threads (0 = all)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--np", args->np,
                  fmt::format("--host: also time MPI collectives at N ranks (2..{}; repeatable, "
                              "or N,M,...): mpirun -np N on this host, shared memory",
                              train::kMaxCommRanks))
      ->delimiter(',');
  sub->add_option("--repetitions", args->repetitions,
                  "--host: timed repetitions per shape and collective (the median is kept)")
      ->check(CLI::Range(1, 100));
  sub->add_option("--comm-max-bytes", args->comm_max_bytes,
                  "--host --np: largest collective (sizes 4 KiB, 16 KiB, ... up to this)")
      ->check(CLI::Range(int64_t{4096}, int64_t{1} << 30));
  sub->add_flag("--comm-worker", args->comm_worker)->group("");  // internal: a rank of --np
  sub->add_option("--stack", args->stack,
                  "the stack the runs used (a preset: megatron, torchtitan, maxtext, llm-foundry, "
                  "deepspeed); default: the runs' software");
  sub->add_option("--cluster", args->cluster,
                  "cluster preset or TOML file for every run (--log: the preset of the job's GPU)");
  sub->add_option("--out", args->out, "profile TOML to write (--runs, --host)")
      ->check(OutputFile());
  sub->add_option("--name", args->name, "the profile's name (default <stack>-calibrated)");
  return [args]() { return RunCalibrate(*args); };
}

}  // namespace pentamesh::cli

// `pentamesh tune --config run.toml --np N [--top K] [--steps S] [--allow CLAUSES] [--out-dir DIR]
// [--json] [--json-out FILE] [--html OUT] [--injections FILE] [--host-profile FILE] [--plan-only]`:
// plans the run for this host, then measures the top K layouts, the FSDP baseline and the
// single-process run under mpirun (tune::Tune) and prints the table, the rank agreement and the
// measured best. Thin: parse, call tune, print.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/output.h"
#include "report/page.h"
#include "spec/layout.h"
#include "tune/tune.h"

namespace pentamesh::cli {
namespace {

struct TuneArgs {
  tune::Options options;
  bool json = false;
  bool plan_only = false;
  std::string html;
  std::string json_out;
};

// One line per run on stderr: a live line on a terminal, a plain line otherwise.
void PrintProgress(const tune::Row& row, int index, int total, bool done) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  const std::string what =
      fmt::format("[{}/{}] {} {} ({} rank{})", index + 1, total, tune::KindName(row.kind),
                  spec::ShortLayout(row.layout), row.ranks, row.ranks > 1 ? "s" : "");
  if (!done) {
    if (tty) fmt::print(stderr, "\r\033[K{} running...", what);
    return;
  }
  const std::string outcome =
      row.measured ? fmt::format("{:.4f} s/step measured, {:.4f} predicted ({:.0f} s)",
                                 row.measured->step_time_s, row.predicted.time.step, row.wall_s)
                   : "FAILED: " + row.error;
  fmt::print(stderr, "{}{} {}\n", tty ? "\r\033[K" : "", what, outcome);
}

int RunTune(TuneArgs& a) {
  if (a.options.work_dir.empty()) a.options.work_dir = "out/tune";
  auto result = a.plan_only ? tune::Plan(a.options)
                            : tune::Tune(a.options, a.json ? tune::Progress{} : PrintProgress);
  if (!result.ok()) return Fail(result.status().message());
  if (!a.html.empty()) {
    if (const core::Status st = report::WritePage(a.html, tune::Html(*result)); !st.ok())
      return Fail(st.message());
  }
  if (!a.json_out.empty()) {
    if (const core::Status st =
            core::WriteFileAtomic(a.json_out, tune::ToJson(*result).dump(2) + "\n");
        !st.ok())
      return Fail("--json-out: " + st.message());
  }
  if (a.json) {
    fmt::print("{}\n", tune::ToJson(*result).dump(2));
  } else {
    fmt::print("{}", tune::Table(*result));
    if (!a.html.empty()) fmt::print("wrote {}\n", a.html);
  }
  return 0;
}

}  // namespace

RunFn AddTuneCommand(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Plan a run for this host, then measure the top layouts, the FSDP baseline and one "
      "process under mpirun, predicted next to measured");
  tune::Options& o = args->options;
  cmd->add_option("--config", o.config, "Run TOML (as for `pentamesh train`)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", o.sets, "Override applied to every run: table.key=value");
  cmd->add_option("--np", o.np, fmt::format("Ranks (2..{})", tune::kMaxRanks))
      ->required()
      ->transform(IntIn(2, tune::kMaxRanks));
  cmd->add_option("--top", o.top_k, "Planned layouts measured (default 5)")
      ->transform(IntIn(1, 64));
  cmd->add_option("--steps", o.steps,
                  "Optimizer steps per run (default 20; the first quarter "
                  "is warm-up)")
      ->transform(IntIn(4, 100000));
  cmd->add_option("--allow", o.allow, "Restrict the candidates, e.g. \"pp>=2 zero<=1\"");
  cmd->add_option("--out-dir", o.work_dir, "Directory of the runs (default out/tune)");
  cmd->add_option("--host-profile", o.host_profile,
                  "A measured host (`calibrate --host`); default: run.host_profile, else measure")
      ->check(CLI::ExistingFile);
  cmd->add_option("--mpirun", o.mpirun, "The launcher (default mpirun, from PATH)");
  cmd->add_option("--timeout", o.timeout_s,
                  "Seconds per run before it is killed (default: from "
                  "the prediction, at least 300)")
      ->transform(NumberIn(1));
  cmd->add_flag(
      "--no-single", [&o](int64_t) { o.single = false; }, "Skip the one-process run");
  cmd->add_flag(
      "--no-fsdp", [&o](int64_t) { o.fsdp = false; }, "Skip the FSDP baseline");
  cmd->add_flag("--plan-only", args->plan_only, "Print the candidates and predictions; run none");
  cmd->add_flag("--json", args->json, "Print JSON instead of the table");
  cmd->add_option("--json-out", args->json_out, "Also write the JSON to this file")
      ->check(OutputFile());
  cmd->add_option("--injections", o.injections,
                  "Failure injections' outcomes to show on the page (scripts/inject.sh --out)");
  cmd->add_option("--html", args->html, "Write the comparison page (one self-contained file)")
      ->check(OutputFile());
  return [args] { return RunTune(*args); };
}

}  // namespace pentamesh::cli

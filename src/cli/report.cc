// `pentamesh report --run DIR --html FILE [--trace TRACE]`: renders a training run's metrics.jsonl
// (written by `pentamesh train`), and optionally its Chrome trace, as one self-contained HTML page.
// Thin: parse, call report/, print.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "report/run_report.h"

namespace pentamesh::cli {
namespace {

struct ReportOptions {
  std::string run_dir;
  std::string html;
  std::string trace;
};

int Run(const ReportOptions& o) {
  auto run = report::LoadRunMetrics(o.run_dir);
  if (!run.ok()) return Fail(run.status().message());
  if (!o.trace.empty()) {
    const core::Status traced = report::LoadRunTrace(o.trace, &*run);
    if (!traced.ok()) return Fail("--trace: " + traced.message());
  }
  const core::Status written = report::WriteRunHtml(*run, o.html);
  if (!written.ok()) return Fail(written.message());
  fmt::print("report: {} steps from {} written to {}\n", run->steps.size(), run->source, o.html);
  return 0;
}

}  // namespace

RunFn AddReportCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("report", "Render a training run's metrics as an HTML page");
  auto o = std::make_shared<ReportOptions>();
  sub->add_option("--run", o->run_dir, "run directory holding metrics.jsonl (train's out_dir)")
      ->required();
  sub->add_option("--html", o->html, "the HTML file to write")->required()->check(OutputFile());
  sub->add_option("--trace", o->trace,
                  "also draw this Chrome trace of the run (pentamesh train --trace FILE)");
  return [o]() { return Run(*o); };
}

}  // namespace pentamesh::cli

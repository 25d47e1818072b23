// `pentamesh report --run DIR --html FILE`: renders a training run's metrics.jsonl (written by
// `pentamesh train`) as one self-contained HTML page. Thin: parse, call report/, print.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "report/run_report.h"

namespace pentamesh::cli {
namespace {

struct ReportOptions {
  std::string run_dir;
  std::string html;
};

int Run(const ReportOptions& o) {
  auto run = report::LoadRunMetrics(o.run_dir);
  if (!run.ok()) return Fail(run.status().message());
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
  sub->add_option("--html", o->html, "the HTML file to write")->required();
  return [o]() { return Run(*o); };
}

}  // namespace pentamesh::cli

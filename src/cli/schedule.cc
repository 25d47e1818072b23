// `pentamesh schedule`: prints a pipeline schedule's action lists, its simulated step x rank grid
// and bubble, and optionally writes the simulated timeline as a Chrome trace and/or as an HTML
// timeline (report/timeline.h).
#include <fmt/format.h>

#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/output.h"
#include "report/timeline.h"
#include "schedule/estimate.h"
#include "schedule/format.h"

namespace pentamesh::cli {
namespace {

struct ScheduleOptions {
  std::string kind = "1f1b";
  int pp = 1;
  int microbatches = 1;
  int rank = -1;  // -1: every rank
  bool rank_given = false;
  bool grid = false;
  std::string trace;
  std::string html;
  std::vector<double> costs = {1.0, 1.0, 1.0};  // F, B (input grad), W (weight grad)
  double p2p_s = 0.0;
};

std::string RankList(const schedule::SimResult& sim, int rank, auto&& value) {
  std::string out;
  for (int r = 0; r < static_cast<int>(sim.ranks.size()); ++r) {
    if (rank < 0 || r == rank) out += fmt::format(" {}", value(sim.ranks[r]));
  }
  return out;
}

int Run(const ScheduleOptions& o) {
  auto parsed = schedule::ParseScheduleKind(o.kind);
  if (!parsed.ok()) return Fail(parsed.status().message());
  schedule::ScheduleSpec spec = *parsed;
  spec.pp = o.pp;
  spec.microbatches = o.microbatches;
  if (o.rank_given && (o.rank < 0 || o.rank >= o.pp)) {
    return Fail(fmt::format("schedule: --rank={} must be in [0, --pp={})", o.rank, o.pp));
  }
  if (o.costs.size() != 3) return Fail("schedule: --costs takes three numbers F,B,W");
  auto programs = schedule::MakeAll(spec);
  if (!programs.ok()) return Fail(programs.status().message());
  schedule::Costs costs;
  costs.per_stage = {{.time_f_s = o.costs[0], .time_b_s = o.costs[1], .time_w_s = o.costs[2]}};
  costs.time_p2p_s = o.p2p_s;
  auto sim = schedule::Simulate(*programs, spec.topology(), costs);
  if (!sim.ok()) return Fail(sim.status().message());
  if (!sim->complete) return Fail(sim->deadlock);

  fmt::print("schedule {} pp={} microbatches={}\n", schedule::ToString(spec), spec.pp,
             spec.microbatches);
  for (int r = 0; r < spec.pp; ++r) {
    if (o.rank >= 0 && r != o.rank) continue;
    fmt::print("rank {}: {}\n", r,
               schedule::FormatProgram((*programs)[r], spec.virtual_stages > 1));
  }
  if (o.grid) fmt::print("\n{}", schedule::FormatGrid(*sim, spec.virtual_stages));
  fmt::print("\nsimulated with F={} B={} W={} p2p={} (full backward = B + W):\n", o.costs[0],
             o.costs[1], o.costs[2], o.p2p_s);
  fmt::print(
      "  makespan {:.4g}, bubble {:.2f}% of the makespan (mean over ranks), "
      "idle/busy {:.4f}\n",
      sim->makespan_s, 100 * sim->bubble_fraction, sim->bubble_ratio);
  if (const auto closed = schedule::BubbleFractionClosedForm(spec)) {
    fmt::print("  closed form at equal costs: bubble {:.2f}%\n", 100 * *closed);
  }
  fmt::print("  idle per rank:{}\n", RankList(*sim, o.rank, [](const schedule::RankStats& s) {
               return fmt::format("{:.4g}", s.idle_s);
             }));
  fmt::print("  peak in-flight activations per rank (chunks):{}\n",
             RankList(*sim, o.rank, [](const schedule::RankStats& s) { return s.peak_in_flight; }));
  if (!o.trace.empty()) {
    if (const core::Status st = core::WriteFileAtomic(
            o.trace, schedule::ChromeTrace(*sim, spec.virtual_stages).dump(1) + "\n");
        !st.ok())
      return Fail("schedule: --trace: " + st.message());
    fmt::print("  trace written to {} (open in Perfetto or chrome://tracing)\n", o.trace);
  }
  if (!o.html.empty()) {
    const std::string costs_text = fmt::format("F={} B={} W={} p2p={} (full backward = B + W)",
                                               o.costs[0], o.costs[1], o.costs[2], o.p2p_s);
    const core::Status written =
        report::WriteScheduleHtml(spec, *programs, *sim, costs_text, o.html);
    if (!written.ok()) return Fail("schedule: " + written.message());
    fmt::print("  timeline written to {}\n", o.html);
  }
  return 0;
}

}  // namespace

RunFn AddScheduleCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("schedule",
                                 "Print a pipeline schedule's actions, simulated grid and bubble");
  auto o = std::make_shared<ScheduleOptions>();
  sub->add_option("--kind", o->kind, "gpipe, 1f1b, interleaved:V, zb (ZB-H1) or zbv (ZB-V)")
      ->capture_default_str();
  sub->add_option("--pp", o->pp, "pipeline ranks")->required();
  sub->add_option("--microbatches", o->microbatches, "micro-batches per step")->required();
  auto* rank = sub->add_option("--rank", o->rank, "print only this pp rank's program and stats");
  sub->add_flag("--grid", o->grid, "print the step x rank timeline grid");
  sub->add_option("--trace", o->trace, "write the simulated timeline as Chrome trace JSON")
      ->check(OutputFile());
  sub->add_option("--html", o->html, "write the simulated timeline as a self-contained HTML page")
      ->check(OutputFile());
  sub->add_option("--costs", o->costs, "F,B,W action costs (seconds or units)")
      ->delimiter(',')
      ->expected(3)
      ->capture_default_str();
  sub->add_option("--p2p", o->p2p_s, "p2p latency added to every cross-rank dependency")
      ->check(NumberIn(0));
  return [o, rank]() {
    o->rank_given = rank->count() > 0;
    return Run(*o);
  };
}

}  // namespace pentamesh::cli

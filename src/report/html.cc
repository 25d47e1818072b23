#include "report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/output.h"
#include "report/chart.h"
#include "report/page.h"
#include "report/svg.h"
#include "report/timeline.h"

namespace pentamesh::report {
namespace {

constexpr double kGB = 1e9;

std::string Pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

struct Bar {
  std::string label;
  const cost::Estimate* estimate;
};

// A horizontal stacked chart of the plan page: one row (34 px) per bar, one tick per row.
StackedBarChart PlanStacks(const std::string& id, std::vector<std::string> parts,
                           const ChartAxis& axis, const BarTick& tick, size_t rows) {
  StackedBarChart chart(id, "", std::move(parts), axis);
  chart.horizontal = true;
  chart.height_px = 34 * static_cast<int>(rows);
  chart.ticks.push_back(tick);
  return chart;
}

// Memory per GPU by category (cost::kMemoryCategories, in its order and with ChartColor's colour
// of its index) as horizontal stacks, each with its capacity tick and its total, the sum over the
// list. The value axis ends at 1.5x the largest capacity; a stack beyond it is cut and its total
// printed in red.
std::string MemoryChart(const std::vector<Bar>& bars) {
  std::vector<std::string> parts;
  for (const cost::MemoryCategory& c : cost::kMemoryCategories) parts.push_back(c.label);
  StackedBarChart chart =
      PlanStacks("plan-memory", parts,
                 ChartAxis("GB per GPU (red dashes: capacity = HBM - safety margin)", ",.2~f"),
                 BarTick("capacity", "#c00", /*dashed=*/true), bars.size());
  double cap_gb = 0;
  for (const Bar& b : bars) {
    const cost::Memory& m = b.estimate->memory;
    StackedBar bar(b.label, "", {});
    double total_gb = 0;
    for (const cost::MemoryCategory& c : cost::kMemoryCategories) {
      bar.parts.push_back(m.*c.field / kGB);
      total_gb += m.*c.field / kGB;
    }
    bar.ticks = {m.capacity / kGB};
    bar.label = fmt::format("{:.1f} GB", total_gb);
    chart.bars.push_back(std::move(bar));
    cap_gb = std::max(cap_gb, m.capacity / kGB);
  }
  if (cap_gb > 0) chart.value_max = 1.5 * cap_gb;
  return StackedBarChartHtml(chart);
}

// Step time by term (cost::kTimeTerms, in its order and with ChartColor's colour of its index) as
// horizontal stacks; a black tick marks the step after overlap, printed after the stack.
std::string TimeChart(const std::vector<Bar>& bars) {
  std::vector<std::string> parts;
  for (const cost::TimeTerm& t : cost::kTimeTerms) parts.push_back(t.name);
  StackedBarChart chart =
      PlanStacks("plan-time", parts,
                 ChartAxis("seconds per optimizer step (terms as exposed after overlap)", ",.3~f"),
                 BarTick("step", "#000"), bars.size());
  for (const Bar& b : bars) {
    const cost::Time& time = b.estimate->time;
    StackedBar bar(b.label, "", {});
    for (const cost::TimeTerm& t : cost::kTimeTerms) bar.parts.push_back(time.*t.field);
    bar.ticks = {time.step};
    bar.label = fmt::format("{:.2f} s", time.step);
    chart.bars.push_back(std::move(bar));
  }
  return StackedBarChartHtml(chart);
}

// MFU and scaling efficiency against the GPU count, and the table of each count's best layout.
std::string ScaleSection(const std::vector<plan::ScalePoint>& points) {
  XyChart chart("plan-scale", ChartAxis("GPUs", ",d"), ChartAxis("", kFormatPercent));
  chart.x.log = true;
  chart.y.zero = true;
  XySeries mfu("MFU", {}, SeriesStyle::kLine, ChartColor(0));
  XySeries eff("scaling efficiency", {}, SeriesStyle::kLine, ChartColor(2));
  std::string table =
      "<table><tr><th>GPUs</th><th>best layout</th><th>MFU</th><th>tokens/s</th>"
      "<th>scaling efficiency</th><th>limit</th></tr>\n";
  for (const plan::ScalePoint& p : points) {
    if (!p.best) {
      table += fmt::format(
          "<tr><td>{}</td><td class=l colspan=5 style=\"color:#c00\">nothing "
          "fits</td></tr>\n",
          p.gpus);
      continue;
    }
    const double gpus = static_cast<double>(p.gpus);
    const std::string layout = spec::ShortLayout(p.best->layout);
    mfu.points.emplace_back(gpus, p.best->mfu);
    mfu.labels.push_back(fmt::format("{} ({:.2f}M tok/s)", layout, p.best->tokens_per_s / 1e6));
    eff.points.emplace_back(gpus, p.efficiency);
    eff.labels.push_back(layout);
    table += fmt::format(
        "<tr><td>{}</td><td class=l>{}</td><td>{}</td><td>{:.2f}M</td><td>{}</td><td "
        "class=l>{}</td></tr>\n",
        p.gpus, Escape(layout), Pct(p.best->mfu), p.best->tokens_per_s / 1e6, Pct(p.efficiency),
        p.limiting ? Escape(p.limiting->name) : "");
  }
  chart.series.push_back(std::move(mfu));
  chart.series.push_back(std::move(eff));
  return XyChartHtml(chart) + table + "</table>\n";
}

// Model x node-count grid; each cell shows the best layout's MFU and degrees, coloured by MFU
// (white to blue over 0-60%).
std::string SweepChart(const plan::SweepResult& sweep) {
  std::vector<std::string> columns;
  for (int64_t n : sweep.nodes) columns.push_back(fmt::format("{} node{}", n, n == 1 ? "" : "s"));
  HeatmapChart chart("plan-sweep", sweep.models, columns);
  chart.value_max = 0.6;
  for (size_t r = 0; r < sweep.models.size(); ++r) {
    chart.cells.emplace_back();
    for (size_t c = 0; c < sweep.nodes.size(); ++c) {
      const plan::SweepCell& cell = sweep.at(r, c);
      HeatmapCell out;
      if (!cell.best) {
        out.lines = {"does not fit"};
        out.hover = cell.why_not;
      } else {
        const cost::Estimate& e = *cell.best;
        out.value = e.mfu;
        out.lines = {Pct(e.mfu),
                     fmt::format("tp{} pp{} dp{}{}", e.layout.tp, e.layout.pp, e.layout.dp,
                                 e.layout.cp > 1 ? fmt::format(" cp{}", e.layout.cp) : "")};
        out.hover = spec::ShortLayout(e.layout);
      }
      chart.cells.back().push_back(std::move(out));
    }
  }
  return HeatmapChartHtml(chart);
}

// Days and cost with failures (cost::Goodput): "58.1 days, USD 5.7e+07", or why there are none.
std::string WithFailures(const cost::Goodput& g) {
  if (!g.progresses) return "never finishes";
  return fmt::format("{:.1f} ({} goodput)", g.days, Pct(g.goodput));
}

std::string TopTable(const std::vector<cost::Estimate>& top,
                     const std::vector<cost::Goodput>& goodput) {
  const bool failures = goodput.size() == top.size();
  std::string html = fmt::format(
      "<table><tr><th>#</th><th>layout</th><th>memory GB</th><th>step s</th><th>tokens/s</th>"
      "<th>MFU</th><th>bubble</th><th>days</th>{}<th>cost USD</th><th>why it ranks below #1</th>"
      "</tr>\n",
      failures ? "<th>days with failures</th>" : "");
  for (size_t i = 0; i < top.size(); ++i) {
    const cost::Estimate& e = top[i];
    html += fmt::format(
        "<tr><td>{}</td><td class=l>{}</td><td>{:.1f}</td><td>{:.3f}</td><td>{:.0f}</td>"
        "<td>{}</td><td>{}</td><td>{:.1f}</td>{}<td>{:.3g}</td><td class=l>{}</td></tr>\n",
        i + 1, Escape(spec::ShortLayout(e.layout)), e.memory.total / kGB, e.time.step,
        e.tokens_per_s, Pct(e.mfu), Pct(e.bubble_fraction), e.days,
        failures ? "<td>" + WithFailures(goodput[i]) + "</td>" : "", e.cost_usd,
        i == 0 ? "best" : Escape(plan::ExplainGap(e, top.front())));
  }
  return html + "</table>\n";
}

std::string SeqText(int64_t seq_len, int64_t cap) {
  if (seq_len == 0) return "none fits";
  return fmt::format("{}{}", seq_len, seq_len >= cap ? " (cap)" : "");
}

std::string BaselineTable(const plan::BaselineComparison& b) {
  const cost::Estimate& f = b.fsdp;
  const cost::Estimate& o = b.best;
  std::string html =
      "<table><tr><th></th><th>FSDP (ZeRO-3, dp = GPUs)</th><th>best layout</th></tr>\n";
  auto row = [&](const std::string& name, const std::string& a, const std::string& c) {
    html += fmt::format("<tr><td class=l>{}</td><td>{}</td><td>{}</td></tr>\n", Escape(name),
                        Escape(a), Escape(c));
  };
  row("layout", spec::ShortLayout(f.layout), spec::ShortLayout(o.layout));
  for (const cost::MemoryCategory& c : cost::kMemoryCategories) {
    row(std::string("memory: ") + c.label, fmt::format("{:.2f} GB", f.memory.*c.field / kGB),
        fmt::format("{:.2f} GB", o.memory.*c.field / kGB));
  }
  row("memory: total / capacity",
      fmt::format("{:.1f} / {:.1f} GB", f.memory.total / kGB, f.memory.capacity / kGB),
      fmt::format("{:.1f} / {:.1f} GB", o.memory.total / kGB, o.memory.capacity / kGB));
  std::string why = f.fits ? "yes" : "no";
  for (const auto& v : f.violations) why += "; " + v;
  row("runs at the requested sequence and batch", why, "yes");
  row("longest sequence it holds (mbs 1, full recompute)",
      SeqText(b.fsdp_max_seq_len, b.seq_len_cap), SeqText(b.best_max_seq_len, b.seq_len_cap));
  const cost::Estimate* ref = f.fits ? &f : (b.fsdp_runnable ? &*b.fsdp_runnable : nullptr);
  if (ref == nullptr) {
    row("MFU / tokens/s / days", "FSDP cannot run at any sequence >= 512", "");
    return html + "</table>\n";
  }
  const std::string at = f.fits ? "" : fmt::format(" (FSDP at seq {})", b.fsdp_runnable_seq_len);
  row("MFU" + at, Pct(ref->mfu), Pct(o.mfu));
  row("tokens/s" + at, fmt::format("{:.0f}", ref->tokens_per_s),
      fmt::format("{:.0f}", o.tokens_per_s));
  const std::string work = b.fsdp_priced_at_equal_work ? " (same work at FSDP's MFU)" : "";
  row("days" + work, fmt::format("{:.1f}", b.fsdp_days), fmt::format("{:.1f}", o.days));
  row("cost" + work, fmt::format("USD {:.3g}", b.fsdp_usd), fmt::format("USD {:.3g}", o.cost_usd));
  row("saved by the best layout", "",
      fmt::format("{:.1f} days, USD {:.3g}", b.days_saved, b.usd_saved));
  return html + "</table>\n";
}

// The shared page style plus the best-layout box.
constexpr const char* kBestStyle =
    "<style>.best{font-size:16px;background:#eef4fb;padding:10px;border-left:4px solid "
    "#4e79a7}</style>";

std::string BestBox(const cost::Estimate& e, const cost::Goodput* g) {
  std::string failures;
  if (g != nullptr && g->progresses) {
    failures = fmt::format(
        "<br>with failures: {:.1f} days ({:.1f} lost), USD {:.3g}; goodput {}, checkpoint every "
        "{:.0f} s, {:.0f} s lost per failure, {:.2f} failures a day",
        g->days, g->days_lost, g->cost_usd, Pct(g->goodput), g->interval_s, g->lost_per_failure_s,
        g->failures_per_day);
  } else if (g != nullptr) {
    failures = "<br>with failures: never finishes (failures outpace checkpoint and restart)";
  }
  return fmt::format(
      "<div class=best><b>Best layout:</b> {}<br>memory {:.1f} GB of {:.1f} GB capacity, step "
      "{:.3f} s, {:.0f} tokens/s, MFU {} (causal-half convention {}), HFU {}, bubble {}, "
      "{:.1f} days, USD {:.3g} without failures{}</div>\n",
      Escape(spec::FormatLayout(e.layout)), e.memory.total / kGB, e.memory.capacity / kGB,
      e.time.step, e.tokens_per_s, Pct(e.mfu), Pct(e.mfu_causal), Pct(e.hfu),
      Pct(e.bubble_fraction), e.days, e.cost_usd, failures);
}

// The best layout's pipeline schedule, simulated by schedule/ with the cost model's per-micro-batch
// stage time (report/timeline.h); pp = 1 says so in one line.
std::string PipelineSection(const cost::Estimate& best) {
  std::string html = "<h2>Pipeline schedule of the best layout</h2>\n";
  schedule::ScheduleSpec spec;
  auto sim = SimulateLayoutSchedule(best, &spec);
  if (!sim.ok()) return html + "<p class=note>" + Escape(sim.status().message()) + "</p>\n";
  html += fmt::format(
      "<p class=note>One action = one micro-batch through one model chunk, timed with the critical "
      "stage's time per micro-batch ({:.4g} s per F, B and W), so each rank idles the cost model's "
      "bubble term ({:.4g} s, {} of the whole step, which also holds the DP and optimizer time; "
      "below, the bubble as a share of the pipeline's makespan).</p>\n",
      sim->timeline.empty() || sim->timeline[0].empty()
          ? 0.0
          : sim->timeline[0][0].end_s - sim->timeline[0][0].start_s,
      best.time.bubble, Pct(best.bubble_fraction));
  return html + ScheduleTimelineHtml(spec, *sim, "s");
}

}  // namespace

std::string RenderHtml(const PlanReport& r) {
  std::string html = fmt::format("<h1>pentamesh plan: {} on {} x {} ({})</h1>\n", Escape(r.model),
                                 r.gpus, Escape(r.cluster), Escape(r.train));
  if (r.counts) {
    html += fmt::format(
        "<p class=note>{} layouts in the space: {} costed ({} fit, {} did not), {} pruned as "
        "certain not to fit; searched in {:.3f} s.</p>\n",
        r.counts->space, r.counts->evaluated, r.counts->fit, r.counts->did_not_fit,
        r.counts->pruned, r.search_seconds);
  }
  std::vector<Bar> bars;
  if (!r.top.empty()) {
    const cost::Goodput* best_goodput = r.goodput.empty() ? nullptr : &r.goodput.front();
    html += "<h2>Best layout and runners-up</h2>\n" + BestBox(r.top.front(), best_goodput) +
            TopTable(r.top, r.goodput);
    for (size_t i = 0; i < r.top.size() && i < 6; ++i) {
      bars.push_back({fmt::format("#{} {}", i + 1, spec::ShortLayout(r.top[i].layout)), &r.top[i]});
    }
  }
  if (r.baseline)
    bars.push_back({"FSDP " + spec::ShortLayout(r.baseline->fsdp.layout), &r.baseline->fsdp});
  if (!bars.empty()) {
    html += "<h2>Memory per GPU by component</h2>\n" + MemoryChart(bars);
    std::vector<Bar> running;  // step time only for layouts that run
    for (const Bar& b : bars) {
      if (b.estimate->fits) running.push_back(b);
    }
    if (!running.empty()) html += "<h2>Step time by term</h2>\n" + TimeChart(running);
  }
  if (!r.top.empty()) html += PipelineSection(r.top.front());
  if (r.baseline) html += "<h2>FSDP baseline vs best layout</h2>\n" + BaselineTable(*r.baseline);
  if (!r.scale.empty()) {
    html +=
        "<h2>Scaling</h2>\n<p class=note>Best layout at each GPU count; efficiency is tokens/s "
        "per GPU relative to the first count; 'limit' is the term whose GPU-time per token "
        "grew most.</p>\n" +
        ScaleSection(r.scale);
  }
  if (r.sweep) {
    html += "<h2>Sweep: best MFU by model and node count</h2>\n" + SweepChart(*r.sweep);
  }
  return HtmlPage("pentamesh plan: " + r.model, html, {.charts = true, .extra_style = kBestStyle});
}

core::Status WriteHtml(const PlanReport& report, const std::string& path) {
  return WritePage(path, RenderHtml(report));
}

}  // namespace pentamesh::report

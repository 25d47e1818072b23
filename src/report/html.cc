#include "report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/output.h"
#include "report/page.h"
#include "report/svg.h"
#include "report/timeline.h"

namespace pentamesh::report {
namespace {

constexpr double kGB = 1e9;

// One colour per cost::kMemoryCategories entry, in its order.
struct Component {
  const char* name;
  const char* color;
  double cost::Memory::*field;
};
constexpr std::array<const char*, cost::kMemoryCategories.size()> kMemoryColors = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f"};
constexpr std::array<Component, cost::kMemoryCategories.size()> MemoryParts() {
  std::array<Component, cost::kMemoryCategories.size()> parts{};
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i] = {cost::kMemoryCategories[i].label, kMemoryColors[i],
                cost::kMemoryCategories[i].field};
  }
  return parts;
}
constexpr auto kMemoryParts = MemoryParts();
// The colour of the i-th entry of cost::kTimeTerms (Tableau 10, in list order).
constexpr std::array<const char*, 10> kTermColors = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                     "#59a14f", "#edc948", "#bab0ac", "#9c755f",
                                                     "#ff9da7", "#b07aa1"};
static_assert(cost::kTimeTerms.size() <= kTermColors.size(),
              "a step-time term past the palette needs a colour in kTermColors");

std::string Pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

void Legend(Svg& svg, double x, double y,
            const std::vector<std::pair<std::string, std::string>>& items) {
  for (const auto& [name, color] : items) {
    svg.Rect(x, y - 10, 12, 12, color);
    svg.Text(x + 16, y, name, 12);
    x += 28 + 7.5 * static_cast<double>(name.size());
  }
}

struct Bar {
  std::string label;
  const cost::Estimate* estimate;
};

// Horizontal stacked bars of memory per GPU by component, with the capacity line. The axis reaches
// 1.5x the largest capacity; a bar beyond it is clipped and its total printed in red.
std::string MemoryChart(const std::vector<Bar>& bars) {
  const double width = 1180, left = 390, right = 90, row = 34, top = 40;
  const double height = top + row * static_cast<double>(bars.size()) + 50;
  double max_gb = 1.0, cap_gb = 1.0;
  for (const Bar& b : bars) {
    max_gb = std::max(
        {max_gb, b.estimate->memory.total / kGB * 1.05, b.estimate->memory.capacity / kGB * 1.05});
    cap_gb = std::max(cap_gb, b.estimate->memory.capacity / kGB);
  }
  max_gb = std::min(max_gb, cap_gb * 1.5);
  const double scale = (width - left - right) / max_gb;
  const double x_max = left + max_gb * scale;
  Svg svg(width, height);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto& part : kMemoryParts) legend.emplace_back(part.name, part.color);
  Legend(svg, 20, 20, legend);
  for (size_t i = 0; i < bars.size(); ++i) {
    const cost::Memory& m = bars[i].estimate->memory;
    const double y = top + row * static_cast<double>(i);
    svg.Text(left - 8, y + 17, bars[i].label, 12, "end");
    double x = left;
    for (const auto& part : kMemoryParts) {
      const double gb = m.*(part.field) / kGB;
      const double w = std::min(gb * scale, x_max - x);
      svg.Rect(x, y + 4, w, row - 10, part.color, fmt::format("{} {:.2f} GB", part.name, gb));
      x += w;
    }
    const bool clipped = m.total / kGB > max_gb;
    svg.Text(x + 6, y + 17, fmt::format("{:.1f} GB{}", m.total / kGB, clipped ? " >>" : ""), 12,
             "start", clipped ? "#c00" : "#222", clipped);
    const double cap_x = left + m.capacity / kGB * scale;
    svg.Line(cap_x, y, cap_x, y + row - 2, "#c00", 2, true);
  }
  const double axis_y = top + row * static_cast<double>(bars.size()) + 10;
  svg.Line(left, axis_y, x_max, axis_y, "#888");
  const double tick = max_gb > 200 ? 50 : (max_gb > 50 ? 10 : (max_gb > 10 ? 5 : 1));
  for (double gb = 0; gb <= max_gb; gb += tick) {
    svg.Text(left + gb * scale, axis_y + 16, fmt::format("{:.0f}", gb), 11, "middle", "#555");
  }
  svg.Text(width - right, axis_y + 34, "GB per GPU (red dashes: capacity = HBM - safety margin)",
           11, "end", "#555");
  return svg.Finish();
}

// Horizontal stacked bars of step time by term; a black tick marks the step after overlap.
std::string TimeChart(const std::vector<Bar>& bars) {
  const double width = 1180, left = 390, right = 60, row = 34, top = 40;
  const double height = top + row * static_cast<double>(bars.size()) + 50;
  double max_s = 0;
  for (const Bar& b : bars) {
    max_s = std::max({max_s, cost::SumOfTerms(b.estimate->time), b.estimate->time.step});
  }
  max_s = std::max(max_s, 1e-9);
  const double scale = (width - left - right) / max_s;
  Svg svg(width, height);
  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t t = 0; t < cost::kTimeTerms.size(); ++t) {
    legend.emplace_back(cost::kTimeTerms[t].name, kTermColors[t]);
  }
  legend.emplace_back("| step", "#000");
  Legend(svg, 20, 20, legend);
  for (size_t i = 0; i < bars.size(); ++i) {
    const cost::Time& time = bars[i].estimate->time;
    const double y = top + row * static_cast<double>(i);
    svg.Text(left - 8, y + 17, bars[i].label, 12, "end");
    double x = left;
    for (size_t t = 0; t < cost::kTimeTerms.size(); ++t) {
      const double s = time.*cost::kTimeTerms[t].field;
      svg.Rect(x, y + 4, s * scale, row - 10, kTermColors[t],
               fmt::format("{} {:.3f} s", cost::kTimeTerms[t].name, s));
      x += s * scale;
    }
    const double step_x = left + time.step * scale;
    svg.Line(step_x, y, step_x, y + row - 2, "#000", 3);
    svg.Text(std::max(x, step_x) + 6, y + 17, fmt::format("{:.2f} s", time.step), 12);
  }
  const double axis_y = top + row * static_cast<double>(bars.size()) + 10;
  svg.Line(left, axis_y, width - right, axis_y, "#888");
  svg.Text(width - right, axis_y + 30,
           "seconds per optimizer step (terms as exposed after overlap)", 11, "end", "#555");
  return svg.Finish();
}

// MFU and scaling efficiency against the GPU count (one column per count of the list).
std::string ScaleChart(const std::vector<plan::ScalePoint>& points) {
  const double width = 1180, height = 360, left = 70, right = 40, top = 40, bottom = 60;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  Svg svg(width, height);
  Legend(svg, left, 20, {{"MFU", "#4e79a7"}, {"scaling efficiency", "#e15759"}});
  for (int pct = 0; pct <= 100; pct += 20) {
    const double y = top + plot_h * (1 - pct / 100.0);
    svg.Line(left, y, width - right, y, "#ddd");
    svg.Text(left - 8, y + 4, fmt::format("{}%", pct), 11, "end", "#555");
  }
  const double n = static_cast<double>(points.size());
  auto x_of = [&](size_t i) { return left + plot_w * (static_cast<double>(i) + 0.5) / n; };
  std::vector<std::pair<double, double>> mfu, eff;
  for (size_t i = 0; i < points.size(); ++i) {
    const plan::ScalePoint& p = points[i];
    svg.Text(x_of(i), top + plot_h + 20, fmt::format("{} GPUs", p.gpus), 12, "middle");
    if (!p.best) {
      svg.Text(x_of(i), top + plot_h / 2, "nothing fits", 12, "middle", "#c00");
      continue;
    }
    const double y_mfu = top + plot_h * (1 - std::min(p.best->mfu, 1.0));
    const double y_eff = top + plot_h * (1 - std::min(p.efficiency, 1.0));
    mfu.emplace_back(x_of(i), y_mfu);
    eff.emplace_back(x_of(i), y_eff);
    svg.Circle(x_of(i), y_mfu, 5, "#4e79a7", spec::ShortLayout(p.best->layout));
    svg.Circle(x_of(i), y_eff, 5, "#e15759");
    svg.Text(x_of(i) + 8, y_mfu - 8,
             fmt::format("{} ({:.2f}M tok/s)", Pct(p.best->mfu), p.best->tokens_per_s / 1e6), 11);
    svg.Text(x_of(i), top + plot_h + 38,
             p.limiting ? fmt::format("limit: {}", p.limiting->name) : "", 11, "middle", "#555");
  }
  svg.Polyline(mfu, "#4e79a7");
  svg.Polyline(eff, "#e15759");
  return svg.Finish();
}

std::string HeatColor(double mfu) {
  const double t = std::clamp(mfu / 0.6, 0.0, 1.0);
  auto mix = [&](int a, int b) { return static_cast<int>(a + (b - a) * t); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(247, 8), mix(251, 81), mix(255, 156));
}

// Model x node-count grid; each cell shows the best layout's MFU and degrees.
std::string SweepChart(const plan::SweepResult& sweep) {
  const double left = 150, top = 50, cell_w = 150, cell_h = 56;
  const double width = left + cell_w * static_cast<double>(sweep.nodes.size()) + 20;
  const double height = top + cell_h * static_cast<double>(sweep.models.size()) + 30;
  Svg svg(width, height);
  for (size_t c = 0; c < sweep.nodes.size(); ++c) {
    svg.Text(left + cell_w * (static_cast<double>(c) + 0.5), top - 12,
             fmt::format("{} node{}", sweep.nodes[c], sweep.nodes[c] == 1 ? "" : "s"), 12, "middle",
             "#222", true);
  }
  for (size_t r = 0; r < sweep.models.size(); ++r) {
    const double y = top + cell_h * static_cast<double>(r);
    svg.Text(left - 10, y + cell_h / 2 + 4, sweep.models[r], 12, "end", "#222", true);
    for (size_t c = 0; c < sweep.nodes.size(); ++c) {
      const plan::SweepCell& cell = sweep.at(r, c);
      const double x = left + cell_w * static_cast<double>(c);
      if (!cell.best) {
        svg.Rect(x + 1, y + 1, cell_w - 2, cell_h - 2, "#eee", cell.why_not);
        svg.Text(x + cell_w / 2, y + cell_h / 2 + 4, "does not fit", 12, "middle", "#c00");
        continue;
      }
      const cost::Estimate& e = *cell.best;
      const std::string fg = e.mfu > 0.35 ? "#fff" : "#222";
      svg.Rect(x + 1, y + 1, cell_w - 2, cell_h - 2, HeatColor(e.mfu), spec::ShortLayout(e.layout));
      svg.Text(x + cell_w / 2, y + 22, Pct(e.mfu), 15, "middle", fg, true);
      svg.Text(x + cell_w / 2, y + 42,
               fmt::format("tp{} pp{} dp{}{}", e.layout.tp, e.layout.pp, e.layout.dp,
                           e.layout.cp > 1 ? fmt::format(" cp{}", e.layout.cp) : ""),
               11, "middle", fg);
    }
  }
  return svg.Finish();
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
  for (const auto& part : kMemoryParts) {
    row(std::string("memory: ") + part.name, fmt::format("{:.2f} GB", f.memory.*(part.field) / kGB),
        fmt::format("{:.2f} GB", o.memory.*(part.field) / kGB));
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
        ScaleChart(r.scale);
  }
  if (r.sweep) {
    html += "<h2>Sweep: best MFU by model and node count</h2>\n" + SweepChart(*r.sweep);
  }
  return HtmlPage("pentamesh plan: " + r.model, html, {.charts = false, .extra_style = kBestStyle});
}

core::Status WriteHtml(const PlanReport& report, const std::string& path) {
  return WritePage(path, RenderHtml(report));
}

}  // namespace pentamesh::report

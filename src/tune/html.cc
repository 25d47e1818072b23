// tune's page, the seeds' evaluation as one self-contained file: the summary (error, rank
// agreement, measured best), the comparison table, then charts drawn by report/chart.h: tokens/s
// per layout (predicted next to measured), step time by term (predicted terms next to the
// measured collectives, bubble and the rest as compute), memory per allocator category (predicted
// next to measured), the pipeline bubble of pp > 1 layouts and the expert load of MoE runs; and,
// when given, the failure injections' outcomes (scripts/inject.sh --out).
// Invariant: the page only presents the Result's numbers.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "report/chart.h"
#include "report/page.h"
#include "report/svg.h"
#include "spec/layout.h"
#include "tune/tune.h"

namespace pentamesh::tune {
namespace {

using report::Escape;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A layout without its degree-1 axes and default schedule: "dp4 ep4f z2 mbs4 none".
std::string Compact(const spec::Layout& layout) {
  std::string out;
  std::istringstream words(spec::ShortLayout(layout));
  for (std::string w; words >> w;) {
    if (w == "tp1" || w == "pp1" || w == "cp1" || w == "ep1" || (w == "1f1b" && layout.pp == 1)) {
      continue;
    }
    out += (out.empty() ? "" : " ") + w;
  }
  return out;
}

// "#2 dp2 z1 mbs8 none": the row's number and its compact layout.
std::string Label(const Result& r, size_t i) {
  return fmt::format("#{} {}", i + 1, Compact(r.rows[i].layout));
}

std::string Cell(double v, const char* format_spec) {
  return std::isfinite(v) ? fmt::format(fmt::runtime(format_spec), v) : "-";
}

std::string TableHtml(const Result& r) {
  std::string t =
      "<table><tr><th>#</th><th>kind</th><th>layout</th><th>predicted rank</th><th>step s "
      "predicted</th><th>step s measured</th><th>error</th><th>tokens/s measured</th><th>MFU "
      "predicted</th><th>MFU measured</th><th>peak MiB predicted</th><th>peak MiB "
      "measured</th><th>bubble predicted</th><th>bubble measured</th><th>expert "
      "imbalance</th></tr>\n";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    const Measured* m = row.measured ? &*row.measured : nullptr;
    const double mib = 1 << 20;
    t += fmt::format(
        "<tr{}><td>{}</td><td>{}</td><td class=\"layout\">{}</td><td>{}</td><td>{:.4f}</td>",
        static_cast<int>(i) == r.summary.best_measured ? " class=\"best-row\"" : "", i + 1,
        KindName(row.kind), Escape(Compact(row.layout)),
        row.kind == Kind::kSingle ? "-" : std::to_string(row.predicted_rank),
        row.predicted.time.step);
    if (m == nullptr) {
      t += fmt::format("<td colspan=\"10\">FAILED: {}</td></tr>\n", Escape(row.error));
      continue;
    }
    t += fmt::format(
        "<td>{:.4f}</td><td>{:+.1f}%</td><td>{:.0f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.1f}"
        "</td><td>{:.1f}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        m->step_time_s, 100 * row.Error(), m->tokens_per_s, row.predicted.mfu, m->mfu,
        row.predicted.memory.total / mib, m->peak_total / mib,
        row.layout.pp > 1 ? Cell(row.predicted.bubble_fraction, "{:.3f}") : "-",
        m->bubble ? Cell(*m->bubble, "{:.3f}") : "-",
        m->expert_imbalance ? Cell(*m->expert_imbalance, "{:.2f}") : "-");
  }
  return t + "</table>\n";
}

std::string SummaryHtml(const Result& r) {
  const Summary& s = r.summary;
  std::string out = fmt::format(
      "<p class=\"best\">Median |predicted - measured| / measured step time: <b>{:.1f}%</b> over "
      "{} runs. Rank agreement of predicted and measured step time (Spearman, {}-rank runs): "
      "<b>{:.2f}</b>.",
      100 * s.median_abs_error, s.measured_runs, r.options.np, s.spearman);
  if (s.best_measured >= 0) {
    const Row& b = r.rows[static_cast<size_t>(s.best_measured)];
    out += fmt::format(
        " Measured best: <b>#{} {}</b> at {:.4f} s/step, the planner's choice number {} ({} "
        "counting predictions within {:.0f}% as ties){}.",
        s.best_measured + 1, Escape(Compact(b.layout)), b.measured->step_time_s,
        s.best_predicted_rank, s.best_tied_rank, 100 * kTie,
        s.best_tied_rank <= 3 ? ": within its top 3" : ": not in its top 3");
  }
  return out + "</p>\n";
}

std::string ThroughputChart(const Result& r, const std::vector<std::string>& labels) {
  report::BarChart c("tune-throughput", "layout", labels,
                     report::ChartAxis("tokens/s (all ranks)", ".3~s"));
  std::vector<double> predicted, measured;
  for (const Row& row : r.rows) {
    predicted.push_back(row.predicted.tokens_per_s);
    measured.push_back(row.measured ? row.measured->tokens_per_s : kNaN);
  }
  c.series.emplace_back("predicted", predicted);
  c.series.emplace_back("measured", measured);
  return report::BarChartHtml(c);
}

// Predicted terms of the step next to the measured ones: each communication term's collective
// time (metrics.jsonl comm_time_s), the bubble when measured, and the rest of the step as compute.
std::string TimeChart(const Result& r, const std::vector<std::string>& labels) {
  std::vector<std::string> parts;
  for (const cost::TimeTerm& t : cost::kTimeTerms) parts.emplace_back(t.name);
  report::StackedBarChart c("tune-time", "layout", parts,
                            report::ChartAxis("seconds per step", ".3~f"));
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    std::vector<double> predicted, measured;
    double accounted = 0;
    for (const cost::TimeTerm& t : cost::kTimeTerms) {
      predicted.push_back(row.predicted.time.*t.field);
      double m = 0;
      if (row.measured && row.measured->comm_time_s.contains(t.name)) {
        m = row.measured->comm_time_s[t.name].get<double>();
      } else if (row.measured && row.measured->bubble && std::string(t.name) == "bubble") {
        m = *row.measured->bubble * row.measured->step_time_s;
      }
      measured.push_back(m);
      accounted += m;
    }
    c.bars.emplace_back(labels[i], "predicted", predicted);
    if (row.measured) {
      measured[0] = std::max(0.0, row.measured->step_time_s - accounted);  // compute: the rest
      c.bars.emplace_back(labels[i], "measured", measured);
    }
  }
  return report::StackedBarChartHtml(c);
}

// Memory per allocator category: the cost model's bytes per tag next to the allocator's peaks.
std::string MemoryChart(const Result& r, const std::vector<std::string>& labels) {
  std::vector<std::string> parts;
  for (int t = 0; t < core::kMemTagCount; ++t) {
    parts.emplace_back(core::MemTagName(static_cast<core::MemTag>(t)));
  }
  report::StackedBarChart c("tune-memory", "layout", parts,
                            report::ChartAxis("peak bytes per rank", ".3~s"));
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    const auto by_tag = row.predicted.memory.ByTag();
    c.bars.emplace_back(labels[i], "predicted", std::vector<double>(by_tag.begin(), by_tag.end()));
    if (row.measured) {
      const auto& m = row.measured->peak_bytes;
      c.bars.emplace_back(labels[i], "measured", std::vector<double>(m.begin(), m.end()));
    }
  }
  return report::StackedBarChartHtml(c);
}

std::string BubbleChart(const Result& r, const std::vector<std::string>& labels) {
  std::vector<std::string> cats;
  std::vector<double> predicted, measured;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    if (row.layout.pp <= 1) continue;
    cats.push_back(labels[i]);
    predicted.push_back(row.predicted.bubble_fraction);
    measured.push_back(row.measured && row.measured->bubble ? *row.measured->bubble : kNaN);
  }
  if (cats.empty()) return "<p>No measured layout has pp &gt; 1: no pipeline bubble.</p>\n";
  report::BarChart c("tune-bubble", "layout", cats,
                     report::ChartAxis("bubble (idle / step)", report::kFormatPercent));
  c.series.emplace_back("predicted", predicted);
  c.series.emplace_back("measured", measured);
  return report::BarChartHtml(c);
}

std::string ExpertChart(const Result& r, const std::vector<std::string>& labels) {
  std::vector<std::string> cats;
  std::vector<double> imbalance, share;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    if (!row.measured || !row.measured->expert_imbalance) continue;
    cats.push_back(labels[i]);
    imbalance.push_back(*row.measured->expert_imbalance);
    share.push_back(row.measured->max_expert_share.value_or(kNaN));
  }
  if (cats.empty()) return "<p>Dense model: no expert load.</p>\n";
  report::BarChart c("tune-experts", "layout", cats,
                     report::ChartAxis("max / mean tokens per expert (1 = balanced)", ".3~f"));
  c.series.emplace_back("expert load imbalance", imbalance);
  report::BarChart s(
      "tune-expert-share", "layout", cats,
      report::ChartAxis("busiest expert's share of assignments", report::kFormatPercent));
  s.series.emplace_back("max expert share", share);
  return report::BarChartHtml(c) + report::BarChartHtml(s);
}

std::string InjectionsHtml(const nlohmann::json& outcomes) {
  std::string t =
      "<h2>Failure injections</h2>\n<table><tr><th>injection</th><th>outcome</th>"
      "<th>command</th></tr>\n";
  for (const nlohmann::json& o : outcomes) {
    t += fmt::format("<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>\n",
                     Escape(o.value("name", "")), Escape(o.value("outcome", "")),
                     Escape(o.value("command", "")));
  }
  return t + "</table>\n";
}

}  // namespace

std::string Html(const Result& r) {
  std::vector<std::string> labels;
  for (size_t i = 0; i < r.rows.size(); ++i) labels.push_back(Label(r, i));
  std::string page = fmt::format(
      "<h1>pentamesh tune: {}</h1>\n<p>{}; {} steps per run, the first quarter "
      "warm-up; {} layouts costed, {} the CPU engine runs.</p>\n",
      Escape(r.model_name), Escape(r.host), r.options.steps, r.space, r.runnable);
  page += SummaryHtml(r) + TableHtml(r);
  page += "<h2>Throughput</h2>\n" + ThroughputChart(r, labels);
  page +=
      "<h2>Step time by term</h2>\n<p>Measured: each term's collective time as the engine "
      "timed it, the bubble where measured, the rest of the step as compute.</p>\n" +
      TimeChart(r, labels);
  page += "<h2>Memory per rank by category</h2>\n" + MemoryChart(r, labels);
  page += "<h2>Pipeline bubble</h2>\n" + BubbleChart(r, labels);
  page += "<h2>Expert load</h2>\n" + ExpertChart(r, labels);
  if (!r.injections.is_null() && !r.injections.empty()) page += InjectionsHtml(r.injections);
  return report::HtmlPage(
      "pentamesh tune: " + r.model_name, page,
      {.charts = true,
       .extra_style = "<style>.best{background:#eef4fb;padding:10px;border-left:4px solid "
                      "#4c78a8}.best-row{background:#eef4fb;font-weight:bold}td.layout{white-space:"
                      "nowrap}</style>\n"});
}

}  // namespace pentamesh::tune

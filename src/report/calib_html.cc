// Predicted vs measured for `pentamesh validate`.
#include "report/calib_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/chart.h"
#include "report/page.h"
#include "report/svg.h"

namespace pentamesh::report {
namespace {

// Predicted against measured tokens/s per GPU on log-log axes: one point series per stack
// (hover: the run), the equality line and +-20% dashed.
std::string Scatter(const calib::Validation& v) {
  XyChart chart("calib-scatter", ChartAxis("measured tokens/s per GPU", kFormatSi),
                ChartAxis("predicted tokens/s per GPU", kFormatSi), 520);
  chart.x.log = chart.y.log = true;
  std::map<std::string, size_t> series_of_stack;
  double lo = 0, hi = 0;
  for (const auto& r : v.rows) {
    const std::string& stack = r.run->stack;
    if (!series_of_stack.contains(stack)) {
      series_of_stack[stack] = chart.series.size();
      chart.series.emplace_back(stack, std::vector<std::pair<double, double>>{},
                                SeriesStyle::kPoints);
    }
    XySeries& s = chart.series[series_of_stack[stack]];
    s.points.emplace_back(r.run->tokens_per_s_gpu, r.shipped.tokens_per_s_gpu);
    s.labels.push_back(fmt::format("{} ({:+.1f}%)", r.run->id, 100 * r.shipped.error));
    for (double x : {r.run->tokens_per_s_gpu, r.shipped.tokens_per_s_gpu}) {
      if (x > 0) lo = lo > 0 ? std::min(lo, x) : x, hi = std::max(hi, x);
    }
  }
  if (hi <= 0) return "";
  using Points = std::vector<std::pair<double, double>>;
  chart.series.emplace_back("predicted = measured", Points{{lo, lo}, {hi, hi}},
                            SeriesStyle::kDashed, "#888");
  // The same name twice: one legend entry for both lines.
  chart.series.emplace_back("+-20%", Points{{lo, lo * 1.2}, {hi / 1.2, hi}}, SeriesStyle::kDashed,
                            "#ccc");
  chart.series.emplace_back("+-20%", Points{{lo * 1.2, lo}, {hi, hi / 1.2}}, SeriesStyle::kDashed,
                            "#ccc");
  return XyChartHtml(chart);
}

std::string Bars(const std::string& id, const std::string& category_title,
                 const std::vector<std::string>& cats, const std::vector<double>& signed_median,
                 const std::vector<double>& abs_median) {
  BarChart chart(id, category_title, cats, ChartAxis("error %"));
  chart.series.emplace_back("median |error| %", abs_median, "#1f77b4");
  chart.series.emplace_back("signed median %", signed_median, "#ff7f0e");
  return BarChartHtml(chart);
}

}  // namespace

std::string CalibrationHtml(const calib::Validation& v, const std::string& runs_path) {
  std::string out = fmt::format("<h1>pentamesh validate: {}</h1>", Escape(runs_path));
  out += fmt::format(
      "<p class=\"note\">{} runs estimated, {} not. Median |error| {:.1f}%, p90 {:.1f}% (shipped "
      "calibration){}</p>",
      v.rows.size(), v.unusable.size(), 100 * v.all.shipped.median_abs, 100 * v.all.shipped.p90_abs,
      v.cross_validated ? fmt::format("; 5-fold {:.1f}% / {:.1f}%, leave-one-group-out {:.1f}% / "
                                      "{:.1f}%",
                                      100 * v.all.kfold.median_abs, 100 * v.all.kfold.p90_abs,
                                      100 * v.all.logo.median_abs, 100 * v.all.logo.p90_abs)
                        : "");
  out += "<h2>Predicted vs measured tokens/s per GPU</h2>";
  out += "<p class=\"note\">Dashed: equality and &plusmn;20%. Hover a point for its run.</p>";
  out += Scatter(v);
  std::vector<std::string> cats;
  std::vector<double> sgn, abs_err;
  for (const auto& g : v.groups) {
    cats.push_back(g.group);
    sgn.push_back(100 * g.shipped.median_signed);
    abs_err.push_back(100 * g.shipped.median_abs);
  }
  out +=
      "<h2>Error by source group</h2>" + Bars("calib-groups", "source group", cats, sgn, abs_err);
  std::map<int64_t, std::vector<double>> by_gpus;
  for (const auto& r : v.rows) {
    const int64_t g = r.run->cluster.gpus();
    const int64_t bucket = static_cast<int64_t>(
        std::pow(4.0, std::floor(std::log(static_cast<double>(g)) / std::log(4.0))));
    by_gpus[bucket].push_back(r.shipped.error);
  }
  cats.clear();
  sgn.clear();
  abs_err.clear();
  for (const auto& [bucket, errors] : by_gpus) {
    cats.push_back(fmt::format("{}-{} GPUs", bucket, bucket * 4 - 1));
    const calib::ErrorStats s = calib::Stats(errors);
    sgn.push_back(100 * s.median_signed);
    abs_err.push_back(100 * s.median_abs);
  }
  out += "<h2>Error by GPU count</h2>" + Bars("calib-gpus", "GPUs", cats, sgn, abs_err);
  out +=
      "<h2>Runs</h2><table><tr><th>run</th><th>group</th><th>stack</th><th>GPU</th>"
      "<th>GPUs</th><th>layout</th><th>measured</th><th>predicted</th><th>error</th></tr>";
  for (const auto& r : v.rows) {
    out += fmt::format(
        "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td "
        "class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td>{:.0f}</td><td>{:.0f}</td>"
        "<td>{:+.1f}%</td></tr>",
        Escape(r.run->id), Escape(r.run->group), Escape(r.run->stack), Escape(r.run->cluster.name),
        r.run->cluster.gpus(), Escape(spec::ShortLayout(r.run->layout)), r.run->tokens_per_s_gpu,
        r.shipped.tokens_per_s_gpu, 100 * r.shipped.error);
  }
  out += "</table>";
  if (!v.unusable.empty()) {
    out += "<h2>Not estimated</h2><table><tr><th>run</th><th>why</th></tr>";
    for (const calib::Run* r : v.unusable) {
      out += fmt::format("<tr><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>", Escape(r->id),
                         Escape(r->unusable));
    }
    out += "</table>";
  }
  return HtmlPage("pentamesh validate", out, {.charts = true, .extra_style = ""});
}

}  // namespace pentamesh::report

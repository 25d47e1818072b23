// Predicted vs measured for `pentamesh validate`.
#include "report/calib_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/svg.h"

namespace pentamesh::report {
namespace {

const char* kStackColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string Scatter(const calib::Validation& v) {
  const double w = 640, h = 560, left = 70, right = 160, top = 20, bottom = 50;
  double lo = 1e300, hi = 0;
  for (const auto& r : v.rows) {
    for (double x : {r.run->tokens_per_s_gpu, r.shipped.tokens_per_s_gpu}) {
      if (x > 0) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
    }
  }
  if (hi <= 0) return "";
  const double llo = std::floor(std::log10(lo)), lhi = std::ceil(std::log10(hi));
  auto px = [&](double x) {
    return left + (std::log10(x) - llo) / (lhi - llo) * (w - left - right);
  };
  auto py = [&](double y) {
    return h - bottom - (std::log10(y) - llo) / (lhi - llo) * (h - top - bottom);
  };
  Svg svg(w, h);
  for (double d = llo; d <= lhi; d += 1) {
    const double val = std::pow(10.0, d);
    svg.Line(px(val), top, px(val), h - bottom, "#eee");
    svg.Line(left, py(val), w - right, py(val), "#eee");
    svg.Text(px(val), h - bottom + 16, TickLabel(val), 11, "middle");
    svg.Text(left - 6, py(val) + 4, TickLabel(val), 11, "end");
  }
  const double a = std::pow(10.0, llo), b = std::pow(10.0, lhi);
  svg.Line(px(a), py(a), px(b), py(b), "#888", 1, true);
  svg.Line(px(a), py(a * 1.2), px(b / 1.2), py(b), "#ccc", 1, true);
  svg.Line(px(a * 1.2), py(a), px(b), py(b / 1.2), "#ccc", 1, true);
  std::map<std::string, std::string> colors;
  for (const auto& r : v.rows) {
    if (!colors.count(r.run->stack)) {
      colors[r.run->stack] = kStackColors[colors.size() % std::size(kStackColors)];
    }
    svg.Circle(
        px(r.run->tokens_per_s_gpu), py(r.shipped.tokens_per_s_gpu), 4, colors[r.run->stack],
        fmt::format("{}: measured {:.0f}, predicted {:.0f} ({:+.1f}%)", r.run->id,
                    r.run->tokens_per_s_gpu, r.shipped.tokens_per_s_gpu, 100 * r.shipped.error));
  }
  double y = top + 10;
  for (const auto& [stack, color] : colors) {
    svg.Circle(w - right + 16, y, 5, color);
    svg.Text(w - right + 26, y + 4, stack, 12);
    y += 18;
  }
  svg.Text((left + w - right) / 2, h - 10, "measured tokens/s per GPU", 12, "middle");
  svg.Text(12, top + 8, "predicted", 12, "start");
  return svg.Finish();
}

std::string Bars(const std::vector<std::string>& cats, const std::vector<double>& signed_median,
                 const std::vector<double>& abs_median, const std::string& y_label) {
  return GroupedBars(cats, {{"median |error| %", "#1f77b4"}, {"signed median %", "#ff7f0e"}},
                     {abs_median, signed_median}, y_label);
}

}  // namespace

std::string CalibrationHtml(const calib::Validation& v, const std::string& runs_path) {
  std::string out = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>pentamesh validate";
  out += "</title>";
  out += kPageStyle;
  out += "</head><body>";
  out += fmt::format("<h1>pentamesh validate: {}</h1>", Escape(runs_path));
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
  out += "<h2>Error by source group</h2>" + Bars(cats, sgn, abs_err, "error %");
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
  out += "<h2>Error by GPU count</h2>" + Bars(cats, sgn, abs_err, "error %");
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
  out += "</body></html>\n";
  return out;
}

}  // namespace pentamesh::report

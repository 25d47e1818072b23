#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pentamesh::report {

std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string TickLabel(double v) {
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::Rect(double x, double y, double w, double h, const std::string& fill,
               const std::string& title, const std::string& css_class) {
  if (!css_class.empty())
    body_ += "<rect class=\"" + Escape(css_class) + "\" ";
  else
    body_ += "<rect ";
  body_ += fmt::format(R"(x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}">)", x, y,
                       std::max(w, 0.0), std::max(h, 0.0), Escape(fill));
  if (!title.empty()) body_ += "<title>" + Escape(title) + "</title>";
  body_ += "</rect>\n";
}

void Svg::Line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
               bool dashed) {
  body_ += fmt::format(
      R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="{}"{}/>)",
      x1, y1, x2, y2, Escape(stroke), width, dashed ? R"( stroke-dasharray="6,4")" : "");
  body_ += "\n";
}

void Svg::Polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                   double width) {
  std::string coords;
  for (const auto& [x, y] : points) coords += fmt::format("{:.1f},{:.1f} ", x, y);
  body_ += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="{}"/>)",
                       coords, Escape(stroke), width);
  body_ += "\n";
}

void Svg::Circle(double x, double y, double r, const std::string& fill, const std::string& title) {
  body_ += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="{:.1f}" fill="{}">)", x, y, r,
                       Escape(fill));
  if (!title.empty()) body_ += "<title>" + Escape(title) + "</title>";
  body_ += "</circle>\n";
}

void Svg::Text(double x, double y, const std::string& text, double size, const std::string& anchor,
               const std::string& fill, bool bold) {
  body_ += fmt::format(
      R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="{}" fill="{}"{}>{}</text>)", x, y,
      size, Escape(anchor), Escape(fill), bold ? R"( font-weight="bold")" : "", Escape(text));
  body_ += "\n";
}

std::string Svg::Finish() const {
  return fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" )"
      R"(font-family="sans-serif">)"
      "\n{2}</svg>\n",
      width_, height_, body_);
}

}  // namespace pentamesh::report

namespace pentamesh::report {
namespace {

void SeriesLegend(Svg& svg, double x, double y,
                  const std::vector<std::pair<std::string, std::string>>& items) {
  for (const auto& [name, color] : items) {
    svg.Rect(x, y - 10, 12, 12, color);
    svg.Text(x + 16, y, name, 12);
    x += 28 + 7.5 * static_cast<double>(name.size());
  }
}

}  // namespace

std::string LineChart(const std::vector<Series>& series, const std::string& x_label,
                      const std::string& y_label, double width, double height) {
  const double left = 80, right = 30, top = 40, bottom = 50;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  std::vector<std::pair<std::string, std::string>> legend;
  for (const Series& s : series) {
    legend.emplace_back(s.name, s.color);
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  }
  Svg svg(width, height);
  SeriesLegend(svg, left, 20, legend);
  if (!(x_lo <= x_hi)) {
    svg.Text(left + plot_w / 2, top + plot_h / 2, "no data", 12, "middle", "#c00");
    return svg.Finish();
  }
  if (y_lo >= 0) y_lo = 0;
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  y_hi += 0.05 * (y_hi - y_lo);
  auto px = [&](double x) { return left + plot_w * (x - x_lo) / (x_hi - x_lo); };
  auto py = [&](double y) { return top + plot_h * (1 - (y - y_lo) / (y_hi - y_lo)); };
  for (int i = 0; i <= 4; ++i) {
    const double y = y_lo + (y_hi - y_lo) * i / 4, x = x_lo + (x_hi - x_lo) * i / 4;
    svg.Line(left, py(y), width - right, py(y), "#ddd");
    svg.Text(left - 8, py(y) + 4, TickLabel(y), 11, "end", "#555");
    svg.Text(px(x), top + plot_h + 18, TickLabel(x), 11, "middle", "#555");
  }
  svg.Line(left, top + plot_h, width - right, top + plot_h, "#888");
  svg.Line(left, top, left, top + plot_h, "#888");
  svg.Text(left + plot_w / 2, height - 8, x_label, 12, "middle");
  svg.Text(left, top - 6, y_label, 12, "start", "#555");
  for (const Series& s : series) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& [x, y] : s.points) pts.emplace_back(px(x), py(y));
    if (pts.size() == 1) {
      svg.Circle(pts[0].first, pts[0].second, 4, s.color);
    } else if (!pts.empty()) {
      svg.Polyline(pts, s.color);
    }
  }
  return svg.Finish();
}

std::string GroupedBars(const std::vector<std::string>& categories,
                        const std::vector<std::pair<std::string, std::string>>& series_names_colors,
                        const std::vector<std::vector<double>>& values, const std::string& y_label,
                        double width, double height) {
  const double left = 80, right = 30, top = 40, bottom = 50;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double y_hi = 0;
  for (const auto& row : values) {
    for (double v : row) {
      if (std::isfinite(v)) y_hi = std::max(y_hi, v);
    }
  }
  if (y_hi <= 0) y_hi = 1;
  y_hi *= 1.1;
  Svg svg(width, height);
  SeriesLegend(svg, left, 20, series_names_colors);
  auto py = [&](double y) { return top + plot_h * (1 - y / y_hi); };
  for (int i = 0; i <= 4; ++i) {
    const double y = y_hi * i / 4;
    svg.Line(left, py(y), width - right, py(y), "#ddd");
    svg.Text(left - 8, py(y) + 4, TickLabel(y), 11, "end", "#555");
  }
  svg.Text(left, top - 6, y_label, 12, "start", "#555");
  const double n_cat = static_cast<double>(std::max<size_t>(categories.size(), 1));
  const double group_w = plot_w / n_cat;
  const double n_series = static_cast<double>(std::max<size_t>(values.size(), 1));
  const double bar_w = group_w * 0.8 / n_series;
  for (size_t c = 0; c < categories.size(); ++c) {
    const double x0 = left + group_w * static_cast<double>(c) + group_w * 0.1;
    svg.Text(x0 + group_w * 0.4, top + plot_h + 18, categories[c], 12, "middle");
    for (size_t s = 0; s < values.size(); ++s) {
      if (c >= values[s].size() || !std::isfinite(values[s][c])) continue;
      const double v = values[s][c], x = x0 + bar_w * static_cast<double>(s);
      const std::string& color = series_names_colors.at(s).second;
      svg.Rect(x, py(v), bar_w - 2, top + plot_h - py(v), color,
               fmt::format("{} {}: {}", series_names_colors[s].first, categories[c], v));
      svg.Text(x + bar_w / 2, py(v) - 3, TickLabel(v), 10, "middle", "#333");
    }
  }
  svg.Line(left, top + plot_h, width - right, top + plot_h, "#888");
  return svg.Finish();
}

}  // namespace pentamesh::report

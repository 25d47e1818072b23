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

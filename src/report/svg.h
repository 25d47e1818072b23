// A minimal SVG writer for report/'s HTML pages: rectangles, lines, polylines, circles and escaped
// text, in user units; plus the pages' shared stylesheet. Charts with axes are report/chart.h's
// (Vega); this writer draws what stays SVG: timelines and the expert heatmap.
// Invariant: every string written is XML-escaped, so specs' names cannot break the page.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pentamesh::report {

std::string Escape(const std::string& text);

// The pages' shared stylesheet (inline, so every page stays self-contained).
inline constexpr const char* kPageStyle = R"(<style>
body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td.l{text-align:left}th{background:#f2f2f2}.note{color:#555;font-size:13px}
</style>)";

// A tick label short enough for an axis: 3-4 significant digits, SI suffix for large numbers.
std::string TickLabel(double value);

class Svg {
 public:
  Svg(double width, double height);
  // css_class (optional) tags the element for tests and styling: <rect class="...">.
  void Rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& title = "", const std::string& css_class = "");
  void Line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            bool dashed = false);
  void Polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                double width = 2);
  void Circle(double x, double y, double r, const std::string& fill, const std::string& title = "");
  // anchor: "start", "middle" or "end".
  void Text(double x, double y, const std::string& text, double size = 12,
            const std::string& anchor = "start", const std::string& fill = "#222",
            bool bold = false);
  std::string Finish() const;

 private:
  double width_, height_;
  std::string body_;
};

}  // namespace pentamesh::report

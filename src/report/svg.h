// A minimal SVG writer for the HTML report: rectangles, lines, polylines and escaped text, in user
// units. Invariant: every string written is XML-escaped, so specs' names cannot break the page.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pentamesh::report {

std::string Escape(const std::string& text);

class Svg {
 public:
  Svg(double width, double height);
  void Rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& title = "");
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

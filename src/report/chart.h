// Interactive charts for report/'s HTML pages, drawn by Vega 5 (Debian's libjs-vega, inlined).
//
// Each chart function takes the data (series, labels, units) and returns an HTML fragment:
//
//   <div class="pm-chart" id="ID"></div>
//   <script type="application/json" id="ID-spec">{ ...Vega spec, built with nlohmann-json...
//   }</script> <script>pmChart("ID")</script>
//
// and the page puts ChartLibraryScript() (Vega's JavaScript plus pmChart) once in its <head>, so
// the page stays ONE self-contained file that fetches nothing. What every chart gets from Vega:
//   - "nice" axes: ticks at 1, 2 or 5 x 10^k steps (d3's tick rule), labels in the axis' format;
//   - fitted ranges: an axis spans the data, rounded out to ticks; it includes 0 only when asked
//     (ChartAxis::zero) or for bars, whose length must start at 0. A loss from 2.3 to 5 gets 2 to
//     5;
//   - hover values: the browser's tooltip names the series and the point's values;
//   - zoom and pan (XyChart): the mouse wheel zooms around the pointer, dragging pans, a double
//     click resets; bar charts do not zoom (their categories are all on screen).
// Series colours come from the palette in order unless given. After rendering, pmChart sets
// data-rendered="1" on the div (or data-error="..." and the message as the div's text), and
// data-box="left,top,width,height" (page pixels), which the headless-Chromium tests read.
//
// Chart kinds (each a struct, built by its constructor plus member assignments, and a function):
//   XyChart         lines (loss, lr, tokens/s vs step; several series), points (a scatter with a
//                   label per point), dashed reference lines; linear or log axes.
//   BarChart        grouped bars: one group per category, one bar per series
//                   (tokens/s per layout, predicted next to measured).
//   StackedBarChart stacked bars, one stack per (group, bar), segments per part:
//                   memory by category per layout, predicted and measured side by side;
//                   `horizontal` lays the stacks along x, one row per group (long labels), with
//                   reference ticks per stack (capacity, step) and the value axis cut at a bound.
//   HeatmapChart    a grid of cells coloured by value, with text in each cell (the sweep).
//
// Invariant: every string from data (names, labels, titles) reaches the page as JSON inside a
// script element with '<' escaped, so it cannot close the element or inject markup. Non-finite
// values are left out (XyChart) or drawn as no bar (bars). The id is a programmer's choice and
// must be unique on the page and match [a-z0-9-]+ (PM_CHECK).
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace pentamesh::report {

// The <script> with Vega and pmChart(); once per page, in <head>, before the first chart.
std::string ChartLibraryScript();

// The colour of series i when none is given (Tableau 10).
std::string ChartColor(size_t i);

// d3-format specifiers for ChartAxis::format.
inline constexpr const char* kFormatSi = "~s";        // 1.5k, 20M: bytes, tokens
inline constexpr const char* kFormatPercent = ".0%";  // 0.25 -> 25%

struct ChartAxis {
  ChartAxis(std::string title_ = "", std::string format_ = "")
      : title(std::move(title_)), format(std::move(format_)) {}
  std::string title;   // with its unit: "loss (nats)", "bytes per rank"
  std::string format;  // d3-format of tick labels and hover values; "" = Vega's default for the
                       // tick step ("2.5", "1,000"), and 4 significant digits on hover
  bool log = false;    // log10 scale; non-positive values are left out
  bool zero = false;   // include 0 in the fitted range
};

enum class SeriesStyle { kLine, kPoints, kDashed };

struct XySeries {
  XySeries(std::string name_, std::vector<std::pair<double, double>> points_,
           SeriesStyle style_ = SeriesStyle::kLine, std::string color_ = "")
      : name(std::move(name_)),
        style(style_),
        points(std::move(points_)),
        color(std::move(color_)) {}
  std::string name;  // legend and hover
  SeriesStyle style = SeriesStyle::kLine;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are left out
  std::vector<std::string> labels;  // optional, one per point: shown on hover ("run-17")
  std::string color;                // "" = ChartColor(index)
};

struct XyChart {
  XyChart(std::string id_, ChartAxis x_, ChartAxis y_, int height_px_ = 300)
      : id(std::move(id_)), x(std::move(x_)), y(std::move(y_)), height_px(height_px_) {}
  std::string id;
  ChartAxis x, y;
  std::vector<XySeries> series;  // a series with no points is listed in the legend only
  int height_px = 300;
};
std::string XyChartHtml(const XyChart& chart);

// Grouped bars: series[s].values[c] is the bar of series s in categories[c] (NaN: no bar).
struct BarSeries {
  BarSeries(std::string name_, std::vector<double> values_, std::string color_ = "")
      : name(std::move(name_)), values(std::move(values_)), color(std::move(color_)) {}
  std::string name;
  std::vector<double> values;
  std::string color;  // "" = ChartColor(index)
};

struct BarChart {
  BarChart(std::string id_, std::string category_title_, std::vector<std::string> categories_,
           ChartAxis y_)
      : id(std::move(id_)),
        category_title(std::move(category_title_)),
        categories(std::move(categories_)),
        y(std::move(y_)) {}
  std::string id;
  std::string category_title;  // the x axis: "layout", "source group"
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
  ChartAxis y;               // zero is implied
  bool value_labels = true;  // the value above each bar
  int height_px = 320;
};
std::string BarChartHtml(const BarChart& chart);

// Stacked bars: one stack per StackedBar, placed in its group (one group per distinct `group`, in
// first-seen order) next to the group's other bars (`bar` names them: "predicted", "measured").
// parts[k] is the height of segment parts[k] of StackedBarChart::parts, bottom first (NaN or 0:
// no segment). The total is printed above each stack with the bar's name.
struct StackedBar {
  StackedBar(std::string group_, std::string bar_, std::vector<double> parts_)
      : group(std::move(group_)), bar(std::move(bar_)), parts(std::move(parts_)) {}
  std::string group;
  std::string bar;
  std::vector<double> parts;
  std::vector<double> ticks;  // horizontal: ticks[j] is where StackedBarChart::ticks[j] crosses
                              // this stack (NaN: none)
  std::string label;          // horizontal: the text after the stack; "" = its total
};

// A reference tick across each stack of a horizontal chart ("capacity", "step"), in the legend.
struct BarTick {
  BarTick(std::string name_, std::string color_, bool dashed_ = false)
      : name(std::move(name_)), color(std::move(color_)), dashed(dashed_) {}
  std::string name;
  std::string color;
  bool dashed = false;
};

struct StackedBarChart {
  StackedBarChart(std::string id_, std::string group_title_, std::vector<std::string> parts_,
                  ChartAxis y_)
      : id(std::move(id_)),
        group_title(std::move(group_title_)),
        parts(std::move(parts_)),
        y(std::move(y_)) {}
  std::string id;
  std::string group_title;          // the x axis: "layout"
  std::vector<std::string> parts;   // segment names, bottom first: "weights", "grads", ...
  std::vector<std::string> colors;  // one per part; empty = ChartColor(k)
  std::vector<StackedBar> bars;
  ChartAxis y;  // zero is implied
  int height_px = 340;
  // Horizontal: groups are rows (labelled on the left), values run along x; each stack is
  // followed by its label (StackedBar::label, else its total) placed after its last tick.
  bool horizontal = false;
  std::vector<BarTick> ticks;  // horizontal only
  // Horizontal only: the value axis ends here when the data reach past it (a far larger stack
  // would flatten the others); a longer stack is cut at the bound, its hover keeps the true values
  // and its label is drawn in red with " >>" after it.
  double value_max = std::numeric_limits<double>::infinity();
};
std::string StackedBarChartHtml(const StackedBarChart& chart);

// A grid of cells: cells[r][c] is the cell of rows[r] and columns[c]. A cell with a finite value
// is coloured on a linear scale from `low_color` at value_min to `high_color` at value_max
// (clamped) and shows its text lines (the first bold), white on the darker half; a cell with NaN
// is grey and shows its lines in red. Each cell's hover shows its row, column and `hover`.
struct HeatmapCell {
  double value = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::string> lines;  // at most 2 lines fit a cell
  std::string hover;
};

struct HeatmapChart {
  HeatmapChart(std::string id_, std::vector<std::string> rows_, std::vector<std::string> columns_)
      : id(std::move(id_)), rows(std::move(rows_)), columns(std::move(columns_)) {}
  std::string id;
  std::vector<std::string> rows, columns;       // labels: left, top
  std::vector<std::vector<HeatmapCell>> cells;  // [row][column]
  double value_min = 0, value_max = 1;
  std::string low_color = "#f7fbff", high_color = "#08519c";
  int cell_width_px = 150, cell_height_px = 56;
};
std::string HeatmapChartHtml(const HeatmapChart& chart);

}  // namespace pentamesh::report

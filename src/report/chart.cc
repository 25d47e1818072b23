// Vega specs for report/chart.h's chart kinds, and the inlined library (report/vega_bundle.h).
#include "report/chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/check.h"
#include "report/vega_bundle.h"

namespace pentamesh::report {
namespace {

using Json = nlohmann::json;

constexpr int kWidthPx = 1040;                 // plot width; pages are 1200 px wide at most
constexpr int kHorizontalWidthPx = 700;        // horizontal bars: room for row labels and totals
constexpr const char* kHoverFormat = ",.6~g";  // hover values when the axis has no format
constexpr const char* kLabelFormat = ",.4~g";  // values printed on bars, likewise

// Loads the embedded Vega packages as CommonJS modules (Debian's UMD files, used as globals,
// would each overwrite window.vega), registers the transforms as Vega's own bundle does, and
// defines pmChart(id), which parses the spec in #ID-spec and renders it as SVG into #ID.
constexpr const char* kLoaderHead =
    "(function(){var defs={},done={};function req(n){if(!(n in done)){"
    "if(!defs[n])throw new Error('pentamesh: Vega module '+n+' is not embedded');"
    "var m={exports:{}};done[n]=m.exports;defs[n].call(m.exports,m,m.exports,req);"
    "done[n]=m.exports;}return done[n];}\n";
constexpr const char* kLoaderTail = R"(var tx=req('vega-dataflow').transforms;
Object.assign(tx,req('vega-transforms'),req('vega-view-transforms'),req('vega-encode'));
window.pmVega={parse:req('vega-parser').parse,View:req('vega-view').View};})();
function pmChart(id){var el=document.getElementById(id);
function fail(e){el.setAttribute('data-error',String(e));el.textContent='chart error: '+e;}
try{var spec=JSON.parse(document.getElementById(id+'-spec').textContent);
var view=new pmVega.View(pmVega.parse(spec),{renderer:'svg',container:el,hover:true});
view.runAsync().then(function(){var r=el.getBoundingClientRect();
el.setAttribute('data-box',[r.left+window.scrollX,r.top+window.scrollY,r.width,r.height]
.map(Math.round).join(','));el.setAttribute('data-rendered','1');},fail);}catch(e){fail(e);}}
)";

bool ValidId(const std::string& id) {
  if (id.empty()) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// A Vega expression string literal: 'text' with \ and ' escaped.
std::string ExprString(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string HoverFormat(const ChartAxis& axis) {
  return ExprString(axis.format.empty() ? kHoverFormat : axis.format);
}

// The fragment: the div, the spec as JSON ('<' escaped so no string can close the script
// element), and the render call.
std::string Fragment(const std::string& id, const Json& spec) {
  PM_CHECK(ValidId(id)) << "chart id '" << id << "' must match [a-z0-9-]+";
  std::string json = spec.dump();
  std::string safe;
  safe.reserve(json.size());
  for (char c : json) {
    if (c == '<')
      safe += "\\u003c";
    else
      safe += c;
  }
  return fmt::format(
      "<div class=\"pm-chart\" id=\"{0}\"></div>\n<script type=\"application/json\" "
      "id=\"{0}-spec\">{1}</script>\n<script>pmChart(\"{0}\")</script>\n",
      id, safe);
}

Json AxisJson(const std::string& orient, const std::string& scale, const ChartAxis& axis,
              bool grid) {
  Json a = {{"orient", orient},    {"scale", scale},      {"title", axis.title}, {"grid", grid},
            {"labelFontSize", 11}, {"titleFontSize", 12}, {"labelOverlap", true}};
  if (!axis.format.empty()) a["format"] = axis.format;
  return a;
}

Json Legend(const std::vector<std::string>& names, const std::vector<std::string>& colors) {
  return {{"name", "color"}, {"type", "ordinal"}, {"domain", names}, {"range", colors}};
}

Json BaseSpec(int height_px) {
  return {{"width", kWidthPx},
          {"height", height_px},
          {"padding", 5},
          {"config", {{"axis", {{"labelColor", "#333"}, {"gridColor", "#e6e6e6"}}}}},
          {"legends", Json::array({{{"fill", "color"},
                                    {"orient", "top"},
                                    {"direction", "horizontal"},
                                    {"labelFontSize", 12},
                                    {"symbolType", "square"}}})}};
}

}  // namespace

std::string ChartColor(size_t i) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[i % std::size(kPalette)];
}

std::string ChartLibraryScript() {
  std::string js = fmt::format("<script>/* Vega 5 ({}), BSD-3-Clause */\n", kVegaVersion);
  js += kLoaderHead;
  for (size_t i = 0; i < kVegaModuleCount; ++i) {
    const VegaModule& m = kVegaModules[i];
    const std::string_view text(reinterpret_cast<const char*>(m.data), m.size);
    PM_CHECK(text.find("</script") == std::string_view::npos) << m.name << " closes the script";
    js += fmt::format("defs['{}']=function(module,exports,require){{\n", m.name);
    js += text;
    js += "\n};\n";
  }
  return js + kLoaderTail + "</script>\n";
}

}  // namespace pentamesh::report

// XyChart: lines and points, zoom and pan.
namespace pentamesh::report {
namespace {

// Pan and zoom signals for one axis ("x" or "y"): the display scale's domain is the signal
// `<a>dom`, initially the fitted, nice domain of the helper scale `<a>fit`; dragging shifts it by
// the pointer's travel, the wheel scales it around the pointer, a double click restores it. On a
// log axis the same happens to log10 of the domain.
Json AxisZoomSignals(const std::string& a, bool log) {
  const std::string dom = a + "dom", cur = a + "cur", size = a == "x" ? "width" : "height";
  const std::string d = a == "x" ? "delta[0]" : "delta[1]", anchor = "anchor" + a;
  const std::string shift = fmt::format("{} / {}", d, size);
  const std::string pan =
      log ? fmt::format("[{0}[0] * pow({0}[1] / {0}[0], {1}), {0}[1] * pow({0}[1] / {0}[0], {1})]",
                        cur, shift)
          : fmt::format("[{0}[0] + span({0}) * {1}, {0}[1] + span({0}) * {1}]", cur, shift);
  const std::string zoom =
      log ? fmt::format("[{0} * pow({1}[0] / {0}, zoom), {0} * pow({1}[1] / {0}, zoom)]", anchor,
                        dom)
          : fmt::format("[{0} + ({1}[0] - {0}) * zoom, {0} + ({1}[1] - {0}) * zoom]", anchor, dom);
  const std::string fit = fmt::format("domain('{}fit')", a);
  return Json::array(
      {{{"name", cur},
        {"value", nullptr},
        {"on", Json::array({{{"events", "mousedown"}, {"update", "slice(" + dom + ")"}}})}},
       {{"name", anchor},
        {"value", 0},
        {"on", Json::array(
                   {{{"events", "wheel"}, {"update", fmt::format("invert('{}', {}())", a, a)}}})}},
       {{"name", dom},
        {"update", fit},
        {"on", Json::array({{{"events", {{"signal", "delta"}}}, {"update", pan}},
                            {{"events", {{"signal", "zoom"}}}, {"update", zoom}},
                            {{"events", "dblclick"}, {"update", fit}}})}}});
}

Json ZoomSignals(const XyChart& c) {
  Json signals = Json::array(
      {{{"name", "down"},
        {"value", nullptr},
        {"on", Json::array({{{"events", "mousedown"}, {"update", "xy()"}},
                            {{"events", "window:mouseup"}, {"update", "null"}}})}},
       {{"name", "delta"},
        {"value", {0, 0}},
        {"on", Json::array({{{"events", "[mousedown, window:mouseup] > window:mousemove!"},
                             {"update", "down ? [down[0] - x(), y() - down[1]] : [0, 0]"}}})}},
       {{"name", "zoom"},
        {"value", 1},
        {"on",
         Json::array({{{"events", "wheel!"},
                       {"force", true},
                       {"update", "pow(1.001, event.deltaY * pow(16, event.deltaMode))"}}})}}});
  for (const Json& s : AxisZoomSignals("x", c.x.log)) signals.push_back(s);
  for (const Json& s : AxisZoomSignals("y", c.y.log)) signals.push_back(s);
  return signals;
}

// The data's range [lo, hi] on one axis, widened when every value is equal (a flat line still
// gets ticks around it): by 10% of the value (a factor 2 on a log axis), or by 1 around 0.
std::pair<double, double> FitRange(double lo, double hi, bool log) {
  if (lo < hi) return {lo, hi};
  if (log) return {lo / 2, hi * 2};
  const double pad = lo == 0 ? 1.0 : 0.1 * std::fabs(lo);
  return {lo - pad, hi + pad};
}

// A fitted, nice helper scale `<a>fit` over the data's range (its domain is where zoom and pan
// start and return to), and the display scale `<a>` driven by the zoom signal.
Json XyScales(const ChartAxis& axis, const std::string& a, std::pair<double, double> range) {
  const std::string type = axis.log ? "log" : "linear";
  const Json pixels = a == "x" ? Json("width") : Json("height");
  const auto [lo, hi] = FitRange(range.first, range.second, axis.log);
  return Json::array({{{"name", a + "fit"},
                       {"type", type},
                       {"domain", {lo, hi}},
                       {"range", pixels},
                       {"nice", true},
                       {"zero", axis.zero && !axis.log}},
                      {{"name", a},
                       {"type", type},
                       {"domain", {{"signal", a + "dom"}}},
                       {"range", pixels},
                       {"zero", false}}});
}

Json XyTooltip(const XyChart& c, bool labelled) {
  std::string tip =
      fmt::format("{{'series': datum.s, {}: format(datum.x, {}), {}: format(datum.y, {})",
                  ExprString(c.x.title.empty() ? "x" : c.x.title), HoverFormat(c.x),
                  ExprString(c.y.title.empty() ? "y" : c.y.title), HoverFormat(c.y));
  if (labelled) tip += ", 'point': datum.l";
  return {{"signal", tip + "}"}};
}

Json XyMarks(const XyChart& c, const std::string& data, size_t i) {
  const XySeries& s = c.series[i];
  const std::string color = s.color.empty() ? ChartColor(i) : s.color;
  Json xy = {{"x", {{"scale", "x"}, {"field", "x"}}}, {"y", {{"scale", "y"}, {"field", "y"}}}};
  Json marks = Json::array();
  if (s.style != SeriesStyle::kPoints) {
    Json enter = xy;
    enter["stroke"] = {{"value", color}};
    enter["strokeWidth"] = {{"value", 2}};
    if (s.style == SeriesStyle::kDashed) enter["strokeDash"] = {{"value", {6, 4}}};
    marks.push_back({{"type", "line"},
                     {"from", {{"data", data}}},
                     {"clip", true},
                     {"encode", {{"update", enter}}}});
  }
  // Points carry the hover values; on a line they show only while hovered (unless few).
  const bool visible = s.style == SeriesStyle::kPoints || s.points.size() <= 40;
  Json enter = xy;
  enter["fill"] = {{"value", color}};
  enter["size"] = {{"value", s.style == SeriesStyle::kPoints ? 40 : 20}};
  enter["fillOpacity"] = {{"value", visible ? 1 : 0}};
  enter["tooltip"] = XyTooltip(c, !s.labels.empty());
  Json hover = {{"fillOpacity", {{"value", 1}}}, {"size", {{"value", 80}}}};
  marks.push_back({{"type", "symbol"},
                   {"from", {{"data", data}}},
                   {"clip", true},
                   {"encode", {{"update", enter}, {"hover", hover}}}});
  return marks;
}

}  // namespace

std::string XyChartHtml(const XyChart& c) {
  Json spec = BaseSpec(c.height_px);
  Json data = Json::array(), marks = Json::array();
  const double inf = std::numeric_limits<double>::infinity();
  std::pair<double, double> xr = {inf, -inf}, yr = {inf, -inf};
  std::vector<std::string> names, colors;
  size_t points = 0;
  for (size_t i = 0; i < c.series.size(); ++i) {
    const XySeries& s = c.series[i];
    const std::string name = fmt::format("s{}", i);
    Json values = Json::array();
    for (size_t p = 0; p < s.points.size(); ++p) {
      const auto [x, y] = s.points[p];
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if ((c.x.log && x <= 0) || (c.y.log && y <= 0)) continue;
      Json row = {{"s", s.name}, {"x", x}, {"y", y}};
      if (p < s.labels.size()) row["l"] = s.labels[p];
      xr = {std::min(xr.first, x), std::max(xr.second, x)};
      yr = {std::min(yr.first, y), std::max(yr.second, y)};
      values.push_back(std::move(row));
    }
    points += values.size();
    data.push_back({{"name", name}, {"values", std::move(values)}});
    names.push_back(s.name);
    colors.push_back(s.color.empty() ? ChartColor(i) : s.color);
    for (Json& m : XyMarks(c, name, i)) marks.push_back(std::move(m));
  }
  if (points == 0) {
    PM_CHECK(ValidId(c.id)) << "chart id '" << c.id << "' must match [a-z0-9-]+";
    return fmt::format("<p class=note id=\"{}\">No data to plot.</p>\n", c.id);
  }
  spec["data"] = std::move(data);
  spec["signals"] = ZoomSignals(c);
  Json scales = XyScales(c.x, "x", xr);
  for (Json& s : XyScales(c.y, "y", yr)) scales.push_back(std::move(s));
  scales.push_back(Legend(names, colors));
  spec["scales"] = std::move(scales);
  spec["axes"] =
      Json::array({AxisJson("bottom", "x", c.x, false), AxisJson("left", "y", c.y, true)});
  spec["marks"] = std::move(marks);
  return Fragment(c.id, spec);
}

}  // namespace pentamesh::report

// Bars: grouped (BarChart) and stacked (StackedBarChart) share one spec: rows (g, b, part, v,
// y0, y1) faceted by group g, a band per bar b inside the group, colour by part.
namespace pentamesh::report {
namespace {

// rows: one per segment (k "s": g, b, part, v, y0, y1) and one per stack (k "t": g, b, t = its
// top, the label's value), so one facet by g carries both into the group.
struct BarRows {
  Json rows = Json::array();
  std::vector<std::string> groups, bars;
  void Segment(const std::string& g, const std::string& b, const std::string& part, double v,
               double y0) {
    rows.push_back(
        {{"k", "s"}, {"g", g}, {"b", b}, {"part", part}, {"v", v}, {"y0", y0}, {"y1", y0 + v}});
  }
  void Total(const std::string& g, const std::string& b, double t) {
    rows.push_back({{"k", "t"}, {"g", g}, {"b", b}, {"t", t}, {"y0", 0}, {"y1", t}});
  }
};

void AddUnique(std::vector<std::string>& list, const std::string& name) {
  if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
}

Json BarTooltip(const std::string& group_title, const ChartAxis& y) {
  return {{"signal", fmt::format("{{{}: datum.g, 'bar': datum.b, 'part': datum.part, {}: "
                                 "format(datum.v, {})}}",
                                 ExprString(group_title.empty() ? "group" : group_title),
                                 ExprString(y.title.empty() ? "value" : y.title), HoverFormat(y))}};
}

// The group axis labels every category (no overlap hiding), slanted when there are many.
Json BarAxes(size_t groups, const std::string& group_title, const ChartAxis& y_axis) {
  Json group = AxisJson("bottom", "g", ChartAxis(group_title), false);
  group["labelOverlap"] = false;
  group["labelLimit"] = 180;
  if (groups > 6) {
    group["labelAngle"] = -25;
    group["labelAlign"] = "right";
  }
  return Json::array({group, AxisJson("left", "y", y_axis, true)});
}

// The group's rows of kind k, from the facet "segs".
Json GroupRows(const std::string& name, const std::string& k) {
  return {{"name", name},
          {"source", "segs"},
          {"transform", Json::array({{{"type", "filter"}, {"expr", "datum.k === '" + k + "'"}}})}};
}

// The band scale "g" of the groups along `group_range` ("width" or "height"), the value scale
// "y" along the other (from 0, over every row's y0 and y1, nice), and the colour legend.
Json BarScales(const std::vector<std::string>& groups, const std::string& group_range,
               const std::string& value_range, const std::vector<std::string>& parts,
               const std::vector<std::string>& colors) {
  return Json::array({{{"name", "g"},
                       {"type", "band"},
                       {"domain", groups},
                       {"range", group_range},
                       {"paddingInner", 0.2},
                       {"paddingOuter", 0.1}},
                      {{"name", "y"},
                       {"type", "linear"},
                       {"domain",
                        {{"fields", Json::array({{{"data", "rows"}, {"field", "y0"}},
                                                 {{"data", "rows"}, {"field", "y1"}}})}}},
                       {"range", value_range},
                       {"nice", true},
                       {"zero", true}},
                      Legend(parts, colors)});
}

Json BarSpec(const BarRows& r, const std::string& group_title, const ChartAxis& y_axis,
             const std::vector<std::string>& parts, const std::vector<std::string>& colors,
             bool stacked_labels, bool value_labels, int height_px) {
  Json spec = BaseSpec(height_px);
  spec["data"] = Json::array({{{"name", "rows"}, {"values", r.rows}}});
  spec["scales"] = BarScales(r.groups, "width", "height", parts, colors);
  spec["axes"] = BarAxes(r.groups.size(), group_title, y_axis);
  Json rect = {{"x", {{"scale", "b"}, {"field", "b"}}},
               {"width", {{"scale", "b"}, {"band", 1}}},
               {"y", {{"scale", "y"}, {"field", "y1"}}},
               {"y2", {{"scale", "y"}, {"field", "y0"}}},
               {"fill", {{"scale", "color"}, {"field", "part"}}},
               {"tooltip", BarTooltip(group_title, y_axis)}};
  const std::string fmt_expr = ExprString(y_axis.format.empty() ? kLabelFormat : y_axis.format);
  const std::string text = stacked_labels ? fmt::format("[datum.b, format(datum.t, {})]", fmt_expr)
                                          : fmt::format("format(datum.t, {})", fmt_expr);
  Json label = {{"x", {{"scale", "b"}, {"field", "b"}, {"band", 0.5}}},
                {"y", {{"scale", "y"}, {"field", "t"}, {"offset", stacked_labels ? -16 : -4}}},
                {"text", {{"signal", text}}},
                {"align", {{"value", "center"}}},
                {"fontSize", {{"value", 10}}},
                {"fill", {{"value", "#333"}}}};
  Json inner = Json::array(
      {{{"type", "rect"},
        {"from", {{"data", "bars"}}},
        {"encode", {{"update", rect}, {"hover", {{"fillOpacity", {{"value", 0.7}}}}}}}}});
  if (value_labels)
    inner.push_back(
        {{"type", "text"}, {"from", {{"data", "tops"}}}, {"encode", {{"update", label}}}});
  spec["marks"] =
      Json::array({{{"type", "group"},
                    {"from", {{"facet", {{"data", "rows"}, {"name", "segs"}, {"groupby", "g"}}}}},
                    {"encode",
                     {{"update",
                       {{"x", {{"scale", "g"}, {"field", "g"}}},
                        {"width", {{"scale", "g"}, {"band", 1}}},
                        {"height", {{"signal", "height"}}}}}}},
                    {"signals", Json::array({{{"name", "gw"}, {"update", "bandwidth('g')"}}})},
                    {"data", Json::array({GroupRows("bars", "s"), GroupRows("tops", "t")})},
                    {"scales", Json::array({{{"name", "b"},
                                             {"type", "band"},
                                             {"domain", r.bars},
                                             {"range", {0, {{"signal", "gw"}}}},
                                             {"paddingInner", 0.1}}})},
                    {"marks", inner}}});
  return spec;
}

// Horizontal stacked bars: rows k "s" (segments: g, b, part, v = the true value, y0, y1 cut at
// value_max), k "m" (ticks: g, b, part = the tick's name, v, y1 = the cut position, dash) and k "t"
// (labels: g, b, y1 = after the stack and its ticks, lt = the text, over = cut). The value scale
// reads y0 and y1 of every row, so the cut bounds it.
std::string HorizontalStackedBarHtml(const StackedBarChart& c) {
  const double cut = c.value_max;
  Json rows = Json::array();
  std::vector<std::string> groups, bars, names = c.parts, colors = c.colors;
  for (size_t k = colors.size(); k < c.parts.size(); ++k) colors.push_back(ChartColor(k));
  for (const BarTick& t : c.ticks) {
    names.push_back(t.name);
    colors.push_back(t.color);
  }
  const std::string fmt_spec = c.y.format.empty() ? ",.4~g" : c.y.format;
  for (const StackedBar& bar : c.bars) {
    AddUnique(groups, bar.group);
    AddUnique(bars, bar.bar);
    double top = 0, end = 0;
    for (size_t k = 0; k < c.parts.size() && k < bar.parts.size(); ++k) {
      const double v = bar.parts[k];
      if (!std::isfinite(v) || v == 0) continue;
      rows.push_back({{"k", "s"},
                      {"g", bar.group},
                      {"b", bar.bar},
                      {"part", c.parts[k]},
                      {"v", v},
                      {"y0", std::min(top, cut)},
                      {"y1", std::min(top + v, cut)}});
      top += v;
    }
    end = std::min(top, cut);
    for (size_t j = 0; j < c.ticks.size() && j < bar.ticks.size(); ++j) {
      const double v = bar.ticks[j];
      if (!std::isfinite(v)) continue;
      rows.push_back({{"k", "m"},
                      {"g", bar.group},
                      {"b", bar.bar},
                      {"part", c.ticks[j].name},
                      {"v", v},
                      {"y0", 0},
                      {"y1", std::min(v, cut)},
                      {"dash", c.ticks[j].dashed ? Json::array({5, 3}) : Json::array()}});
      end = std::max(end, std::min(v, cut));
    }
    const bool over = top > cut;
    std::string text = bar.label.empty() ? "" : bar.label;
    if (over) text += text.empty() ? ">>" : " >>";
    rows.push_back({{"k", "t"},
                    {"g", bar.group},
                    {"b", bar.bar},
                    {"t", top},
                    {"y0", 0},
                    {"y1", end},
                    {"lt", text},
                    {"custom", !bar.label.empty()},
                    {"over", over}});
  }
  Json spec = BaseSpec(c.height_px);
  spec["width"] = kHorizontalWidthPx;
  spec["data"] = Json::array({{{"name", "rows"}, {"values", rows}}});
  spec["scales"] = BarScales(groups, "height", "width", names, colors);
  Json group_axis = AxisJson("left", "g", ChartAxis(c.group_title), false);
  group_axis["labelOverlap"] = false;
  group_axis["labelLimit"] = 380;
  group_axis["labelFontSize"] = 12;
  spec["axes"] = Json::array({group_axis, AxisJson("bottom", "y", c.y, true)});
  Json rect = {{"y", {{"scale", "b"}, {"field", "b"}}},
               {"height", {{"scale", "b"}, {"band", 1}}},
               {"x", {{"scale", "y"}, {"field", "y0"}}},
               {"x2", {{"scale", "y"}, {"field", "y1"}}},
               {"fill", {{"scale", "color"}, {"field", "part"}}},
               {"tooltip", BarTooltip(c.group_title, c.y)}};
  Json rule = {{"x", {{"scale", "y"}, {"field", "y1"}}},
               {"y", {{"scale", "b"}, {"field", "b"}, {"offset", -3}}},
               {"y2", {{"scale", "b"}, {"field", "b"}, {"band", 1}, {"offset", 3}}},
               {"stroke", {{"scale", "color"}, {"field", "part"}}},
               {"strokeWidth", {{"value", 2.5}}},
               {"strokeDash", {{"field", "dash"}}},
               {"tooltip", BarTooltip(c.group_title, c.y)}};
  Json label = {
      {"x", {{"scale", "y"}, {"field", "y1"}, {"offset", 6}}},
      {"y", {{"scale", "b"}, {"field", "b"}, {"band", 0.5}}},
      {"baseline", {{"value", "middle"}}},
      {"text",
       {{"signal", fmt::format("(datum.b ? datum.b + ': ' : '') + (datum.custom ? datum.lt : "
                               "format(datum.t, {}) + (datum.over ? ' ' + datum.lt : ''))",
                               ExprString(fmt_spec))}}},
      {"fontSize", {{"value", 12}}},
      {"fontWeight", {{"signal", "datum.over ? 'bold' : 'normal'"}}},
      {"fill", {{"signal", "datum.over ? '#c00' : '#222'"}}}};
  Json inner = Json::array(
      {{{"type", "rect"},
        {"from", {{"data", "bars"}}},
        {"encode", {{"update", rect}, {"hover", {{"fillOpacity", {{"value", 0.7}}}}}}}},
       {{"type", "rule"}, {"from", {{"data", "ticks"}}}, {"encode", {{"update", rule}}}},
       {{"type", "text"}, {"from", {{"data", "tops"}}}, {"encode", {{"update", label}}}}});
  spec["marks"] = Json::array(
      {{{"type", "group"},
        {"from", {{"facet", {{"data", "rows"}, {"name", "segs"}, {"groupby", "g"}}}}},
        {"encode",
         {{"update",
           {{"y", {{"scale", "g"}, {"field", "g"}}},
            {"height", {{"scale", "g"}, {"band", 1}}},
            {"width", {{"signal", "width"}}}}}}},
        {"signals", Json::array({{{"name", "gh"}, {"update", "bandwidth('g')"}}})},
        {"data",
         Json::array({GroupRows("bars", "s"), GroupRows("tops", "t"), GroupRows("ticks", "m")})},
        {"scales", Json::array({{{"name", "b"},
                                 {"type", "band"},
                                 {"domain", bars},
                                 {"range", {0, {{"signal", "gh"}}}},
                                 {"paddingInner", 0.1}}})},
        {"marks", inner}}});
  return Fragment(c.id, spec);
}

}  // namespace

std::string BarChartHtml(const BarChart& c) {
  BarRows r;
  r.groups = c.categories;
  std::vector<std::string> names, colors;
  for (size_t s = 0; s < c.series.size(); ++s) {
    names.push_back(c.series[s].name);
    colors.push_back(c.series[s].color.empty() ? ChartColor(s) : c.series[s].color);
    AddUnique(r.bars, c.series[s].name);
    for (size_t k = 0; k < c.categories.size() && k < c.series[s].values.size(); ++k) {
      const double v = c.series[s].values[k];
      if (!std::isfinite(v)) continue;
      const std::string& g = c.categories[k];
      const std::string& b = c.series[s].name;
      r.Segment(g, b, b, v, 0);
      r.Total(g, b, v);
    }
  }
  return Fragment(
      c.id, BarSpec(r, c.category_title, c.y, names, colors, false, c.value_labels, c.height_px));
}

std::string StackedBarChartHtml(const StackedBarChart& c) {
  if (c.horizontal) return HorizontalStackedBarHtml(c);
  BarRows r;
  std::vector<std::string> colors = c.colors;
  for (size_t k = colors.size(); k < c.parts.size(); ++k) colors.push_back(ChartColor(k));
  for (const StackedBar& bar : c.bars) {
    AddUnique(r.groups, bar.group);
    AddUnique(r.bars, bar.bar);
    double top = 0;
    for (size_t k = 0; k < c.parts.size() && k < bar.parts.size(); ++k) {
      const double v = bar.parts[k];
      if (!std::isfinite(v) || v == 0) continue;
      r.Segment(bar.group, bar.bar, c.parts[k], v, top);
      top += v;
    }
    r.Total(bar.group, bar.bar, top);
  }
  return Fragment(c.id, BarSpec(r, c.group_title, c.y, c.parts, colors, true, true, c.height_px));
}

}  // namespace pentamesh::report

// HeatmapChart: one rect and up to two text lines per cell, on two band scales.
namespace pentamesh::report {

std::string HeatmapChartHtml(const HeatmapChart& c) {
  Json cells = Json::array();
  const double mid = 0.5 * (c.value_min + c.value_max);
  for (size_t r = 0; r < c.rows.size() && r < c.cells.size(); ++r) {
    for (size_t col = 0; col < c.columns.size() && col < c.cells[r].size(); ++col) {
      const HeatmapCell& cell = c.cells[r][col];
      const bool has = std::isfinite(cell.value);
      Json row = {{"r", c.rows[r]},
                  {"c", c.columns[col]},
                  {"t1", cell.lines.empty() ? "" : cell.lines[0]},
                  {"t2", cell.lines.size() > 1 ? cell.lines[1] : ""},
                  {"tip", cell.hover},
                  {"fg", !has ? "#c00" : (cell.value > mid ? "#fff" : "#222")}};
      if (has) row["v"] = cell.value;
      cells.push_back(std::move(row));
    }
  }
  Json spec = {{"width", c.cell_width_px * static_cast<int>(c.columns.size())},
               {"height", c.cell_height_px * static_cast<int>(c.rows.size())},
               {"padding", 5},
               {"data", Json::array({{{"name", "cells"}, {"values", cells}}})}};
  spec["scales"] = Json::array({{{"name", "x"},
                                 {"type", "band"},
                                 {"domain", c.columns},
                                 {"range", "width"},
                                 {"paddingInner", 0.02}},
                                {{"name", "y"},
                                 {"type", "band"},
                                 {"domain", c.rows},
                                 {"range", "height"},
                                 {"paddingInner", 0.04}},
                                {{"name", "heat"},
                                 {"type", "linear"},
                                 {"domain", {c.value_min, c.value_max}},
                                 {"range", {c.low_color, c.high_color}},
                                 {"clamp", true}}});
  Json top = AxisJson("top", "x", ChartAxis(), false);
  Json left = AxisJson("left", "y", ChartAxis(), false);
  for (Json* a : {&top, &left}) {
    (*a)["labelOverlap"] = false;
    (*a)["labelFontSize"] = 12;
    (*a)["labelFontWeight"] = "bold";
    (*a)["domain"] = false;
    (*a)["ticks"] = false;
  }
  spec["axes"] = Json::array({top, left});
  const Json tooltip = {{"signal", "{'row': datum.r, 'column': datum.c, 'cell': datum.tip}"}};
  Json rect = {
      {"x", {{"scale", "x"}, {"field", "c"}}},
      {"width", {{"scale", "x"}, {"band", 1}}},
      {"y", {{"scale", "y"}, {"field", "r"}}},
      {"height", {{"scale", "y"}, {"band", 1}}},
      {"fill", Json::array({{{"test", "isValid(datum.v)"}, {"scale", "heat"}, {"field", "v"}},
                            {{"value", "#eee"}}})},
      {"tooltip", tooltip}};
  auto line = [&](const std::string& field, double band, int size, bool bold) {
    return Json{{"type", "text"},
                {"from", {{"data", "cells"}}},
                {"interactive", false},
                {"encode",
                 {{"update",
                   {{"x", {{"scale", "x"}, {"field", "c"}, {"band", 0.5}}},
                    {"y", {{"scale", "y"}, {"field", "r"}, {"band", band}}},
                    {"align", {{"value", "center"}}},
                    {"baseline", {{"value", "middle"}}},
                    {"text", {{"field", field}}},
                    {"fontSize", {{"value", size}}},
                    {"fontWeight", {{"value", bold ? "bold" : "normal"}}},
                    {"fill", {{"field", "fg"}}}}}}}};
  };
  spec["marks"] = Json::array(
      {{{"type", "rect"}, {"from", {{"data", "cells"}}}, {"encode", {{"update", rect}}}},
       line("t1", 0.38, 15, true),
       line("t2", 0.74, 11, false)});
  return Fragment(c.id, spec);
}

}  // namespace pentamesh::report

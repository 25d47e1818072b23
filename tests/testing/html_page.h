// Checks every generated HTML page shares (namespace pentamesh::testing):
//   ExpectSelfContained(html)      scripts only inline (no src), no <link>, and outside the scripts
//                                  no URL but the SVG namespace (nothing fetched);
//   FindChromium()                 the headless browser's path, or "" when none is installed;
//   Screenshot(chromium, html, png) renders the page at 1280 x 2000 and reads back the PNG's size
//                                  and colour count (tests/report/png_check.py);
//   ColourPixels(png, {box, colour}...) how many pixels of each colour its box holds;
//   RenderedCharts(chromium, html) the page's report/chart.h charts after its scripts ran
//                                  (chromium --dump-dom, tests/report/chart_dom.py): rendered or
//                                  the error, the box, the axis tick labels, the marks drawn and
//                                  the rects' widths;
//   ChartSpec(html, id)            the Vega spec report/chart.h embedded in the page under id
//                                  (null, with a failure, when the page has none);
//   ExpectRoundTicks(labels)       numeric tick labels equally spaced by 1, 2, 2.5 or 5 x 10^k,
//                                  each a multiple of that step (ExpectLogTicks: m x 10^k).
// The browser runs with every host name unresolvable, so a page that renders here needs no network.
// Invariant: a page these accept opens offline and renders to a non-blank image.
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pentamesh::testing {

inline nlohmann::json ChartSpec(const std::string& html, const std::string& id) {
  const std::string open = "<script type=\"application/json\" id=\"" + id + "-spec\">";
  const size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos) << id;
  if (begin == std::string::npos) return {};
  const size_t end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

inline void ExpectSelfContained(const std::string& html) {
  EXPECT_EQ(html.find("<link"), std::string::npos);
  // Script bodies (Vega's code names URLs it never fetches here) are skipped; each opening tag
  // must be inline: <script> or <script type="application/json" id=...>, never src=.
  std::string outside;
  size_t pos = 0;
  while (true) {
    const size_t open = html.find("<script", pos);
    outside += html.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (open == std::string::npos) break;
    const size_t tag_end = html.find('>', open);
    ASSERT_NE(tag_end, std::string::npos);
    const std::string tag = html.substr(open, tag_end - open + 1);
    EXPECT_EQ(tag.find("src"), std::string::npos) << tag;
    const size_t close = html.find("</script>", tag_end);
    ASSERT_NE(close, std::string::npos) << "unclosed " << tag;
    pos = close + 9;
  }
  // The only URL is the SVG namespace (an identifier, never fetched).
  pos = 0;
  while ((pos = outside.find("http", pos)) != std::string::npos) {
    EXPECT_EQ(outside.compare(pos, 26, "http://www.w3.org/2000/svg"), 0) << outside.substr(pos, 40);
    ++pos;
  }
}

inline std::string FindChromium() {
  for (const char* name : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(name)) return name;
  }
  return "";
}

struct PngInfo {
  uintmax_t bytes = 0;
  int width = 0, height = 0, colours = 0;
};

// Flags for every headless run: no sandbox (root in CI), no GPU, and no network at all.
inline std::string ChromiumFlags(const std::string& dir) {
  return " --headless --no-sandbox --disable-gpu --hide-scrollbars "
         "--host-resolver-rules=\"MAP * ~NOTFOUND\" --user-data-dir=" +
         dir + "/profile --window-size=1280,2000 ";
}

// Screenshots `html` (a file in `dir`, which also holds the browser profile) into `png`; fails the
// test (fatally: wrap in ASSERT_NO_FATAL_FAILURE) when the browser or the PNG check fails.
inline void Screenshot(const std::string& chromium, const std::string& dir, const std::string& html,
                       const std::string& png, PngInfo* info) {
  const std::string cmd = "cd " + dir + " && timeout 120 " + chromium + ChromiumFlags(dir) +
                          "--screenshot=" + png + " file://" + html + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(std::filesystem::exists(png));
  info->bytes = std::filesystem::file_size(png);
  const std::string check = "/usr/bin/python3 " PM_SOURCE_DIR "/tests/report/png_check.py " + png;
  FILE* pipe = popen(check.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  ASSERT_EQ(fscanf(pipe, "%d %d %d", &info->width, &info->height, &info->colours), 3);
  EXPECT_EQ(pclose(pipe), 0);
}

// A tick label's value: "1,500" -> 1500, "2.5k" -> 2500, "20M" -> 2e7, "1e-3" -> 0.001,
// "25%" -> 0.25; NaN when it is not a number.
inline double TickValue(std::string label) {
  label.erase(std::remove(label.begin(), label.end(), ','), label.end());
  const std::string minus = "\u2212";  // Vega writes U+2212 for negative numbers
  if (label.rfind(minus, 0) == 0) label = "-" + label.substr(minus.size());
  double scale = 1;
  static const std::pair<std::string, double> kSuffixes[] = {
      {"\u00b5", 1e-6}, {"n", 1e-9}, {"m", 1e-3}, {"k", 1e3},
      {"M", 1e6},       {"G", 1e9},  {"T", 1e12}, {"%", 1e-2}};
  for (const auto& [suffix, factor] : kSuffixes) {
    if (label.size() > suffix.size() &&
        label.compare(label.size() - suffix.size(), suffix.size(), suffix) == 0) {
      scale = factor;
      label.resize(label.size() - suffix.size());
      break;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(label.c_str(), &end);
  if (label.empty() || end != label.c_str() + label.size()) return NAN;
  return v * scale;
}

// For each (box "left,top,width,height", colour "#rrggbb"): the pixels of that colour (each
// channel within 24) inside the box of a screenshot; empty when the check fails.
inline std::vector<int> ColourPixels(const std::string& png,
                                     const std::vector<std::pair<std::string, std::string>>& q) {
  std::string check = "/usr/bin/python3 " PM_SOURCE_DIR "/tests/report/png_check.py " + png;
  for (const auto& [box, colour] : q) check += " " + box + " '" + colour + "'";
  FILE* pipe = popen(check.c_str(), "r");
  if (pipe == nullptr) return {};
  int width = 0, height = 0, colours = 0;
  std::vector<int> matches(q.size(), -1);
  bool ok = fscanf(pipe, "%d %d %d", &width, &height, &colours) == 3;
  for (int& m : matches) ok = ok && fscanf(pipe, "%d", &m) == 1;
  return pclose(pipe) == 0 && ok ? matches : std::vector<int>{};
}

// Log-axis tick labels: at least 2, increasing, each m x 10^k with m an integer from 1 to 9.
inline void ExpectLogTicks(const std::vector<std::string>& labels, const std::string& what) {
  ASSERT_GE(labels.size(), 2u) << what;
  double last = 0;
  for (const std::string& l : labels) {
    const double v = TickValue(l);
    ASSERT_TRUE(std::isfinite(v) && v > last) << what << ": tick '" << l << "'";
    const double m = v / std::pow(10.0, std::floor(std::log10(v) + 1e-9));
    EXPECT_NEAR(m, std::round(m), 1e-6) << what << ": tick '" << l << "' is not m x 10^k";
    last = v;
  }
}

struct RenderedChart {
  bool rendered = false;
  std::string error;
  std::string box;  // "left,top,width,height" in page pixels
  std::vector<std::string> x_ticks, y_ticks;
  int lines = 0, symbols = 0, rects = 0;
  std::vector<double> rect_widths;  // each rect item's width in pixels, in document order
};

// The charts of `html` as Chromium rendered them, by div id (see the header comment).
inline std::map<std::string, RenderedChart> RenderedCharts(const std::string& chromium,
                                                           const std::string& dir,
                                                           const std::string& html) {
  const std::string dom = html + ".dom.html";
  // The virtual time budget lets the page's timers and promises (Vega renders asynchronously)
  // finish before the DOM is dumped.
  const std::string cmd = "cd " + dir + " && timeout 120 " + chromium + ChromiumFlags(dir) +
                          "--virtual-time-budget=5000 --dump-dom file://" + html + " >" + dom +
                          " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string extract = "/usr/bin/python3 " PM_SOURCE_DIR "/tests/report/chart_dom.py " + dom;
  std::string text;
  if (FILE* pipe = popen(extract.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
    EXPECT_EQ(pclose(pipe), 0) << extract;
  }
  std::map<std::string, RenderedChart> charts;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << extract << " printed: " << text.substr(0, 200);
  if (!j.is_object()) return charts;
  for (const auto& [id, c] : j.items()) {
    RenderedChart& r = charts[id];
    r.rendered = c["rendered"].get<bool>();
    r.error = c["error"].get<std::string>();
    if (c["box"].is_array()) {
      r.box = fmt::format("{},{},{},{}", c["box"][0].get<int>(), c["box"][1].get<int>(),
                          c["box"][2].get<int>(), c["box"][3].get<int>());
    }
    r.x_ticks = c["x_ticks"].get<std::vector<std::string>>();
    r.y_ticks = c["y_ticks"].get<std::vector<std::string>>();
    r.lines = c["marks"]["line"].get<int>();
    r.symbols = c["marks"]["symbol"].get<int>();
    r.rects = c["marks"]["rect"].get<int>();
    r.rect_widths = c["rect_widths"].get<std::vector<double>>();
  }
  return charts;
}

// Linear-axis tick labels: at least 2, numeric, equally spaced by step = m x 10^k with m in
// {1, 2, 2.5, 5}, each an integer multiple of the step.
inline void ExpectRoundTicks(const std::vector<std::string>& labels, const std::string& what) {
  ASSERT_GE(labels.size(), 2u) << what;
  std::vector<double> v;
  for (const std::string& l : labels) {
    v.push_back(TickValue(l));
    ASSERT_TRUE(std::isfinite(v.back())) << what << ": tick '" << l << "' is not a number";
  }
  const double step = v[1] - v[0];
  ASSERT_GT(step, 0) << what;
  const double decade = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const double m = step / decade;
  EXPECT_TRUE(std::fabs(m - 1) < 1e-6 || std::fabs(m - 2) < 1e-6 || std::fabs(m - 2.5) < 1e-6 ||
              std::fabs(m - 5) < 1e-6)
      << what << ": tick step " << step << " is not 1, 2, 2.5 or 5 x 10^k";
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_NEAR(v[i], v[0] + step * static_cast<double>(i), 1e-6 * step)
        << what << ": ticks are not equally spaced at '" << labels[i] << "'";
    EXPECT_NEAR(v[i] / step, std::round(v[i] / step), 1e-6)
        << what << ": tick '" << labels[i] << "' is not a multiple of the step " << step;
  }
}

}  // namespace pentamesh::testing

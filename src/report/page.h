// The one skeleton of every HTML page pentamesh writes (plan, scale, run report, schedule,
// validate, serve, tune): doctype, charset, escaped title, the shared stylesheet (svg.h's
// kPageStyle) plus a page's own, the chart library once when the page has Vega charts
// (chart.h), then the body. And the one writer of a page: atomic (core::WriteFileAtomic), its
// error prefixed by the flag that named the file.
#pragma once

#include <string>

#include "core/status.h"

namespace pentamesh::report {

struct PageOptions {
  bool charts = false;      // the page draws report/chart.h charts: ChartLibraryScript() in <head>
  std::string extra_style;  // the page's own <style> element, after the shared one
};

// `title` is escaped; `body` is the page's HTML as is.
std::string HtmlPage(const std::string& title, const std::string& body,
                     const PageOptions& options = {});

// Writes `html` to `path` atomically; errors read "<flag>: <reason>".
core::Status WritePage(const std::string& path, const std::string& html,
                       const std::string& flag = "--html");

}  // namespace pentamesh::report

// The `pentamesh serve` page: the serving layouts costed (one, or the search's best), a table of
// their memory, latency and cost, and bar charts of p95 TTFT and inter-token latency per layout.
// One self-contained file (report/chart.h).
#pragma once

#include <string>
#include <vector>

#include "cost/inference.h"

namespace pentamesh::report {

// title: what was asked ("meridianfin-72b on h100-sxm, 50000 + 2000 tokens"); rows: best first.
std::string ServeHtml(const std::string& title, const std::vector<cost::ServeEstimate>& rows);

}  // namespace pentamesh::report

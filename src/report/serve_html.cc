// The serve page (report/serve_html.h).
#include "report/serve_html.h"

#include <fmt/format.h>

#include "report/chart.h"
#include "report/page.h"
#include "report/svg.h"

namespace pentamesh::report {
namespace {

constexpr double kGB = 1e9;
constexpr double kMs = 1e3;

std::string Table(const std::vector<cost::ServeEstimate>& rows) {
  std::string out =
      "<table><tr><th>layout</th><th>GPUs</th><th>memory GB/GPU</th><th>KV GB/request/GPU</th>"
      "<th>TTFT p95 ms</th><th>ITL ms</th><th>output tokens/s/GPU</th><th>USD/request</th>"
      "<th>USD/M output tokens</th></tr>";
  for (const cost::ServeEstimate& e : rows) {
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.2f}</td><td>{:.0f}</td><td>{:.1f}</td>"
        "<td>{:.1f}</td><td>{:.4f}</td><td>{:.2f}</td></tr>",
        Escape(cost::FormatServeLayout(e.layout)), e.layout.gpus(), e.memory.total / kGB,
        e.kv_bytes_per_request_gpu / kGB, e.ttft_p95_s * kMs, e.itl_s * kMs,
        e.output_tokens_per_s_gpu, e.usd_per_request, e.usd_per_million_output_tokens);
  }
  return out + "</table>";
}

std::string LatencyChart(const std::vector<cost::ServeEstimate>& rows, const std::string& id,
                         const std::string& title, double cost::ServeEstimate::*field) {
  std::vector<std::string> layouts;
  std::vector<double> values;
  for (const cost::ServeEstimate& e : rows) {
    layouts.push_back(cost::FormatServeLayout(e.layout));
    values.push_back(e.*field * kMs);
  }
  BarChart chart(id, "layout", layouts, ChartAxis(title));
  chart.series.emplace_back(title, values);
  return BarChartHtml(chart);
}

}  // namespace

std::string ServeHtml(const std::string& title, const std::vector<cost::ServeEstimate>& rows) {
  std::string out = fmt::format("<h1>pentamesh serve: {}</h1>", Escape(title));
  out += "<p class=\"note\">Best first. docs/COST_MODEL.md, \"Inference\", states the model.</p>";
  out += Table(rows);
  out += "<h2>p95 time to first token</h2>";
  out += LatencyChart(rows, "ttft", "TTFT p95 (ms)", &cost::ServeEstimate::ttft_p95_s);
  out += "<h2>Inter-token latency</h2>";
  out += LatencyChart(rows, "itl", "ITL (ms)", &cost::ServeEstimate::itl_s);
  return HtmlPage("pentamesh serve", out, {.charts = true, .extra_style = ""});
}

}  // namespace pentamesh::report

// libFuzzer target for the training run's metrics.jsonl reader (report/run_report.h): arbitrary
// bytes as the text of a metrics.jsonl, parsed by report::ParseRunMetrics and, when it parses,
// rendered by report::RenderRunHtml as `pentamesh report` does. Parsing must return the steps or
// a Status naming the file and line, never crash or throw; a parsed file has at least one step;
// the page renders for whatever the parser accepted.
#include <cstddef>
#include <cstdint>
#include <string>

#include "report/run_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto run = report::ParseRunMetrics(text, "metrics.jsonl");
  if (!run.ok()) {
    if (run.status().message().find("metrics.jsonl") == std::string::npos) __builtin_trap();
    return 0;
  }
  if (run->steps.empty()) __builtin_trap();
  const std::string html = report::RenderRunHtml(*run);
  if (html.empty()) __builtin_trap();
  return 0;
}

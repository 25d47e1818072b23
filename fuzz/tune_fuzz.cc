// libFuzzer target for tune's reader of a run's measurements (tune/tune.h ReadMeasured, which
// `pentamesh tune` applies to each run's metrics.jsonl): the first byte picks the run's step count
// (1-64, which sets the warm-up steps left out), the rest is the text of DIR/metrics.jsonl.
// Reading must fill the row's measurement or return a Status naming the file, never crash or
// throw; a measurement it accepts is finite and non-negative (step time positive), so the
// comparison table, the agreement summary and the page (tune/format.cc, tune/html.cc) have
// numbers to show.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tune/tune.h"

namespace {

const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/pm_tune_fuzz_XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  return dir;
}

bool Finite(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  if (size == 0) return 0;
  const int steps = 1 + data[0] % 64;
  {
    std::ofstream out(Dir() + "/metrics.jsonl", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  tune::Row row;
  row.dir = Dir();
  row.ranks = 2;
  row.predicted.time.step = 1;
  const core::Status s = tune::ReadMeasured(row, steps);
  if (!s.ok()) {
    if (s.message().find("metrics.jsonl") == std::string::npos || row.measured) __builtin_trap();
    return 0;
  }
  if (!row.measured) __builtin_trap();
  const tune::Measured& m = *row.measured;
  bool ok = m.step_time_s > 0 && Finite(m.step_time_s) && Finite(m.tokens_per_s) && Finite(m.mfu) &&
            Finite(m.peak_total) && Finite(m.final_loss) && m.steps_measured > 0;
  for (double b : m.peak_bytes) ok = ok && Finite(b);
  for (const auto& v : {m.bubble, m.expert_imbalance, m.max_expert_share}) {
    ok = ok && (!v || Finite(*v));
  }
  for (const auto& [term, v] : m.comm_time_s.items())
    ok = ok && v.is_number() && Finite(v.get<double>());
  if (!ok) {
    std::fprintf(stderr,
                 "tune_fuzz: accepted a measurement with a bad number: step %g tps %g "
                 "mfu %g peak %g loss %g\n",
                 m.step_time_s, m.tokens_per_s, m.mfu, m.peak_total, m.final_loss);
    __builtin_trap();
  }
  // The summary over a planned and a second measured row (ranks and Spearman).
  std::vector<tune::Row> rows = {row, row};
  rows[1].predicted.time.step = 2;
  rows[1].predicted_rank = 2;
  rows[0].predicted_rank = 1;
  const tune::Summary sum = tune::Summarize(rows);
  if (sum.measured_runs != 2 || !std::isfinite(sum.median_abs_error)) __builtin_trap();
  return 0;
}

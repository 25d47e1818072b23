// libFuzzer target for the calibration runs reader (calib/runs.h): arbitrary bytes as a runs JSON
// file (bench/data/published_runs.json's format), parsed by spec::ParseJson and mapped by
// calib::RunsFromJson as `calibrate`/`validate` do. It must return the runs or a Status, never
// crash or throw; every run is usable (a positive finite throughput, a layout of at least one
// GPU) or says why not; and a usable run written back by the row writer (RunRowJson) reads back
// usable with the same layout, GPU count, SKU and throughput, as tests/calib/train_log_test.cc
// checks for the published rows.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/runs.h"
#include "spec/json_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto rows = spec::ParseJson(text, "fuzz.json");
  if (!rows.ok()) return 0;
  auto runs = calib::RunsFromJson(*rows, "fuzz.json");
  if (!runs.ok()) return 0;
  for (const calib::Run& r : *runs) {
    if (r.unreadable && r.usable()) __builtin_trap();  // a malformed row must say why
    if (!r.usable()) continue;
    if (!(r.tokens_per_s_gpu > 0) || !std::isfinite(r.tokens_per_s_gpu)) __builtin_trap();
    if (r.layout.gpus() <= 0 || r.cluster.gpus() <= 0) __builtin_trap();
    const nlohmann::json row = calib::RunRowJson(r);
    auto back = calib::RunsFromJson(nlohmann::json::array({row}), "written");
    if (!back.ok() || back->size() != 1) __builtin_trap();
    const calib::Run& b = back->front();
    if (!b.usable() || b.id != r.id || b.sku != r.sku) __builtin_trap();
    if (!(b.layout == r.layout) || b.cluster.gpus() != r.cluster.gpus()) __builtin_trap();
    if (std::abs(b.tokens_per_s_gpu - r.tokens_per_s_gpu) > 1e-9 * r.tokens_per_s_gpu) {
      __builtin_trap();
    }
  }
  return 0;
}

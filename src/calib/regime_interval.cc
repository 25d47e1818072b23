// Intervals from the calibration runs nearest the query (calib/regime_interval.h states the rule).
#include "calib/regime_interval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>

#include "calib/profile.h"
#include "calib/validate.h"
#include "core/check.h"
#include "core/quote.h"
#include "spec/load_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::calib {

Regime RegimeOf(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                const spec::TrainSpec& train, const std::string& stack) {
  return {train.seq_len,  model.is_moe(), train.precision == spec::Precision::kFp8,
          cluster.gpus(), stack,          GpuClass(cluster.name)};
}

Regime RegimeOf(const Run& run) { return RegimeOf(run.model, run.cluster, run.train, run.stack); }

std::string Describe(const Regime& r) {
  return fmt::format("{}, seq {}, {}, {} GPUs, {} on {}", r.moe ? "MoE" : "dense", r.seq_len,
                     r.fp8 ? "fp8" : "bf16", r.gpus, r.stack, r.gpu_class);
}

namespace {

double Log2Ratio(int64_t a, int64_t b) {
  return std::fabs(std::log2(static_cast<double>(std::max<int64_t>(a, 1)) /
                             static_cast<double>(std::max<int64_t>(b, 1))));
}

}  // namespace

double RegimeDistance(const Regime& a, const Regime& b) {
  return Log2Ratio(a.seq_len, b.seq_len) / kSeqDoublingsPerUnit +
         Log2Ratio(a.gpus, b.gpus) / kGpuDoublingsPerUnit + (a.moe != b.moe ? 1.0 : 0.0) +
         (a.fp8 != b.fp8 ? 1.0 : 0.0) + (a.stack != b.stack ? 1.0 : 0.0) +
         (a.gpu_class != b.gpu_class ? 1.0 : 0.0);
}

RegimeInterval IntervalNear(const std::vector<CalibrationPoint>& points, const Regime& query,
                            size_t skip) {
  std::vector<Neighbour> all;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i != skip) all.push_back({&points[i], RegimeDistance(query, points[i].regime)});
  }
  PM_CHECK(!all.empty()) << "IntervalNear: no calibration points";
  std::sort(all.begin(), all.end(), [](const Neighbour& a, const Neighbour& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.point->id < b.point->id;
  });
  size_t n = std::min(all.size(), static_cast<size_t>(kNeighbours));
  const double last = all[n - 1].distance;
  while (n < all.size() && all[n].distance <= last + 1e-12) ++n;  // every run tied with the last
  RegimeInterval iv;
  iv.used.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<double> ratios;  // measured / predicted
  double sum = 0;
  for (const Neighbour& nb : iv.used) {
    ratios.push_back(1.0 / (1.0 + nb.point->error));
    sum += nb.distance;
  }
  std::sort(ratios.begin(), ratios.end());
  // Order statistics r_(i), r_(n+1-i) (1-based): coverage (n + 1 - 2i) / (n + 1) >= 80%.
  const size_t i = std::max<size_t>(
      1,
      static_cast<size_t>(std::floor((1.0 - kIntervalCoverage) / 2 * static_cast<double>(n + 1))));
  iv.raw_lo = ratios[std::min(i, n) - 1];
  iv.raw_hi = ratios[n - std::min(i, n)];
  iv.mean_distance = sum / static_cast<double>(n);
  iv.calibrated = iv.used.front().distance < kNearDistance;
  iv.widen = std::max(1.0, iv.mean_distance / kNearDistance);
  const double centre = (std::log(iv.raw_lo) + std::log(iv.raw_hi)) / 2;
  const double half = (std::log(iv.raw_hi) - std::log(iv.raw_lo)) / 2 * iv.widen;
  iv.lo = std::exp(centre - half);
  iv.hi = std::exp(centre + half);
  return iv;
}

std::string UncalibratedNote(const std::vector<CalibrationPoint>& points, const Regime& query,
                             const RegimeInterval& iv) {
  PM_CHECK(!iv.calibrated && !iv.used.empty());
  // The query's regime in the accuracy report's words, and whether any run shares all of them.
  std::vector<std::string> words;
  if (query.moe) words.push_back("MoE");
  if (query.seq_len >= 32768) words.push_back("seq >= 32K");
  if (query.fp8) words.push_back("FP8");
  if (query.gpus >= 1024) words.push_back(">= 1,024 GPUs");
  int sharing = 0;
  for (const CalibrationPoint& p : points) {
    const Regime& r = p.regime;
    sharing += r.gpu_class == query.gpu_class && (!query.moe || r.moe) &&
               (query.seq_len < 32768 || r.seq_len >= 32768) && (!query.fp8 || r.fp8) &&
               (query.gpus < 1024 || r.gpus >= 1024);
  }
  std::string what;
  for (const std::string& w : words) what += (what.empty() ? "" : ", ") + w;
  const Neighbour& near = iv.used.front();
  const std::string nearest =
      fmt::format("nearest: {} ({}) at distance {:.2f} >= {:.0f}", near.point->id,
                  Describe(near.point->regime), near.distance, kNearDistance);
  if (sharing == 0 && !what.empty()) {
    return fmt::format("no calibration run with {} on {}; {}", what, query.gpu_class, nearest);
  }
  return fmt::format("no calibration run closer than {:.0f} to {}; {}", kNearDistance,
                     Describe(query), nearest);
}

namespace {
constexpr std::string_view kKeys[] = {"id",   "group", "stack", "gpu",   "seq",
                                      "gpus", "moe",   "fp8",   "error", "error_from"};
}  // namespace

core::Result<std::vector<CalibrationPoint>> PointsFromToml(const std::string& text,
                                                           const std::string& source) {
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, source));
  for (const auto& [key, node] : root) {
    if (key.str() != "run") {
      return core::Status::Error(fmt::format("{}: unknown key '{}' (run)", source, key.str()));
    }
  }
  const toml::array* runs = root["run"].as_array();
  if (runs == nullptr) return core::Status::Error(source + ": missing `run` array");
  std::vector<CalibrationPoint> out;
  for (size_t i = 0; i < runs->size(); ++i) {
    const toml::table* t = runs->get(i)->as_table();
    const std::string where = fmt::format("{}: run[{}]", source, i);
    if (t == nullptr) return core::Status::Error(where + ": not a table");
    for (const auto& [key, node] : *t) {
      if (std::find(std::begin(kKeys), std::end(kKeys), key.str()) == std::end(kKeys)) {
        return core::Status::Error(fmt::format("{}: unknown key '{}'", where, key.str()));
      }
    }
    CalibrationPoint p;
    const auto id = (*t)["id"].value<std::string>();
    const auto group = (*t)["group"].value<std::string>();
    const auto stack = (*t)["stack"].value<std::string>();
    const auto gpu = (*t)["gpu"].value<std::string>();
    const auto seq = (*t)["seq"].value<int64_t>();
    const auto gpus = (*t)["gpus"].value<int64_t>();
    const auto moe = (*t)["moe"].value<bool>();
    const auto fp8 = (*t)["fp8"].value<bool>();
    const auto error = (*t)["error"].value<double>();
    const auto from = (*t)["error_from"].value<std::string>();
    if (!id || !group || !stack || !gpu || !seq || !gpus || !moe || !fp8 || !error || !from) {
      return core::Status::Error(
          where + ": needs id, group, stack, gpu, seq, gpus, moe, fp8, error and error_from");
    }
    if (*seq < 1 || *gpus < 1 || !(*error > -1) || !std::isfinite(*error)) {
      return core::Status::Error(where + " '" + *id + "': needs seq >= 1, gpus >= 1, error > -1");
    }
    p.id = *id;
    p.group = *group;
    p.regime = {*seq, *moe, *fp8, *gpus, *stack, *gpu};
    p.error = *error;
    p.error_from = *from;
    out.push_back(std::move(p));
  }
  if (out.empty()) return core::Status::Error(source + ": no runs");
  return out;
}

core::Result<std::vector<CalibrationPoint>> ShippedPoints() {
  const auto text = spec::PresetText("calibration", "runs");
  if (!text) return core::Status::Error("preset calibration/runs is missing");
  return PointsFromToml(*text, "preset calibration/runs");
}

std::string PointsToml(const std::vector<CalibrationPoint>& points) {
  std::string out = "run = [\n";
  for (const CalibrationPoint& p : points) {
    const Regime& r = p.regime;
    out += fmt::format(
        "  {{ id = {}, group = {}, stack = {}, gpu = {}, seq = {}, gpus = {}, moe = {}, fp8 = {}, "
        "error = {:.4f}, error_from = {} }},\n",
        core::TomlString(p.id), core::TomlString(p.group), core::TomlString(r.stack),
        core::TomlString(r.gpu_class), r.seq_len, r.gpus, r.moe, r.fp8, p.error,
        core::TomlString(p.error_from));
  }
  return out + "]\n";
}

std::vector<CoverageRow> LeaveOneOutCoverage(const std::vector<CalibrationPoint>& points) {
  const std::vector<std::pair<std::string, bool (*)(const Regime&)>> regimes = {
      {"all", [](const Regime&) { return true; }},
      {"MoE", [](const Regime& r) { return r.moe; }},
      {"seq >= 32K", [](const Regime& r) { return r.seq_len >= 32768; }},
      {"FP8", [](const Regime& r) { return r.fp8; }},
      {">= 1,024 GPUs", [](const Regime& r) { return r.gpus >= 1024; }},
      {"dense", [](const Regime& r) { return !r.moe; }},
  };
  std::vector<CoverageRow> rows(regimes.size());
  std::vector<std::vector<double>> regime_widths(regimes.size()), stack_widths(regimes.size());
  for (size_t k = 0; k < regimes.size(); ++k) rows[k].regime = regimes[k].first;
  for (size_t i = 0; i < points.size(); ++i) {
    const CalibrationPoint& p = points[i];
    const double ratio = 1.0 / (1.0 + p.error);
    const RegimeInterval iv = IntervalNear(points, p.regime, i);
    // The stack-wide interval without this run: the 10th-90th percentile of the others of its
    // stack and GPU class (IntervalsFrom), used when they are at least 3 (IntervalFor).
    std::vector<double> same;
    for (size_t j = 0; j < points.size(); ++j) {
      if (j != i && points[j].regime.stack == p.regime.stack &&
          points[j].regime.gpu_class == p.regime.gpu_class) {
        same.push_back(1.0 / (1.0 + points[j].error));
      }
    }
    const bool has_stack = same.size() >= 3;
    const double slo = Quantile(same, 0.1), shi = Quantile(same, 0.9);
    for (size_t k = 0; k < regimes.size(); ++k) {
      if (!regimes[k].second(p.regime)) continue;
      CoverageRow& row = rows[k];
      ++row.n;
      row.regime_inside += ratio >= iv.lo && ratio <= iv.hi;
      row.uncalibrated += !iv.calibrated;
      regime_widths[k].push_back(std::log(iv.hi / iv.lo));
      if (has_stack) {
        ++row.stack_n;
        row.stack_inside += ratio >= slo && ratio <= shi;
        stack_widths[k].push_back(std::log(shi / slo));
      }
    }
  }
  for (size_t k = 0; k < regimes.size(); ++k) {
    rows[k].regime_log_width = Quantile(regime_widths[k], 0.5);
    rows[k].stack_log_width = Quantile(stack_widths[k], 0.5);
  }
  return rows;
}

}  // namespace pentamesh::calib

// `pentamesh validate --runs FILE.json [--cv] [--json] [--html OUT]`: predicts measured runs (the
// published-runs format) and prints each row's error and each group's statistics, why a row
// cannot be estimated, and with --cv the in-sample, k-fold and leave-one-group-out errors of a
// fresh fit. A row that cannot be read is reported by index and reason while the others are
// validated; the exit status is then 2 (bad input), else 0. Thin: parse, call calib::ValidateRuns,
// print.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "calib/fit.h"
#include "calib/runs.h"
#include "calib/validate.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/output.h"
#include "report/calib_html.h"

namespace pentamesh::cli {
namespace {

struct ValidateArgs {
  std::string runs;
  bool cv = false;
  int folds = 5;
  uint64_t seed = 1;
  bool json = false;
  bool rows = true;
  std::string html;
  std::string write_presets;
};

std::string Pct(double x) { return fmt::format("{:+.1f}%", 100.0 * x); }
std::string AbsPct(double x) { return fmt::format("{:.1f}%", 100.0 * x); }

void PrintStatsLine(const char* what, const calib::ErrorStats& s) {
  fmt::print("  {:<22} n {:>3}  median |err| {:>6}  p90 |err| {:>6}  signed median {:>7}\n", what,
             s.n, AbsPct(s.median_abs), AbsPct(s.p90_abs), Pct(s.median_signed));
}

void PrintSummary(const calib::GroupSummary& g, bool cv) {
  if (cv) {
    fmt::print("  {:<28} {:>3}  {:>7} {:>7}  {:>7} {:>7}  {:>7} {:>7}  {:>7} {:>7}\n", g.group,
               g.shipped.n, AbsPct(g.shipped.median_abs), Pct(g.shipped.median_signed),
               AbsPct(g.fit.median_abs), Pct(g.fit.median_signed), AbsPct(g.kfold.median_abs),
               Pct(g.kfold.median_signed), AbsPct(g.logo.median_abs), Pct(g.logo.median_signed));
  } else {
    fmt::print("  {:<28} {:>3}  {:>7} {:>7}  p90 {:>7}\n", g.group, g.shipped.n,
               AbsPct(g.shipped.median_abs), Pct(g.shipped.median_signed),
               AbsPct(g.shipped.p90_abs));
  }
}

void PrintText(const calib::Validation& v, const std::string& path, bool rows) {
  fmt::print("pentamesh validate: {} ({} runs, {} estimated, {} not)\n", path,
             v.rows.size() + v.unusable.size(), v.rows.size(), v.unusable.size());
  if (rows) {
    fmt::print("\n  {:<58} {:<10} {:<11} {:>10} {:>10} {:>7}", "run", "stack", "gpu", "measured",
               "predicted", "error");
    if (v.cross_validated) fmt::print(" {:>7} {:>7} {:>7}", "fit", "k-fold", "logo");
    fmt::print(" {:>9}\n", "memory");
    for (const calib::RowResult& r : v.rows) {
      fmt::print("  {:<58} {:<10} {:<11} {:>10.0f} {:>10.0f} {:>7}", r.run->id.substr(0, 58),
                 r.run->stack, r.run->cluster.name, r.run->tokens_per_s_gpu,
                 r.shipped.tokens_per_s_gpu, Pct(r.shipped.error));
      if (v.cross_validated) {
        fmt::print(" {:>7} {:>7} {:>7}", Pct(r.fit_error), Pct(r.kfold_error), Pct(r.logo_error));
      }
      if (r.run->memory_gib) {
        fmt::print(" {:>4.0f}/{:<4.0f}", r.shipped.memory_gib, *r.run->memory_gib);
      }
      fmt::print("\n");
    }
  }
  if (!v.unusable.empty()) {
    fmt::print("\nnot estimated:\n");
    for (const calib::Run* r : v.unusable) {
      fmt::print("  row {} '{}': {}{}\n", r->index, r->id, r->unreadable ? "unreadable: " : "",
                 r->unusable);
    }
  }
  fmt::print("\nby source group (tokens/s per GPU: median |error|, signed median)\n");
  if (v.cross_validated) {
    fmt::print("  {:<28} {:>3}  {:>15}  {:>15}  {:>15}  {:>15}\n", "group", "n", "shipped",
               "fit (in-sample)", "5-fold", "leave-group-out");
  }
  for (const auto& g : v.groups) PrintSummary(g, v.cross_validated);
  fmt::print("by GPU\n");
  for (const auto& g : v.gpus) PrintSummary(g, v.cross_validated);
  fmt::print("by regime (|error|: median / p90; a run counts in every regime it is in)\n");
  if (v.cross_validated) {
    fmt::print("  {:<28} {:>3}  {:>15}  {:>15}  {:>15}\n", "regime", "n", "shipped", "5-fold",
               "leave-group-out");
  }
  for (const auto& g : v.regimes) {
    auto pair = [](const calib::ErrorStats& e) {
      return e.n == 0 ? std::string("-") : AbsPct(e.median_abs) + " / " + AbsPct(e.p90_abs);
    };
    fmt::print("  {:<28} {:>3}  {:>15}", g.group, g.shipped.n, pair(g.shipped));
    if (v.cross_validated) fmt::print("  {:>15}  {:>15}", pair(g.kfold), pair(g.logo));
    fmt::print("\n");
  }
  fmt::print("\nall runs\n");
  PrintStatsLine("shipped calibration", v.all.shipped);
  if (v.cross_validated) {
    PrintStatsLine("fit, in-sample", v.all.fit);
    PrintStatsLine("k-fold", v.all.kfold);
    PrintStatsLine("leave-one-group-out", v.all.logo);
    fmt::print("\nfitted on all runs:");
    for (const auto& [name, value] : v.fitted) fmt::print(" {}={:.4g}", name, value);
    fmt::print("\n");
  }
  if (v.all.memory.n > 0) PrintStatsLine("memory (published)", v.all.memory);
}

nlohmann::json StatsJson(const calib::ErrorStats& s) {
  return {{"n", s.n},
          {"median_abs", s.median_abs},
          {"p90_abs", s.p90_abs},
          {"median_signed", s.median_signed},
          {"mean_abs", s.mean_abs}};
}

nlohmann::json ToJson(const calib::Validation& v) {
  nlohmann::json j;
  j["rows"] = nlohmann::json::array();
  for (const calib::RowResult& r : v.rows) {
    nlohmann::json row = {{"id", r.run->id},
                          {"group", r.run->group},
                          {"stack", r.run->stack},
                          {"gpu", r.run->cluster.name},
                          {"gpus", r.run->cluster.gpus()},
                          {"layout", spec::FormatLayout(r.run->layout)},
                          {"measured_tokens_per_s_gpu", r.run->tokens_per_s_gpu},
                          {"measured_from", r.run->measured_from},
                          {"predicted_tokens_per_s_gpu", r.shipped.tokens_per_s_gpu},
                          {"error", r.shipped.error},
                          {"predicted_memory_gib", r.shipped.memory_gib},
                          {"fits", r.shipped.fits},
                          {"row", r.run->index},
                          {"assumptions", r.run->assumptions}};
    if (r.run->memory_gib) row["published_memory_gib"] = *r.run->memory_gib;
    if (v.cross_validated) {
      row["fit_error"] = r.fit_error;
      row["kfold_error"] = r.kfold_error;
      row["logo_error"] = r.logo_error;
    }
    j["rows"].push_back(row);
  }
  j["unusable"] = nlohmann::json::array();
  for (const calib::Run* r : v.unusable) {
    j["unusable"].push_back({{"id", r->id},
                             {"row", r->index},
                             {"unreadable", r->unreadable},
                             {"why", r->unusable},
                             {"assumptions", r->assumptions}});
  }
  auto summary = [&](const calib::GroupSummary& g) {
    nlohmann::json s = {{"name", g.group}, {"shipped", StatsJson(g.shipped)}};
    if (v.cross_validated) {
      s["fit"] = StatsJson(g.fit);
      s["kfold"] = StatsJson(g.kfold);
      s["logo"] = StatsJson(g.logo);
    }
    if (g.memory.n > 0) s["memory"] = StatsJson(g.memory);
    return s;
  };
  for (const auto& g : v.groups) j["groups"].push_back(summary(g));
  for (const auto& g : v.gpus) j["gpus"].push_back(summary(g));
  for (const auto& g : v.regimes) j["regimes"].push_back(summary(g));
  j["all"] = summary(v.all);
  for (const auto& [name, value] : v.fitted) j["fitted"][name] = value;
  return j;
}

}  // namespace

RunFn AddValidateCommand(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* sub = app.add_subcommand(
      "validate", "Predict measured runs (published-runs JSON) and report the errors");
  sub->add_option("--runs", args->runs, "runs file (bench/data/published_runs.json format)")
      ->required();
  sub->add_flag("--cv", args->cv,
                "also fit the calibration and report in-sample, k-fold and leave-one-group-out "
                "errors");
  sub->add_option("--folds", args->folds, "k of the k-fold cross-validation")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  sub->add_option("--seed", args->seed, "seed of the k-fold shuffle")->capture_default_str();
  sub->add_flag("--json", args->json, "print JSON");
  sub->add_flag("!--no-rows", args->rows, "print only the summaries");
  sub->add_option("--html", args->html, "write a self-contained HTML report to this file")
      ->check(OutputFile());
  sub->add_option("--write-presets", args->write_presets,
                  "fit the shipped calibration on these runs and write it into this presets "
                  "directory (configs/presets: stacks/*.toml and the clusters' GPU parameters)");
  return [args]() -> int {
    auto runs = calib::LoadRuns(args->runs);
    if (!runs.ok()) return Fail(runs.status().message());
    if (!args->write_presets.empty()) {
      const calib::ShippedFit fit = calib::FitShipped(*runs, args->runs, args->folds, args->seed);
      const core::Status st = calib::WritePresets(fit, args->write_presets);
      if (!st.ok()) return Fail(st.message());
      for (const auto& p : fit.stacks) {
        fmt::print("wrote {}/stacks/{}.toml ({})\n", args->write_presets, p.name, p.fitted_on);
      }
      for (const auto& [cls, params] : fit.gpu) {
        for (const auto& [k, val] : params) fmt::print("GPU class {}: {} = {:.4f}\n", cls, k, val);
      }
      return 0;
    }
    auto shipped = calib::ShippedCalibration();
    if (!shipped.ok()) return Fail(shipped.status().message());
    const calib::Validation v =
        calib::ValidateRuns(*runs, *shipped, {args->cv, args->folds, args->seed});
    if (args->json) {
      fmt::print("{}\n", ToJson(v).dump(2));
    } else {
      PrintText(v, args->runs, args->rows);
    }
    if (!args->html.empty()) {
      if (const core::Status st =
              core::WriteFileAtomic(args->html, report::CalibrationHtml(v, args->runs));
          !st.ok())
        return Fail("--html: " + st.message());
    }
    // One bad row never sinks the file: the others are validated and printed above; the bad
    // rows are bad input all the same, so they are named on stderr and the status is 2.
    int unreadable = 0;
    for (const calib::Run* r : v.unusable) {
      if (!r->unreadable) continue;
      ++unreadable;
      fmt::print(stderr, "pentamesh: {}: row {} '{}': {}\n", args->runs, r->index, r->id,
                 r->unusable);
    }
    return unreadable > 0 ? 2 : 0;
  };
}

}  // namespace pentamesh::cli

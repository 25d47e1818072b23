// `pentamesh validate --runs FILE.json [FILE.json...] [--cv | --holdout FILE.json...] [--json]
// [--html OUT]`: predicts measured runs (the published-runs format; several files are read as one
// set) and prints each row's error and each group's statistics, why a row cannot be estimated,
// with --cv the in-sample, k-fold and leave-one-group-out errors of a fresh fit, and with --holdout
// the held-out files' rows predicted by a fit on the --runs files only. A row that cannot be read
// is reported by index and reason while the others are validated; the exit status is then 2 (bad
// input), else 0. Thin: parse, call calib::ValidateRuns, print.
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
#include "report/page.h"

namespace pentamesh::cli {
namespace {

struct ValidateArgs {
  std::vector<std::string> runs;
  std::vector<std::string> holdout;
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

void PrintSummary(const calib::GroupSummary& g, bool cv, bool held_out) {
  if (held_out) {
    fmt::print("  {:<28} {:>3}  {:>7} {:>7}  {:>7} {:>7}\n", g.group, g.shipped.n,
               AbsPct(g.shipped.median_abs), Pct(g.shipped.median_signed), AbsPct(g.fit.median_abs),
               Pct(g.fit.median_signed));
  } else if (cv) {
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
  if (v.held_out) {
    fmt::print(
        "held out: predicted by the shipped calibration and by a fit on the {} usable --runs "
        "rows only (column 'held-out fit')\n",
        v.fitted_on);
  }
  if (rows) {
    fmt::print("\n  {:<58} {:<10} {:<11} {:>10} {:>10} {:>7}", "run", "stack", "gpu", "measured",
               "predicted", "error");
    if (v.cross_validated) fmt::print(" {:>7} {:>7} {:>7}", "fit", "k-fold", "logo");
    if (v.held_out) fmt::print(" {:>12}", "held-out fit");
    fmt::print(" {:>9}\n", "memory");
    for (const calib::RowResult& r : v.rows) {
      fmt::print("  {:<58} {:<10} {:<11} {:>10.0f} {:>10.0f} {:>7}", r.run->id.substr(0, 58),
                 r.run->stack, r.run->cluster.name, r.run->tokens_per_s_gpu,
                 r.shipped.tokens_per_s_gpu, Pct(r.shipped.error));
      if (v.cross_validated) {
        fmt::print(" {:>7} {:>7} {:>7}", Pct(r.fit_error), Pct(r.kfold_error), Pct(r.logo_error));
      }
      if (v.held_out) fmt::print(" {:>12}", Pct(r.fit_error));
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
  if (v.held_out) {
    fmt::print("  {:<28} {:>3}  {:>15}  {:>15}\n", "group", "n", "shipped", "held-out fit");
  }
  for (const auto& g : v.groups) PrintSummary(g, v.cross_validated, v.held_out);
  fmt::print("by GPU\n");
  for (const auto& g : v.gpus) PrintSummary(g, v.cross_validated, v.held_out);
  fmt::print("by regime (|error|: median / p90; a run counts in every regime it is in)\n");
  if (v.cross_validated) {
    fmt::print("  {:<28} {:>3}  {:>15}  {:>15}  {:>15}\n", "regime", "n", "shipped", "5-fold",
               "leave-group-out");
  }
  if (v.held_out) {
    fmt::print("  {:<28} {:>3}  {:>15}  {:>15}\n", "regime", "n", "shipped", "held-out fit");
  }
  for (const auto& g : v.regimes) {
    auto pair = [](const calib::ErrorStats& e) {
      return e.n == 0 ? std::string("-") : AbsPct(e.median_abs) + " / " + AbsPct(e.p90_abs);
    };
    fmt::print("  {:<28} {:>3}  {:>15}", g.group, g.shipped.n, pair(g.shipped));
    if (v.cross_validated) fmt::print("  {:>15}  {:>15}", pair(g.kfold), pair(g.logo));
    if (v.held_out) fmt::print("  {:>15}", pair(g.fit));
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
  if (v.held_out) {
    PrintStatsLine("held-out fit", v.all.fit);
    fmt::print("\nfitted on the --runs rows only:");
    for (const auto& [name, value] : v.fitted) fmt::print(" {}={:.4g}", name, value);
    fmt::print("\n");
  }
  if (v.all.memory.n > 0) PrintStatsLine("memory (published)", v.all.memory);
  fmt::print("  ran, predicted over capacity {} of {} runs\n", v.all.over_capacity,
             v.all.shipped.n);
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
    row["file"] = r.run->file;
    if (v.held_out) row["held_out_fit_error"] = r.fit_error;
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
                             {"file", r->file},
                             {"row", r->index},
                             {"unreadable", r->unreadable},
                             {"why", r->unusable},
                             {"assumptions", r->assumptions}});
  }
  auto summary = [&](const calib::GroupSummary& g) {
    nlohmann::json s = {{"name", g.group}, {"shipped", StatsJson(g.shipped)}};
    if (v.held_out) s["held_out_fit"] = StatsJson(g.fit);
    if (v.cross_validated) {
      s["fit"] = StatsJson(g.fit);
      s["kfold"] = StatsJson(g.kfold);
      s["logo"] = StatsJson(g.logo);
    }
    if (g.memory.n > 0) s["memory"] = StatsJson(g.memory);
    s["over_capacity"] = g.over_capacity;
    return s;
  };
  for (const auto& g : v.groups) j["groups"].push_back(summary(g));
  for (const auto& g : v.gpus) j["gpus"].push_back(summary(g));
  for (const auto& g : v.regimes) j["regimes"].push_back(summary(g));
  j["all"] = summary(v.all);
  for (const auto& [name, value] : v.fitted) j["fitted"][name] = value;
  if (v.held_out) j["fitted_on_runs"] = v.fitted_on;
  return j;
}

}  // namespace

RunFn AddValidateCommand(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* sub = app.add_subcommand(
      "validate", "Predict measured runs (published-runs JSON) and report the errors");
  sub->add_option("--runs", args->runs,
                  "runs files (bench/data/published_runs.json format), read as one set")
      ->required()
      ->expected(1, -1);
  CLI::Option* holdout =
      sub->add_option("--holdout", args->holdout,
                      "held-out runs files: predicted by a fit on the --runs rows only")
          ->expected(1, -1);
  sub->add_flag("--cv", args->cv,
                "also fit the calibration and report in-sample, k-fold and leave-one-group-out "
                "errors")
      ->excludes(holdout);
  sub->add_option("--folds", args->folds, "k of the k-fold cross-validation")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  sub->add_option("--seed", args->seed, "seed of the k-fold shuffle")->capture_default_str();
  sub->add_flag("--json", args->json, "print JSON");
  sub->add_flag("!--no-rows", args->rows, "print only the summaries");
  sub->add_option("--html", args->html, "write a self-contained HTML report to this file")
      ->check(OutputFile());
  sub->add_option(
      "--write-presets", args->write_presets,
      "fit the shipped calibration on these runs and write it into this presets "
      "directory (configs/presets: stacks/*.toml, the clusters' GPU parameters and "
      "calibration/runs.toml, the regime intervals' runs with --holdout's beside them)");
  return [args]() -> int {
    auto runs = calib::LoadRunFiles(args->runs);
    if (!runs.ok()) return Fail(runs.status().message());
    std::string runs_names;
    for (const std::string& f : args->runs) runs_names += (runs_names.empty() ? "" : " + ") + f;
    if (!args->write_presets.empty()) {
      // --holdout rows enter only the regime intervals' table, with their errors under the fit.
      std::vector<calib::Run> held_out;
      if (!args->holdout.empty()) {
        auto h = calib::LoadRunFiles(args->holdout);
        if (!h.ok()) return Fail(h.status().message());
        held_out = std::move(*h);
      }
      const calib::ShippedFit fit =
          calib::FitShipped(*runs, runs_names, args->folds, args->seed, held_out);
      const core::Status st = calib::WritePresets(fit, args->write_presets);
      if (!st.ok()) return Fail(st.message());
      for (const auto& p : fit.stacks) {
        fmt::print("wrote {}/stacks/{}.toml ({})\n", args->write_presets, p.name, p.fitted_on);
      }
      fmt::print("wrote {}/calibration/runs.toml ({} runs with out-of-fold errors)\n",
                 args->write_presets, fit.points.size());
      for (const auto& [cls, params] : fit.gpu) {
        for (const auto& [k, val] : params) fmt::print("GPU class {}: {} = {:.4f}\n", cls, k, val);
      }
      return 0;
    }
    auto shipped = calib::ShippedCalibration();
    if (!shipped.ok()) return Fail(shipped.status().message());
    // With --holdout the rows reported are the held-out files' (the --runs files only fit).
    std::vector<calib::Run> held;
    std::string shown = runs_names;
    if (!args->holdout.empty()) {
      auto h = calib::LoadRunFiles(args->holdout);
      if (!h.ok()) return Fail(h.status().message());
      held = std::move(*h);
      shown.clear();
      for (const std::string& f : args->holdout) shown += (shown.empty() ? "" : " + ") + f;
    }
    const calib::Validation v =
        args->holdout.empty()
            ? calib::ValidateRuns(*runs, *shipped, {args->cv, args->folds, args->seed})
            : calib::ValidateHeldOut(*runs, held, *shipped);
    if (args->json) {
      fmt::print("{}\n", ToJson(v).dump(2));
    } else {
      PrintText(v, shown, args->rows);
    }
    if (!args->html.empty()) {
      if (const core::Status st = report::WritePage(args->html, report::CalibrationHtml(v, shown));
          !st.ok())
        return Fail(st.message());
    }
    // One bad row never sinks the file: the others are validated and printed above; the bad
    // rows are bad input all the same, so they are named on stderr and the status is 2.
    int unreadable = 0;
    for (const calib::Run* r : v.unusable) {
      if (!r->unreadable) continue;
      ++unreadable;
      fmt::print(stderr, "pentamesh: {}: row {} '{}': {}\n", r->file, r->index, r->id, r->unusable);
    }
    return unreadable > 0 ? 2 : 0;
  };
}

}  // namespace pentamesh::cli

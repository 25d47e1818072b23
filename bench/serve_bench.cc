// serve_bench: the engine profiles (cost::ServeEngineProfile) against serving measurements
// (bench/data/serving_runs.json, bench/data/published_serving.json), and the speed of the
// capacity search. bench/serving.sh runs it; docs/COST_MODEL.md ("Engine profiles") quotes it.
//   serve_bench [--rows] FILE... [--check FILE...]
// --check: the files after it are not fitted: the shipped profiles' errors on them (Check).
// --rows: instead of the held-out errors, every row's measured and in-sample simulated TTFT and
// TPOT (and their ratios), one a line, then the in-sample errors by the number of clients.
// Prints, per engine: the profile fitted on all its rows, the shipped profile's errors and the
// fit's in-sample errors; 5-fold
// (rows in name order, fold = index mod 5) and leave-one-source-out (the row's "group"),
// leave-one-GPU-out and leave-one-model-out errors: median and p90 |predicted/measured - 1|
// per metric (TTFT, TPOT, fixed-batch latency); the "none" profile's errors for comparison; the
// closed loops at concurrency 1, 10, 100 next to the measurements.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "calib/profile.h"
#include "plan/serve.h"
#include "plan/serve_fit.h"
#include "spec/load_toml.h"

namespace pm = pentamesh;

namespace {

pm::core::Result<pm::cost::Context> MakeContext(const std::string& model,
                                                const std::string& cluster) {
  auto m = pm::spec::LoadModel(model);
  if (!m.ok()) return m.status();
  auto c = pm::spec::LoadCluster(cluster, std::nullopt);
  if (!c.ok()) return c.status();
  auto stack = pm::calib::LoadProfile("megatron");
  if (!stack.ok()) return stack.status();
  pm::cost::CostParams params;
  pm::calib::ApplyProfile(*stack, *c, params);
  return pm::cost::ServeContext(*m, *c, params);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto k =
      static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(v.size()))) - 1);
  return v[k];
}

using Predictions = std::map<std::string, pm::plan::ServeRunPrediction>;  // by run name

// |error| per metric over `runs` with `pred`, printed as one line.
void PrintErrors(const std::string& label, const std::vector<const pm::plan::ServeRun*>& runs,
                 const Predictions& pred) {
  std::map<std::string, std::vector<double>> by_metric;
  int refused = 0;
  for (const pm::plan::ServeRun* run : runs) {
    const auto& p = pred.at(run->name);
    if (!p.fits) ++refused;
    for (const pm::plan::ServeError& e : pm::plan::ServeErrors(*run, p)) {
      by_metric[e.metric].push_back(std::abs(e.ratio - 1.0));
      // TTFT under load (several clients: prompts batched and queued) on its own as well.
      if (e.metric == "ttft" && run->traffic.concurrency > 1) {
        by_metric["ttft(c>1)"].push_back(std::abs(e.ratio - 1.0));
      }
    }
  }
  std::string line = fmt::format("  {:<26}", label);
  for (const auto& [metric, v] : by_metric) {
    line += fmt::format("  {} n={:<3} median {:5.1f}% p90 {:5.1f}%", metric, v.size(),
                        100 * Quantile(v, 0.5), 100 * Quantile(v, 0.9));
  }
  fmt::print("{}  refused {}\n", line, refused);
}

// Each run's measured and predicted TTFT and TPOT (ms) and their ratios, one a line.
// `none`, where given: a fixed batch's row also shows the roofline's ("none") prediction.
void PrintRows(const std::vector<const pm::plan::ServeRun*>& runs, const Predictions& pred,
               const Predictions* none = nullptr) {
  for (const pm::plan::ServeRun* r : runs) {
    const auto& p = pred.at(r->name);
    if (r->batch_s > 0) {  // a fixed batch: the time its last request finishes
      const auto ratio = [&](const pm::plan::ServeRunPrediction& q) {
        return q.fits ? q.batch_s / r->batch_s : 0.0;
      };
      fmt::print("    {:<62} n {:>5}  batch s {:7.1f} / {:7.1f} ({:4.2f})", r->name,
                 r->traffic.requests, r->batch_s, p.batch_s, ratio(p));
      if (none != nullptr)
        fmt::print("  none {:7.1f} ({:4.2f})", none->at(r->name).batch_s, ratio(none->at(r->name)));
      fmt::print("\n");
      continue;
    }
    fmt::print(
        "    {:<62} c {:>3}  TTFT {:9.1f} / {:9.1f} ({:5.2f})  TPOT {:7.2f} / {:7.2f} ({:5.2f})\n",
        r->name, r->traffic.concurrency, r->ttft_s * 1e3, p.ttft_s * 1e3,
        r->ttft_s > 0 ? p.ttft_s / r->ttft_s : 0.0, r->tpot_s * 1e3, p.tpot_s * 1e3,
        r->tpot_s > 0 ? p.tpot_s / r->tpot_s : 0.0);
  }
}

// Predictions of every run in `runs` from a profile fitted on the others of the same key.
template <typename Key>
Predictions HeldOut(const std::vector<const pm::plan::ServeRun*>& runs, const std::string& engine,
                    Key key) {
  std::set<std::string> keys;
  for (size_t i = 0; i < runs.size(); ++i) keys.insert(key(i, *runs[i]));
  Predictions out;
  for (const std::string& k : keys) {
    std::vector<const pm::plan::ServeRun*> train, test;
    for (size_t i = 0; i < runs.size(); ++i)
      (key(i, *runs[i]) == k ? test : train).push_back(runs[i]);
    const pm::cost::ServeEngineProfile profile =
        train.empty() ? pm::cost::ServeEngineProfile{} : pm::plan::FitServeProfile(train, engine);
    for (const pm::plan::ServeRun* run : test)
      out[run->name] = pm::plan::PredictServeRun(*run, profile);
  }
  return out;
}

}  // namespace

// --check: the shipped profiles (never refitted) and "none" on rows no fit sees, by engine and by
// config (model-GPU-tp-precision of the row's engine), with each row's measured and simulated
// TTFT and TPOT.
void Check(const std::vector<pm::plan::ServeRun>& check) {
  std::map<std::string, std::vector<const pm::plan::ServeRun*>> by_engine;
  for (const auto& r : check) by_engine[r.engine].push_back(&r);
  for (const auto& [engine, runs] : by_engine) {
    const pm::cost::ServeEngineProfile* shipped = pm::cost::FindServeEngineProfile(engine);
    const pm::cost::ServeEngineProfile profile =
        shipped ? *shipped : pm::cost::ServeEngineProfile{};
    fmt::print("== check, {}: {} rows not fitted, profile {}\n", engine, runs.size(),
               shipped ? engine : "none (no shipped profile)");
    Predictions none, with;
    for (const auto* r : runs) {
      none[r->name] = pm::plan::PredictServeRun(*r, {});
      with[r->name] = pm::plan::PredictServeRun(*r, profile);
    }
    PrintErrors("profile none", runs, none);
    if (shipped) PrintErrors("shipped profile", runs, with);
    std::map<std::string, std::vector<const pm::plan::ServeRun*>> by_config;
    for (const auto* r : runs) by_config[r->config].push_back(r);
    for (const auto& [config, rs] : by_config) PrintErrors(config, rs, with);
    PrintRows(runs, with, &none);
  }
}

int main(int argc, char** argv) {
  std::vector<pm::plan::ServeRun> all, check;
  bool rows = false, checking = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--rows") {
      rows = true;
      continue;
    }
    if (std::string(argv[i]) == "--check") {
      checking = true;
      continue;
    }
    auto runs = pm::plan::LoadServeRuns(argv[i], MakeContext);
    if (!runs.ok()) {
      fmt::print(stderr, "serve_bench: {}\n", runs.status().message());
      return 2;
    }
    for (auto& r : *runs) (checking ? check : all).push_back(std::move(r));
  }
  if (!check.empty()) {
    std::sort(check.begin(), check.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    Check(check);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<std::string, std::vector<const pm::plan::ServeRun*>> by_engine;
  for (const auto& r : all) by_engine[r.engine].push_back(&r);
  for (const auto& [engine, runs] : by_engine) {
    const auto t0 = std::chrono::steady_clock::now();
    const pm::cost::ServeEngineProfile fit = pm::plan::FitServeProfile(runs, engine);
    const double fit_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::set<std::string> groups, configs;
    for (const auto* r : runs) {
      groups.insert(r->group);
      configs.insert(r->config);
    }
    fmt::print(
        "== {}: {} rows, {} sources, {} configs; fitted on all (took {:.1f} s): step {:.3f} ms, "
        "per request {:.1f} us, attention efficiency {:.3f}, front end {:.2f} ms a request\n",
        engine, runs.size(), groups.size(), configs.size(), fit_s, fit.step_overhead_s * 1e3,
        fit.seq_overhead_s * 1e6, fit.attention_efficiency, fit.frontend_s * 1e3);
    Predictions none, in_sample;
    for (const auto* r : runs) {
      none[r->name] = pm::plan::PredictServeRun(*r, {});
      in_sample[r->name] = pm::plan::PredictServeRun(*r, fit);
    }
    PrintErrors("profile none", runs, none);
    // The shipped profile (cost::FindServeEngineProfile), which the fit above should reproduce.
    if (const pm::cost::ServeEngineProfile* shipped = pm::cost::FindServeEngineProfile(engine)) {
      Predictions with_shipped;
      for (const auto* r : runs) with_shipped[r->name] = pm::plan::PredictServeRun(*r, *shipped);
      PrintErrors("shipped profile", runs, with_shipped);
    }
    PrintErrors("in-sample", runs, in_sample);
    if (rows) {
      PrintRows(runs, in_sample);
      // The same errors by the number of clients.
      std::map<int64_t, std::vector<const pm::plan::ServeRun*>> by_clients;
      for (const auto* r : runs) by_clients[r->traffic.concurrency].push_back(r);
      for (const auto& [c, rs] : by_clients) {
        if (rs.size() > 1) PrintErrors(fmt::format("in-sample, {} clients", c), rs, in_sample);
      }
      continue;
    }
    PrintErrors("5-fold", runs,
                HeldOut(runs, engine, [](size_t i, const auto&) { return std::to_string(i % 5); }));
    if (groups.size() > 1) {
      PrintErrors("leave-one-source-out", runs,
                  HeldOut(runs, engine, [](size_t, const auto& r) { return r.group; }));
    }
    // A new GPU, a new model: each fitted on the rows of the others.
    PrintErrors("leave-one-GPU-out", runs,
                HeldOut(runs, engine, [](size_t, const auto& r) { return r.ctx->cluster().name; }));
    PrintErrors("leave-one-model-out", runs,
                HeldOut(runs, engine, [](size_t, const auto& r) { return r.ctx->model().name; }));
    fmt::print("  closed loops (measured / simulated with the profile; TTFT ms, TPOT ms):\n");
    for (const auto* r : runs) {
      const int64_t c = r->traffic.concurrency;
      if (c != 1 && c != 10 && c != 100) continue;
      if (r->workload.input_tokens != 2000 && r->batch_s == 0 && r->group == "nim-dli") continue;
      const auto& p = in_sample.at(r->name);
      fmt::print("    {:<58} TTFT {:8.1f} / {:8.1f}  TPOT {:6.2f} / {:6.2f}\n", r->name,
                 r->ttft_s * 1e3, p.ttft_s * 1e3, r->tpot_s * 1e3, p.tpot_s * 1e3);
    }
  }
  return 0;
}

// Engine profiles fitted on serving measurements (plan/serve_fit.h).
#include "plan/serve_fit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

namespace pentamesh::plan {
namespace {

// Closed loops: 3 requests per client (at least 8) reach a steady mix of prefills and decodes.
constexpr int64_t kRequestsPerClient = 3;
constexpr int kMaxIterations = 8;
constexpr unsigned kThreads = 2;
constexpr int64_t kMinRequests = 8;

// Parameters of the fit, in the units it steps in: ms a step, us a request, efficiency, ms of the
// front end a request. The front end's derivative step is coarse: a request's step changes by
// whole steps with it.
constexpr int kParams = 4;
constexpr std::array<double, kParams> kLower = {0.0, 0.0, 0.2, 0.0};
constexpr std::array<double, kParams> kUpper = {20.0, 500.0, 2.0, 20.0};
constexpr std::array<double, kParams> kDelta = {0.05, 1.0, 0.01, 0.25};  // derivative steps

using Params = std::array<double, kParams>;

// The fitted numbers on `base`'s name and scheduling policy.
cost::ServeEngineProfile ToProfile(const Params& x, const cost::ServeEngineProfile& base) {
  cost::ServeEngineProfile p = base;
  p.step_overhead_s = x[0] * 1e-3;
  p.seq_overhead_s = x[1] * 1e-6;
  p.attention_efficiency = x[2];
  p.frontend_s = x[3] * 1e-3;
  return p;
}

core::Status RowError(const std::string& path, size_t i, const std::string& why) {
  return core::Status::Error(fmt::format("{}: row {}: {}", path, i, why));
}

// The residuals log(predicted / measured) of every compared metric of every run (a run that does
// not fit counts as a residual of log 10 per metric, far from any fit).
std::vector<double> Residuals(const std::vector<const ServeRun*>& runs, const Params& x,
                              const cost::ServeEngineProfile& base) {
  const cost::ServeEngineProfile profile = ToProfile(x, base);
  // The runs' simulations are independent: kThreads threads take every kThreads-th run.
  std::vector<ServeRunPrediction> pred(runs.size());
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < runs.size(); i += kThreads)
        pred[i] = PredictServeRun(*runs[i], profile);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<double> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const ServeError& e : ServeErrors(*runs[i], pred[i])) {
      out.push_back(e.ratio > 0 ? std::log(e.ratio) : std::log(10.0));
    }
  }
  return out;
}

double SumSquares(const std::vector<double>& r) {
  double s = 0;
  for (double v : r) s += v * v;
  return s;
}

// Solves the kParams x kParams system a x = b (Gaussian elimination with partial pivoting).
Params Solve(std::array<Params, kParams> a, Params b) {
  for (int c = 0; c < kParams; ++c) {
    int pivot = c;
    for (int r = c + 1; r < kParams; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    if (std::abs(a[c][c]) < 1e-300) continue;
    for (int r = c + 1; r < kParams; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < kParams; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  Params x{};
  for (int c = kParams - 1; c >= 0; --c) {
    double s = b[c];
    for (int k = c + 1; k < kParams; ++k) s -= a[c][k] * x[k];
    x[c] = std::abs(a[c][c]) < 1e-300 ? 0 : s / a[c][c];
  }
  return x;
}

Params Clamp(Params x) {
  for (int i = 0; i < kParams; ++i) x[i] = std::clamp(x[i], kLower[i], kUpper[i]);
  return x;
}

}  // namespace

core::Result<std::vector<ServeRun>> LoadServeRuns(const std::string& path,
                                                  const ServeContextFn& make_context) {
  std::ifstream in(path);
  if (!in) return core::Status::Error(path + ": cannot open");
  nlohmann::json data = nlohmann::json::parse(in, nullptr, false);
  if (data.is_discarded() || !data.contains("rows") || !data["rows"].is_array()) {
    return core::Status::Error(path + ": not a JSON object with a \"rows\" array");
  }
  std::vector<ServeRun> out;
  for (size_t i = 0; i < data["rows"].size(); ++i) {
    const nlohmann::json& row = data["rows"][i];
    if (!row.is_object() || !row.contains("engine")) continue;
    try {
      ServeRun run;
      run.name = row.at("name").get<std::string>();
      run.engine = row.at("engine").get<std::string>();
      run.group = row.value("group", run.name);
      const std::string model = row.at("model"), cluster = row.at("cluster");
      const int64_t tp = row.at("tp");
      const std::string precision = row.at("precision");
      run.config = row.value("config", fmt::format("{}-{}-tp{}-{}", model, cluster, tp, precision));
      auto ctx = make_context(model, cluster);
      if (!ctx.ok()) return RowError(path, i, ctx.status().message());
      run.ctx = std::make_shared<const cost::Context>(std::move(ctx).value());
      run.layout = {.tp = tp, .ep = 1, .pp = 1, .replicas = 1};
      run.workload.input_tokens = row.at("input_tokens");
      run.workload.output_tokens = row.at("output_tokens");
      if (!cost::ParseServeWeights(precision, run.workload)) {
        return RowError(path, i,
                        fmt::format("precision: \"{}\" is not one of {}", precision,
                                    fmt::join(cost::ServeWeightsNames(), ", ")));
      }
      const int64_t clients = row.contains("concurrency") ? row.at("concurrency").get<int64_t>()
                                                          : row.at("requests").get<int64_t>();
      if (clients < 1 || run.workload.input_tokens < 1 || run.workload.output_tokens < 1) {
        return RowError(path, i, "concurrency/input_tokens/output_tokens must be >= 1");
      }
      run.workload.requests = clients;
      // The engine's step budget, when its profile names one (TensorRT-LLM's max_num_tokens), and
      // its KV cache's precision beside FP8 weights.
      const cost::ServeEngineProfile* shipped = cost::FindServeEngineProfile(run.engine);
      if (shipped != nullptr && shipped->max_batched_tokens > 0) {
        run.workload.engine.max_batched_tokens = shipped->max_batched_tokens;
      }
      run.workload.kv_fp8 = shipped != nullptr && shipped->fp8_kv_with_fp8_weights &&
                            run.workload.precision == spec::Precision::kFp8;
      // Its memory policy (a fact of the engine, whatever profile predicts the row): the KV cache
      // that fits is sized here, once (kv_blocks).
      run.workload.engine.profile.memory_fraction_of_free =
          shipped != nullptr && shipped->memory_fraction_of_free;
      // What the benchmark's engine was launched with, where the row says (else the above).
      run.workload.kv_fp8 = row.value("kv_fp8", run.workload.kv_fp8);
      run.workload.engine.max_batched_tokens =
          row.value("max_batched_tokens", run.workload.engine.max_batched_tokens);
      run.workload.engine.max_seqs = row.value("max_seqs", run.workload.engine.max_seqs);
      run.workload.engine.gpu_memory_utilization =
          row.value("gpu_memory_utilization", run.workload.engine.gpu_memory_utilization);
      run.traffic.length_range_ratio = row.value("length_range_ratio", 1.0);
      const std::string statistic = row.value("statistic", std::string("mean"));
      if (statistic != "mean" && statistic != "median") {
        return RowError(path, i, "statistic: \"" + statistic + "\" is not mean or median");
      }
      run.median = statistic == "median";
      if (!(run.traffic.length_range_ratio >= 0 && run.traffic.length_range_ratio <= 1)) {
        return RowError(path, i, "length_range_ratio must be in [0, 1]");
      }
      // The engine's and the layout's rules are the CLI's (each message names its flag).
      if (const auto broken = cost::ServeRuleViolations(*run.ctx, run.layout, run.workload);
          !broken.empty()) {
        return RowError(path, i, broken.front());
      }
      run.traffic.concurrency = clients;
      run.traffic.think_s = kClientTurnaroundS;  // a benchmark's clients
      const std::vector<std::string> compare =
          row.value("compare", std::vector<std::string>{"ttft_ms", "itl_ms"});
      for (const std::string& key : compare) {
        const double v = row.at(key).get<double>() * 1e-3;
        if (!(v > 0)) return RowError(path, i, key + " must be > 0");
        if (key == "ttft_ms") run.ttft_s = v;
        if (key == "itl_ms") run.tpot_s = v;
        if (key == "batch_ms") run.batch_s = v;
      }
      // A fixed batch (batch_ms) is one round of its requests; a closed loop runs several.
      run.traffic.requests =
          run.batch_s > 0 ? clients : std::max(kMinRequests, kRequestsPerClient * clients);
      run.traffic.requests = row.value("benchmark_requests", run.traffic.requests);
      if (run.traffic.requests < 1) return RowError(path, i, "benchmark_requests must be >= 1");
      const cost::ServeEstimate e = cost::EstimateServe(*run.ctx, run.layout, [&] {
        cost::ServeWorkload one = run.workload;
        one.requests = 1;
        return one;
      }());
      run.fits = e.fits;
      run.kv_blocks = e.kv_blocks;
      if (run.fits) run.base = cost::MakeServeStepCost(*run.ctx, run.layout, run.workload);
      out.push_back(std::move(run));
    } catch (const nlohmann::json::exception& ex) {
      return RowError(path, i, ex.what());
    }
  }
  return out;
}

ServeRunPrediction PredictServeRun(const ServeRun& run, const cost::ServeEngineProfile& profile) {
  ServeRunPrediction p;
  if (!run.fits) return p;
  cost::ServeWorkload w = run.workload;
  w.engine.profile = profile;
  const ServeSimResult r = SimulateServe(cost::ApplyServeEngineProfile(run.base, profile), w,
                                         run.kv_blocks, run.traffic);
  p.fits = r.steps > 0;
  p.ttft_s = run.median ? r.ttft_s.p50 : r.ttft_s.mean;
  p.tpot_s = run.median ? r.tpot_s.p50 : r.tpot_s.mean;
  p.batch_s = r.e2e_s.max;
  return p;
}

std::vector<ServeError> ServeErrors(const ServeRun& run, const ServeRunPrediction& p) {
  std::vector<ServeError> out;
  auto add = [&](const char* metric, double measured, double predicted) {
    if (measured > 0) out.push_back({run.name, metric, p.fits ? predicted / measured : 0.0});
  };
  add("ttft", run.ttft_s, p.ttft_s);
  add("tpot", run.tpot_s, p.tpot_s);
  add("batch", run.batch_s, p.batch_s);
  return out;
}

cost::ServeEngineProfile FitServeProfile(const std::vector<const ServeRun*>& runs,
                                         const std::string& name) {
  // The engine's scheduling policy is its shipped profile's (not fitted); a new name gets the
  // default (chunked prefill, paged KV).
  const cost::ServeEngineProfile* shipped = cost::FindServeEngineProfile(name);
  cost::ServeEngineProfile base = shipped != nullptr ? *shipped : cost::ServeEngineProfile{};
  base.name = name;
  Params x = {1.0, 10.0, 1.0, 1.0};
  std::vector<double> r = Residuals(runs, x, base);
  double cost = SumSquares(r);
  double lambda = 1e-2;
  for (int iter = 0; iter < kMaxIterations && !r.empty(); ++iter) {
    // Jacobian by forward differences (backward at the upper bound).
    std::array<std::vector<double>, kParams> jac;
    for (int k = 0; k < kParams; ++k) {
      Params y = x;
      const double h = x[k] + kDelta[k] <= kUpper[k] ? kDelta[k] : -kDelta[k];
      y[k] += h;
      const std::vector<double> ry = Residuals(runs, y, base);
      jac[k].resize(r.size());
      for (size_t i = 0; i < r.size(); ++i) jac[k][i] = (ry[i] - r[i]) / h;
    }
    std::array<Params, kParams> jtj{};
    Params jtr{};
    for (int a = 0; a < kParams; ++a) {
      for (size_t i = 0; i < r.size(); ++i) jtr[a] -= jac[a][i] * r[i];
      for (int b = 0; b < kParams; ++b) {
        for (size_t i = 0; i < r.size(); ++i) jtj[a][b] += jac[a][i] * jac[b][i];
      }
    }
    bool improved = false;
    for (int tries = 0; tries < 4; ++tries) {
      auto damped = jtj;
      for (int a = 0; a < kParams; ++a) damped[a][a] += lambda * (jtj[a][a] + 1e-9);
      const Params step = Solve(damped, jtr);
      Params y = x;
      for (int a = 0; a < kParams; ++a) y[a] += step[a];
      y = Clamp(y);
      std::vector<double> ry = Residuals(runs, y, base);
      const double cy = SumSquares(ry);
      if (cy < cost) {
        improved = cost - cy > 1e-6 * cost;
        x = y;
        r = std::move(ry);
        cost = cy;
        lambda = std::max(1e-4, lambda / 4);
        break;
      }
      lambda *= 8;
    }
    if (!improved) break;
  }
  return ToProfile(x, base);
}

}  // namespace pentamesh::plan

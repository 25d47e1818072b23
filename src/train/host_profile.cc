#include "train/host_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "spec/load_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::train {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

GemmSample TimeGemm(int64_t m, int64_t n, int64_t k, int repetitions) {
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)),
      c(static_cast<size_t>(m * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1e-3f * static_cast<float>(i % 13);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1e-3f * static_cast<float>(i % 7);
  const core::Tensor tc(c.data(), {m, n});
  const core::ConstTensor ta(a.data(), {m, k}), tb(b.data(), {k, n});
  const auto no = kernels::Trans::kNo;
  kernels::matmul(tc, ta, tb, no, no);  // warm-up: threads started, pages touched
  // Each repetition runs enough calls for ~20 ms, so small GEMMs are not timer noise.
  const double flop = 2.0 * static_cast<double>(m * n * k);
  const int calls = std::max(1, static_cast<int>(2e9 / flop));
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    const double t0 = Now();
    for (int i = 0; i < calls; ++i) kernels::matmul(tc, ta, tb, no, no);
    times.push_back((Now() - t0) / calls);
  }
  return {m, n, k, Median(times)};
}

// a[i] = b[i] + s c[i] over `threads` threads, 3 x 4 bytes an element (STREAM's count).
double TriadGbps(int threads, int repetitions) {
  const size_t n = size_t{1} << 25;  // 128 MiB an array
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto run = [&] {
    std::vector<std::thread> pool;
    const size_t chunk = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = static_cast<size_t>(t) * chunk, end = std::min(n, begin + chunk);
        for (size_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
      });
    }
    for (auto& th : pool) th.join();
  };
  run();
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r) {
    const double t0 = Now();
    run();
    rates.push_back(12.0 * static_cast<double>(n) / (Now() - t0) / 1e9);
  }
  return Median(rates);
}

// kernels::attention_forward + backward at a small model's shape (B 8, S 256, 4 query heads, 2 kv
// heads, head dim 32), in the cost model's causal FLOP count (cost/terms.cc AttentionCore).
double AttentionGflops(int repetitions) {
  const kernels::AttentionDims d{.batch = 8, .seq = 256, .heads = 4, .kv_heads = 2, .head_dim = 32};
  const int64_t rows = d.batch * d.seq;
  auto buf = [](int64_t n) { return std::vector<float>(static_cast<size_t>(n), 0.01f); };
  std::vector<float> q = buf(rows * d.heads * d.head_dim), o = q, dout = q, dq = q;
  std::vector<float> k = buf(rows * d.kv_heads * d.head_dim), v = k, dk = k, dv = k;
  std::vector<float> lse = buf(d.batch * d.heads * d.seq);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.01f * static_cast<float>(i % 17);
  const core::Shape qs{rows, d.heads, d.head_dim}, ks{rows, d.kv_heads, d.head_dim};
  const core::Shape ls{d.batch, d.heads, d.seq};
  auto once = [&] {
    kernels::attention_forward(core::Tensor(o.data(), qs), core::Tensor(lse.data(), ls),
                               core::ConstTensor(q.data(), qs), core::ConstTensor(k.data(), ks),
                               core::ConstTensor(v.data(), ks), d);
    kernels::attention_backward(core::Tensor(dq.data(), qs), core::Tensor(dk.data(), ks),
                                core::Tensor(dv.data(), ks), core::ConstTensor(dout.data(), qs),
                                core::ConstTensor(q.data(), qs), core::ConstTensor(k.data(), ks),
                                core::ConstTensor(v.data(), ks), core::ConstTensor(o.data(), qs),
                                core::ConstTensor(lse.data(), ls), d);
  };
  once();
  const double flops = 3.5 * 2.0 * static_cast<double>(rows * d.seq * d.heads * d.head_dim);
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r) {
    const double t0 = Now();
    once();
    rates.push_back(flops / (Now() - t0) / 1e9);
  }
  return Median(rates);
}

}  // namespace

double HostProfile::Predict(const GemmSample& s) const {
  const double x = 1.0 / static_cast<double>(s.m) + 1.0 / static_cast<double>(s.n) +
                   1.0 / static_cast<double>(s.k);
  return 2.0 * static_cast<double>(s.m * s.n * s.k) / (peak_gflops * 1e9) *
         (1.0 + gemm_dim_overhead * x);
}

void FitGemmForm(HostProfile& p) {
  // Minimise sum ((a + b x_i) / y_i - 1)^2: weighted linear least squares, weights 1 / y_i^2.
  double sw = 0, swx = 0, swxx = 0, swy = 0, swxy = 0;
  for (const GemmSample& s : p.gemms) {
    const double x = 1.0 / static_cast<double>(s.m) + 1.0 / static_cast<double>(s.n) +
                     1.0 / static_cast<double>(s.k);
    const double y = s.seconds / (2.0 * static_cast<double>(s.m * s.n * s.k));
    const double w = 1.0 / (y * y);
    sw += w, swx += w * x, swxx += w * x * x, swy += w * y, swxy += w * x * y;
  }
  const double det = sw * swxx - swx * swx;
  double a = swy / sw, b = 0;
  if (det > 0) {
    a = (swxx * swy - swx * swxy) / det;
    b = (sw * swxy - swx * swy) / det;
  }
  if (!(a > 0) || b < 0) {  // the form does not hold: a plain rate
    b = 0;
    a = swy / sw;
  }
  p.peak_gflops = 1.0 / a / 1e9;
  p.gemm_dim_overhead = b / a;
}

HostProfile MeasureHost(int threads, int repetitions) {
  HostProfile p;
  p.threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::SetBlasThreads(p.threads);
  // Square GEMMs from small to large, and the skinny shapes of small models (one short dimension).
  const int64_t shapes[][3] = {{128, 128, 128},    {256, 256, 256},    {512, 512, 512},
                               {1024, 1024, 1024}, {2048, 2048, 2048}, {1024, 128, 128},
                               {1024, 512, 128},   {1024, 128, 512},   {64, 1024, 1024},
                               {1024, 1024, 64},   {2048, 4096, 128}};
  for (const auto& s : shapes) p.gemms.push_back(TimeGemm(s[0], s[1], s[2], repetitions));
  FitGemmForm(p);
  p.mem_gbps = TriadGbps(p.threads, repetitions);
  p.attention_gflops = AttentionGflops(repetitions);
  p.stream_1t_gbps = TriadGbps(1, repetitions);
  return p;
}

std::string HostProfileToml(const HostProfile& p) {
  std::string out = fmt::format(
      "# This host measured by `pentamesh calibrate --host` (train/host_profile.h): the engine's\n"
      "# sgemm fitted to the cost model's GEMM form, and a triad's bandwidth. Use it in a run\n"
      "# config as run.host_profile = \"<this file>\".\n"
      "[host]\nthreads = {}\npeak_gflops = {:.6g}\ngemm_dim_overhead = {:.6g}\nmem_gbps = {:.6g}\n"
      "attention_gflops = {:.6g}\nstream_1t_gbps = {:.6g}\n",
      p.threads, p.peak_gflops, p.gemm_dim_overhead, p.mem_gbps, p.attention_gflops,
      p.stream_1t_gbps);
  for (const GemmSample& s : p.gemms) {
    out += fmt::format(
        "\n[[host.gemm]]\nm = {}\nn = {}\nk = {}\nseconds = {:.6g}  # {:.1f} GFLOP/s, form "
        "{:.1f}\n",
        s.m, s.n, s.k, s.seconds, s.gflops(),
        2.0 * static_cast<double>(s.m * s.n * s.k) / p.Predict(s) / 1e9);
  }
  return out;
}

core::Result<HostProfile> LoadHostProfile(const std::string& path) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, path));
  const toml::table* h = root["host"].as_table();
  if (h == nullptr) return core::Status::Error(fmt::format("{}: missing [host] table", path));
  HostProfile p;
  std::vector<std::string> errors;
  auto positive = [&](const char* key, double& out) {
    const auto v = (*h)[key].value<double>();
    if (!v || !(*v > 0) || !std::isfinite(*v)) {
      errors.push_back(fmt::format("{}: host.{}: must be a positive number", path, key));
    } else {
      out = *v;
    }
  };
  positive("peak_gflops", p.peak_gflops);
  positive("mem_gbps", p.mem_gbps);
  positive("attention_gflops", p.attention_gflops);
  positive("stream_1t_gbps", p.stream_1t_gbps);
  const auto d = (*h)["gemm_dim_overhead"].value<double>();
  if (!d || !(*d >= 0) || !std::isfinite(*d)) {
    errors.push_back(fmt::format("{}: host.gemm_dim_overhead: must be a number >= 0", path));
  } else {
    p.gemm_dim_overhead = *d;
  }
  p.threads = static_cast<int>((*h)["threads"].value<int64_t>().value_or(0));
  if (!errors.empty()) {
    std::string all = errors.front();
    for (size_t i = 1; i < errors.size(); ++i) all += "\n" + errors[i];
    return core::Status::Error(all);
  }
  return p;
}

}  // namespace pentamesh::train

#include "train/host_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <string_view>
#include <thread>
#include <vector>

#include "core/numeric.h"
#include "cost/gemm.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "spec/load_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::train {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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
  const double flop =
      cost::GemmFlops(static_cast<double>(m), static_cast<double>(n), static_cast<double>(k));
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

// The engine's decode GEMM: kernels::matmul of one row against 8 weights of 4096 x 4096 fp32 (512
// MiB, beyond the caches), at the current BLAS threads: bytes of the weights per second.
double GemvGbps(int repetitions) {
  constexpr int64_t kDim = 4096, kMats = 8;
  std::vector<std::vector<float>> w(kMats, std::vector<float>(kDim * kDim, 1e-3f));
  std::vector<float> x(kDim, 1.0f), y(kDim);
  auto run = [&] {
    for (const auto& m : w) {
      kernels::matmul(core::Tensor(y.data(), {1, kDim}), core::ConstTensor(x.data(), {1, kDim}),
                      core::ConstTensor(m.data(), {kDim, kDim}), kernels::Trans::kNo,
                      kernels::Trans::kYes);
    }
  };
  run();
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r) {
    const double t0 = Now();
    run();
    rates.push_back(4.0 * static_cast<double>(kMats * kDim * kDim) / (Now() - t0) / 1e9);
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

double GemmForm::Predict(const GemmSample& s) const {
  return cost::GemmComputeSeconds(static_cast<double>(s.m), static_cast<double>(s.n),
                                  static_cast<double>(s.k), gflops * 1e9, dim_overhead);
}

GemmForm HostProfile::FormAt(double rank_cores) const {
  const GemmForm one = Form1t(), all = Form();
  if (rank_cores <= 1.0) return {one.gflops * rank_cores, one.dim_overhead};
  if (threads <= 1 || rank_cores >= threads) return all;
  const double w = (rank_cores - 1.0) / (threads - 1.0);
  return {one.gflops + w * (all.gflops - one.gflops),
          one.dim_overhead + w * (all.dim_overhead - one.dim_overhead)};
}

double HostProfile::WeightReadGbps(double rank_cores, double ranks_on_host) const {
  const bool gemv = gemv_gbps > 0 && gemv_1t_gbps > 0;
  const double one = gemv ? gemv_1t_gbps : stream_1t_gbps, all = gemv ? gemv_gbps : mem_gbps;
  return std::min(one * rank_cores, all / std::max(1.0, ranks_on_host));
}

const CommProfile* HostProfile::CommFor(int ranks) const {
  for (const CommProfile& c : comm) {
    if (c.ranks == ranks) return &c;
  }
  return nullptr;
}

GemmForm FitGemmForm(const std::vector<GemmSample>& gemms) {
  // Minimise sum ((a + b x_i) / y_i - 1)^2: weighted linear least squares, weights 1 / y_i^2.
  double sw = 0, swx = 0, swxx = 0, swy = 0, swxy = 0;
  for (const GemmSample& s : gemms) {
    const double m = static_cast<double>(s.m), n = static_cast<double>(s.n),
                 k = static_cast<double>(s.k);
    const double x = cost::GemmInverseDims(m, n, k);
    const double y = s.seconds / cost::GemmFlops(m, n, k);
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
  return {.gflops = 1.0 / a / 1e9, .dim_overhead = b / a};
}

namespace {

// Square GEMMs from small to large, and the skinny shapes of small models (one short dimension).
std::vector<GemmSample> TimeGemmShapes(int repetitions) {
  const int64_t shapes[][3] = {{128, 128, 128},    {256, 256, 256},    {512, 512, 512},
                               {1024, 1024, 1024}, {2048, 2048, 2048}, {1024, 128, 128},
                               {1024, 512, 128},   {1024, 128, 512},   {64, 1024, 1024},
                               {1024, 1024, 64},   {2048, 4096, 128}};
  std::vector<GemmSample> out;
  for (const auto& s : shapes) out.push_back(TimeGemm(s[0], s[1], s[2], repetitions));
  return out;
}

}  // namespace

HostProfile MeasureHost(int threads, int repetitions) {
  HostProfile p;
  p.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.threads = threads > 0 ? threads : p.cores;
  kernels::SetBlasThreads(p.threads);
  p.gemms = TimeGemmShapes(repetitions);
  const GemmForm all = FitGemmForm(p.gemms);
  p.peak_gflops = all.gflops, p.gemm_dim_overhead = all.dim_overhead;
  GemmForm one = all;
  if (p.threads > 1) {
    kernels::SetBlasThreads(1);
    p.gemms_1t = TimeGemmShapes(repetitions);
    one = FitGemmForm(p.gemms_1t);
    kernels::SetBlasThreads(p.threads);
  }
  p.peak_gflops_1t = one.gflops, p.gemm_dim_overhead_1t = one.dim_overhead;
  p.mem_gbps = TriadGbps(p.threads, repetitions);
  p.attention_gflops = AttentionGflops(repetitions);
  p.stream_1t_gbps = TriadGbps(1, repetitions);
  p.gemv_gbps = GemvGbps(repetitions);
  kernels::SetBlasThreads(1);
  p.gemv_1t_gbps = GemvGbps(repetitions);
  kernels::SetBlasThreads(p.threads);
  return p;
}

namespace {

std::string GemmSamplesToml(const char* table, const std::vector<GemmSample>& gemms,
                            const GemmForm& form) {
  std::string out;
  for (const GemmSample& s : gemms) {
    out += fmt::format(
        "\n[[host.{}]]\nm = {}\nn = {}\nk = {}\nseconds = {:.6g}  # {:.1f} GFLOP/s, form {:.1f}\n",
        table, s.m, s.n, s.k, s.seconds, s.gflops(), s.flops() / form.Predict(s) / 1e9);
  }
  return out;
}

}  // namespace

std::string CommProfileToml(const CommProfile& c) {
  std::string out = fmt::format(
      "\n[[comm]]  # collectives at {} ranks, fitted to the cost model's forms\n"
      "ranks = {}\nlatency_us = {:.6g}\nbus_gbps = {:.6g}\nreduce_gbps = {:.6g}  # 0 = free\n",
      c.ranks, c.ranks, c.fit.latency_us, c.fit.bus_gbps, c.fit.reduce_gbps);
  for (const CommSample& s : c.samples) {
    out += fmt::format(
        "[[comm.sample]]\nop = \"{}\"\nbytes = {}\nseconds = {:.6g}  # fit {:+.0f}%\n",
        cost::CollectiveName(s.op), s.bytes, s.seconds,
        100.0 * (c.fit.Predict(s.op, c.ranks, static_cast<double>(s.bytes)) / s.seconds - 1.0));
  }
  return out;
}

std::string HostProfileToml(const HostProfile& p) {
  std::string out = fmt::format(
      "# This host measured by `pentamesh calibrate --host` (train/host_profile.h): the engine's\n"
      "# sgemm fitted to the cost model's GEMM form at all threads and at one, a triad's and the\n"
      "# one-row matmul's (sgemv) bandwidths, and (with --np) MPI collectives fitted to the cost\n"
      "# model's link. Use it in a run config as run.host_profile = \"<this file>\".\n"
      "[host]\nthreads = {}\ncores = {}\npeak_gflops = {:.6g}\ngemm_dim_overhead = {:.6g}\n"
      "peak_gflops_1t = {:.6g}\ngemm_dim_overhead_1t = {:.6g}\nmem_gbps = {:.6g}\n"
      "attention_gflops = {:.6g}\nstream_1t_gbps = {:.6g}\ngemv_gbps = {:.6g}\n"
      "gemv_1t_gbps = {:.6g}\n",
      p.threads, p.cores, p.peak_gflops, p.gemm_dim_overhead, p.peak_gflops_1t,
      p.gemm_dim_overhead_1t, p.mem_gbps, p.attention_gflops, p.stream_1t_gbps, p.gemv_gbps,
      p.gemv_1t_gbps);
  out += GemmSamplesToml("gemm", p.gemms, p.Form());
  out += GemmSamplesToml("gemm_1t", p.gemms_1t, p.Form1t());
  for (const CommProfile& c : p.comm) out += CommProfileToml(c);
  return out;
}

namespace {

// Collects every error of one file, each naming the file and the field.
struct Errors {
  const std::string& path;
  std::vector<std::string> all;
  void Add(const std::string& field, const std::string& reason) {
    all.push_back(fmt::format("{}: {}: {}", path, field, reason));
  }
  // A number > 0 (or >= 0 when zero_ok), finite, at most kMaxRate.
  void Number(const toml::node_view<const toml::node>& node, const std::string& field, double& out,
              bool zero_ok = false) {
    const auto v = node.value<double>();
    if (!v || !std::isfinite(*v) || *v < 0 || (!zero_ok && *v == 0) || *v > kMaxRate) {
      Add(field,
          fmt::format("{} (at most {:g})",
                      zero_ok ? "must be a number >= 0" : "must be a positive number", kMaxRate));
    } else {
      out = *v;
    }
  }
  // A measured rate (GFLOP/s, GB/s) in [kMinRate, kMaxRate], or 0 when zero_ok (not
  // measured, or free): the cost model divides by it.
  void Rate(const toml::node_view<const toml::node>& node, const std::string& field, double& out,
            bool zero_ok = false) {
    const auto v = node.value<double>();
    if (!v || !((*v >= kMinRate && *v <= kMaxRate) || (zero_ok && *v == 0))) {
      Add(field, zero_ok ? fmt::format("must be a number >= 0: 0 or a rate in [{:g}, {:g}]",
                                       kMinRate, kMaxRate)
                         : fmt::format("must be a positive number, a rate in [{:g}, {:g}]",
                                       kMinRate, kMaxRate));
    } else {
      out = *v;
    }
  }
  // A key of `t` outside `known`: "<table>.<key>: unknown key in [<table>] (known: ...)".
  void RejectUnknown(const toml::table& t, const std::string& table,
                     std::initializer_list<std::string_view> known) {
    for (const auto& [key, node] : t) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      std::string names;
      for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
      Add(table.empty() ? std::string(key.str()) : table + "." + std::string(key.str()),
          fmt::format("unknown key in {} (known: {})",
                      table.empty() ? "the top level" : "[" + table + "]", names));
    }
  }
  core::Status Status() const {
    if (all.empty()) return core::Status::Ok();
    std::string text = all.front();
    for (size_t i = 1; i < all.size(); ++i) text += "\n" + all[i];
    return core::Status::Error(text);
  }
};

CommSample ParseCommSample(const toml::table& t, const std::string& field, Errors& e) {
  CommSample s;
  const auto op = t["op"].value<std::string>();
  if (!op || !cost::ParseCollective(*op)) {
    e.Add(field + ".op", "must be one of p2p, all_reduce, all_gather, reduce_scatter, all_to_all");
  } else {
    s.op = *cost::ParseCollective(*op);
  }
  const auto bytes = t["bytes"].value<int64_t>();
  if (!bytes || *bytes <= 0) {
    e.Add(field + ".bytes", "must be a positive integer");
  } else {
    s.bytes = *bytes;
  }
  e.Number(t["seconds"], field + ".seconds", s.seconds);
  return s;
}

// The [[comm]] entries of `root`: ranks an integer in [2, kMaxCommRanks], each at most once.
std::vector<CommProfile> ParseComm(const toml::table& root, Errors& e) {
  std::vector<CommProfile> out;
  const toml::node* node = root.get("comm");
  if (node == nullptr) return out;
  const toml::array* entries = node->as_array();
  if (entries == nullptr) {
    e.Add("comm", "must be an array of tables ([[comm]])");
    return out;
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string field = fmt::format("comm[{}]", i);
    const toml::table* t = (*entries)[i].as_table();
    if (t == nullptr) {
      e.Add(field, "must be a table");
      continue;
    }
    CommProfile c;
    const auto ranks = (*t)["ranks"].value<int64_t>();
    if (!ranks || *ranks < 2 || *ranks > kMaxCommRanks) {
      e.Add(field + ".ranks", fmt::format("must be an integer in [2, {}]", kMaxCommRanks));
    } else if (std::any_of(out.begin(), out.end(),
                           [&](const CommProfile& o) { return o.ranks == *ranks; })) {
      e.Add(field + ".ranks", fmt::format("{} ranks measured twice; keep one entry", *ranks));
    } else {
      c.ranks = static_cast<int>(*ranks);
    }
    e.Number((*t)["latency_us"], field + ".latency_us", c.fit.latency_us, /*zero_ok=*/true);
    e.Rate((*t)["bus_gbps"], field + ".bus_gbps", c.fit.bus_gbps);
    // Absent in profiles written before the reduction was fitted: free, as then.
    if (t->contains("reduce_gbps")) {
      e.Rate((*t)["reduce_gbps"], field + ".reduce_gbps", c.fit.reduce_gbps, /*zero_ok=*/true);
    }
    e.RejectUnknown(*t, field, {"ranks", "latency_us", "bus_gbps", "reduce_gbps", "sample"});
    if (const toml::array* samples = (*t)["sample"].as_array()) {
      for (size_t j = 0; j < samples->size(); ++j) {
        const std::string sf = fmt::format("{}.sample[{}]", field, j);
        if (const toml::table* st = (*samples)[j].as_table()) {
          e.RejectUnknown(*st, sf, {"op", "bytes", "seconds"});
          c.samples.push_back(ParseCommSample(*st, sf, e));
        } else {
          e.Add(sf, "must be a table");
        }
      }
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(),
            [](const CommProfile& a, const CommProfile& b) { return a.ranks < b.ranks; });
  return out;
}

}  // namespace

core::Result<HostProfile> LoadHostProfile(const std::string& path) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, path));
  const toml::table* h = root["host"].as_table();
  if (h == nullptr) return core::Status::Error(fmt::format("{}: missing [host] table", path));
  HostProfile p;
  Errors e{path, {}};
  e.Rate((*h)["peak_gflops"], "host.peak_gflops", p.peak_gflops);
  e.Rate((*h)["peak_gflops_1t"], "host.peak_gflops_1t", p.peak_gflops_1t);
  e.Rate((*h)["mem_gbps"], "host.mem_gbps", p.mem_gbps);
  e.Rate((*h)["attention_gflops"], "host.attention_gflops", p.attention_gflops);
  e.Rate((*h)["stream_1t_gbps"], "host.stream_1t_gbps", p.stream_1t_gbps);
  for (auto [key, out] :
       {std::pair{"gemv_gbps", &p.gemv_gbps}, std::pair{"gemv_1t_gbps", &p.gemv_1t_gbps}}) {
    if (h->contains(key))
      e.Rate((*h)[key], fmt::format("host.{}", key), *out, true);  // 0, absent: not measured
  }
  e.Number((*h)["gemm_dim_overhead"], "host.gemm_dim_overhead", p.gemm_dim_overhead, true);
  e.Number((*h)["gemm_dim_overhead_1t"], "host.gemm_dim_overhead_1t", p.gemm_dim_overhead_1t, true);
  for (auto [key, out] : {std::pair{"threads", &p.threads}, std::pair{"cores", &p.cores}}) {
    const auto v = (*h)[key].value<int64_t>();
    if (!v || *v < 1 || *v > 1 << 20) {
      e.Add(fmt::format("host.{}", key), "must be a positive integer");
    } else {
      *out = static_cast<int>(*v);
    }
  }
  e.RejectUnknown(root, "", {"host", "comm"});
  e.RejectUnknown(*h, "host",
                  {"threads", "cores", "peak_gflops", "gemm_dim_overhead", "peak_gflops_1t",
                   "gemm_dim_overhead_1t", "mem_gbps", "attention_gflops", "stream_1t_gbps",
                   "gemv_gbps", "gemv_1t_gbps", "gemm", "gemm_1t"});
  for (const char* samples : {"gemm", "gemm_1t"}) {
    if (const toml::array* a = (*h)[samples].as_array()) {
      for (size_t i = 0; i < a->size(); ++i) {
        if (const toml::table* g = (*a)[i].as_table()) {
          e.RejectUnknown(*g, fmt::format("host.{}[{}]", samples, i), {"m", "n", "k", "seconds"});
        }
      }
    }
  }
  p.comm = ParseComm(root, e);
  PM_RETURN_IF_ERROR(e.Status());
  return p;
}

core::Result<std::vector<CommProfile>> LoadCommProfiles(const std::string& path) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, path));
  Errors e{path, {}};
  e.RejectUnknown(root, "", {"host", "comm"});
  std::vector<CommProfile> out = ParseComm(root, e);
  PM_RETURN_IF_ERROR(e.Status());
  return out;
}

}  // namespace pentamesh::train

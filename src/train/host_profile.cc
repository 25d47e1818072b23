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
#include "spec/field_reader.h"
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

// How a [host] number is checked: a measured rate in [kMinRate, kMaxRate], the same or 0 (not
// measured: profiles written before it was), or a number in [0, kMaxRate].
enum class HostRule : uint8_t { kRate, kRateOrZero, kNonNegative };

// The [host] table's keys in file order; LoadHostProfile and HostProfileToml walk these lists.
struct HostCount {
  const char* key;
  int HostProfile::*field;
};
constexpr HostCount kHostCounts[] = {{"threads", &HostProfile::threads},
                                     {"cores", &HostProfile::cores}};
struct HostNumber {
  const char* key;
  double HostProfile::*field;
  HostRule rule;
};
constexpr HostNumber kHostNumbers[] = {
    {"peak_gflops", &HostProfile::peak_gflops, HostRule::kRate},
    {"gemm_dim_overhead", &HostProfile::gemm_dim_overhead, HostRule::kNonNegative},
    {"peak_gflops_1t", &HostProfile::peak_gflops_1t, HostRule::kRate},
    {"gemm_dim_overhead_1t", &HostProfile::gemm_dim_overhead_1t, HostRule::kNonNegative},
    {"mem_gbps", &HostProfile::mem_gbps, HostRule::kRate},
    {"attention_gflops", &HostProfile::attention_gflops, HostRule::kRate},
    {"stream_1t_gbps", &HostProfile::stream_1t_gbps, HostRule::kRate},
    {"gemv_gbps", &HostProfile::gemv_gbps, HostRule::kRateOrZero},
    {"gemv_1t_gbps", &HostProfile::gemv_1t_gbps, HostRule::kRateOrZero},
};
// The sample tables of [host], each at its form: [[host.gemm]] at all threads, [[host.gemm_1t]]
// at one.
struct HostSamples {
  const char* key;
  std::vector<GemmSample> HostProfile::*samples;
  GemmForm (HostProfile::*form)() const;
};
constexpr HostSamples kHostSamples[] = {{"gemm", &HostProfile::gemms, &HostProfile::Form},
                                        {"gemm_1t", &HostProfile::gemms_1t, &HostProfile::Form1t}};

// Reads `key` by its rule into `out`: required unless kRateOrZero (absent: 0, not measured).
void ReadNumber(spec::FieldReader& r, const char* key, HostRule rule, double& out) {
  double v = 0;
  const size_t errors = r.ErrorCount();
  r.Double(key, v, rule != HostRule::kRateOrZero, rule == HostRule::kRate ? kMinRate : 0.0,
           /*strictly_positive=*/false, kMaxRate);
  if (r.ErrorCount() != errors) return;
  if (rule == HostRule::kRateOrZero && v != 0 && v < kMinRate) {
    return r.Error(
        key, fmt::format("must be 0 (not measured) or a rate in [{:g}, {:g}]", kMinRate, kMaxRate));
  }
  out = v;
}

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
  std::string out =
      "# This host measured by `pentamesh calibrate --host` (train/host_profile.h): the engine's\n"
      "# sgemm fitted to the cost model's GEMM form at all threads and at one, a triad's and the\n"
      "# one-row matmul's (sgemv) bandwidths, and (with --np) MPI collectives fitted to the cost\n"
      "# model's link. Use it in a run config as run.host_profile = \"<this file>\".\n[host]\n";
  for (const HostCount& c : kHostCounts) out += fmt::format("{} = {}\n", c.key, p.*c.field);
  for (const HostNumber& n : kHostNumbers) out += fmt::format("{} = {:.6g}\n", n.key, p.*n.field);
  for (const HostSamples& t : kHostSamples) {
    out += GemmSamplesToml(t.key, p.*t.samples, (p.*t.form)());
  }
  for (const CommProfile& c : p.comm) out += CommProfileToml(c);
  return out;
}

namespace {

// Calls fn(table, "where[i]") for each table of the array `key` of `parent`; an array entry that
// is not a table, or a `key` that is not an array, is an error.
template <typename Fn>
void ForEachTable(const toml::table& parent, const char* key, const std::string& where,
                  std::vector<std::string>& errors, Fn&& fn) {
  const toml::node* node = parent.get(key);
  if (node == nullptr) return;
  const toml::array* entries = node->as_array();
  if (entries == nullptr) {
    errors.push_back(fmt::format("{}: must be an array of tables ([[{}]])", where, where));
    return;
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string name = fmt::format("{}[{}]", where, i);
    if (const toml::table* t = (*entries)[i].as_table()) {
      fn(*t, name);
    } else {
      errors.push_back(name + ": must be a table");
    }
  }
}

CommSample ReadCommSample(const toml::table& t, const std::string& where,
                          std::vector<std::string>& errors) {
  spec::FieldReader r(&t, where, &errors);
  CommSample s;
  std::string op;
  r.String("op", op, true);
  if (auto c = cost::ParseCollective(op)) {
    s.op = *c;
  } else if (t.contains("op")) {
    r.Error("op", "must be one of p2p, all_reduce, all_gather, reduce_scatter, all_to_all");
  }
  r.Int("bytes", s.bytes, true, 1, std::numeric_limits<int64_t>::max());
  r.Double("seconds", s.seconds, true, 0, /*strictly_positive=*/true, kMaxRate);
  r.RejectUnknown();
  return s;
}

// The [[comm]] entries of `root`: ranks an integer in [2, kMaxCommRanks], each at most once.
std::vector<CommProfile> ReadComm(const toml::table& root, std::vector<std::string>& errors) {
  std::vector<CommProfile> out;
  ForEachTable(root, "comm", "comm", errors, [&](const toml::table& t, const std::string& name) {
    spec::FieldReader r(&t, name, &errors);
    CommProfile c;
    const size_t before = r.ErrorCount();
    r.Int("ranks", c.ranks, true, 2, kMaxCommRanks);
    if (r.ErrorCount() == before && std::any_of(out.begin(), out.end(), [&](const CommProfile& o) {
          return o.ranks == c.ranks;
        })) {
      r.Error("ranks", fmt::format("{} ranks measured twice; keep one entry", c.ranks));
    }
    ReadNumber(r, "latency_us", HostRule::kNonNegative, c.fit.latency_us);
    ReadNumber(r, "bus_gbps", HostRule::kRate, c.fit.bus_gbps);
    // Absent in profiles written before the reduction was fitted: free, as then.
    ReadNumber(r, "reduce_gbps", HostRule::kRateOrZero, c.fit.reduce_gbps);
    r.RejectUnknown({"sample"});
    ForEachTable(t, "sample", name + ".sample", errors,
                 [&](const toml::table& st, const std::string& sample) {
                   c.samples.push_back(ReadCommSample(st, sample, errors));
                 });
    out.push_back(std::move(c));
  });
  std::sort(out.begin(), out.end(),
            [](const CommProfile& a, const CommProfile& b) { return a.ranks < b.ranks; });
  return out;
}

// The file's top level: [host] and [[comm]].
void RejectUnknownTables(const toml::table& root, std::vector<std::string>& errors) {
  spec::FieldReader(&root, "", &errors).RejectUnknown({"host", "comm"});
}

}  // namespace

core::Result<HostProfile> LoadHostProfile(const std::string& path) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, path));
  const toml::table* h = root["host"].as_table();
  if (h == nullptr) return core::Status::Error(fmt::format("{}: missing [host] table", path));
  HostProfile p;
  std::vector<std::string> errors;
  spec::FieldReader r(h, "host", &errors);
  for (const HostCount& c : kHostCounts) r.Int(c.key, p.*c.field, true, 1, 1 << 20);
  for (const HostNumber& n : kHostNumbers) ReadNumber(r, n.key, n.rule, p.*n.field);
  std::vector<std::string> sample_tables;
  for (const HostSamples& t : kHostSamples) {
    sample_tables.emplace_back(t.key);
    ForEachTable(*h, t.key, fmt::format("host.{}", t.key), errors,
                 [&](const toml::table& g, const std::string& name) {
                   spec::FieldReader gr(&g, name, &errors);
                   GemmSample sample;
                   gr.Int("m", sample.m, true);
                   gr.Int("n", sample.n, true);
                   gr.Int("k", sample.k, true);
                   gr.Double("seconds", sample.seconds, true, 0, true, kMaxRate);
                   gr.RejectUnknown();
                   (p.*t.samples).push_back(sample);
                 });
  }
  r.RejectUnknown(sample_tables);
  RejectUnknownTables(root, errors);
  p.comm = ReadComm(root, errors);
  PM_RETURN_IF_ERROR(spec::JoinFieldErrors(path, errors));
  return p;
}

core::Result<std::vector<CommProfile>> LoadCommProfiles(const std::string& path) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  PM_ASSIGN_OR_RETURN(toml::table root, spec::ParseTomlText(text, path));
  std::vector<std::string> errors;
  RejectUnknownTables(root, errors);
  std::vector<CommProfile> out = ReadComm(root, errors);
  PM_RETURN_IF_ERROR(spec::JoinFieldErrors(path, errors));
  return out;
}

}  // namespace pentamesh::train

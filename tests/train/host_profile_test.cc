// HostProfile: the GEMM-form and collective fits against samples generated from known parameters
// by the cost model's own forms, the TOML round trip, errors naming the field, and a run config
// whose HostCluster / EngineCostParams use the per-thread GEMM rate and the [[comm]] link.
#include "train/host_profile.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "train/run_config.h"
#include "train/trainer.h"

namespace pentamesh::train {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// A two-thread, two-core host profile with these numbers; one thread reaches 60% of the rate.
HostProfile Profile(double peak_gflops, double dim_overhead, double mem_gbps,
                    double attention_gflops, double stream_1t_gbps) {
  HostProfile p;
  p.threads = 2;
  p.cores = 2;
  p.peak_gflops = peak_gflops;
  p.gemm_dim_overhead = dim_overhead;
  p.peak_gflops_1t = 0.6 * peak_gflops;
  p.gemm_dim_overhead_1t = 0.5 * dim_overhead;
  p.mem_gbps = mem_gbps;
  p.attention_gflops = attention_gflops;
  p.stream_1t_gbps = stream_1t_gbps;
  return p;
}

// Samples from time = 2MNK / rate (1 + d (1/M + 1/N + 1/K)): the fit returns rate and d.
TEST(HostProfile, FitRecoversTheGemmForm) {
  std::vector<GemmSample> gemms;
  const double rate = 150e9, d = 40.0;
  for (const auto& s : {std::array<int64_t, 3>{128, 128, 128},
                        {1024, 1024, 1024},
                        {64, 1024, 512},
                        {1024, 128, 128},
                        {2048, 2048, 2048}}) {
    const double x = 1.0 / s[0] + 1.0 / s[1] + 1.0 / s[2];
    gemms.push_back({s[0], s[1], s[2], 2.0 * s[0] * s[1] * s[2] / rate * (1 + d * x)});
  }
  const GemmForm f = FitGemmForm(gemms);
  EXPECT_NEAR(f.gflops, 150.0, 1e-6);
  EXPECT_NEAR(f.dim_overhead, 40.0, 1e-6);
  for (const GemmSample& s : gemms) EXPECT_NEAR(f.Predict(s) / s.seconds, 1.0, 1e-9);
}

// Samples of every collective from the cost model's forms (cost::IntraNodeCollectiveTime) at a
// known latency, bandwidth and reduction rate (0 = free): the joint fit and each collective's own
// fit return them.
std::vector<CommSample> SyntheticCollectives(int ranks, double alpha_s, double bus_Bps,
                                             double reduce_Bps = 0) {
  std::vector<CommSample> samples;
  for (cost::Collective op : cost::kCollectives) {
    for (int64_t bytes = 4096; bytes <= (16 << 20); bytes *= 4) {
      samples.push_back({op, bytes,
                         cost::IntraNodeCollectiveTime(op, ranks, alpha_s, bus_Bps,
                                                       static_cast<double>(bytes), reduce_Bps)});
    }
  }
  return samples;
}

bool IsReduction(cost::Collective op) {
  return op == cost::Collective::kAllReduce || op == cost::Collective::kReduceScatter;
}

TEST(HostProfile, FitRecoversLatencyAndBandwidth) {
  for (int ranks : {2, 3, 4, 8}) {
    const auto samples = SyntheticCollectives(ranks, 7.5e-6, 3.25e9);
    const CommFit joint = FitCollectives(ranks, samples);
    EXPECT_NEAR(joint.latency_us, 7.5, 1e-6) << ranks;
    EXPECT_NEAR(joint.bus_gbps, 3.25, 1e-6) << ranks;
    EXPECT_EQ(joint.reduce_gbps, 0.0) << ranks;  // free reductions stay free
    EXPECT_LT(Residuals(joint, ranks, samples).max_abs, 1e-9);
    for (cost::Collective op : cost::kCollectives) {
      const CommFit own = FitCollectives(ranks, samples, op);
      EXPECT_NEAR(own.latency_us, 7.5, 1e-6) << cost::CollectiveName(op);
      EXPECT_NEAR(own.bus_gbps, 3.25, 1e-6) << cost::CollectiveName(op);
    }
  }
  // The forms are the model's: an all-reduce costs twice an all-gather of the same bytes.
  const CommFit f{.latency_us = 5, .bus_gbps = 2};
  EXPECT_DOUBLE_EQ(f.Predict(cost::Collective::kAllReduce, 4, 1e6),
                   2 * f.Predict(cost::Collective::kAllGather, 4, 1e6));
  EXPECT_DOUBLE_EQ(f.Predict(cost::Collective::kP2p, 4, 1e6), 5e-6 + 1e6 / 2e9);
  // Times that fall below the form at small sizes give a negative latency: pinned at 0.
  std::vector<CommSample> no_latency = SyntheticCollectives(2, 0.0, 1e9);
  for (CommSample& s : no_latency) s.seconds *= s.bytes < 16384 ? 0.5 : 1.0;
  const CommFit pinned = FitCollectives(2, no_latency);
  EXPECT_EQ(pinned.latency_us, 0.0);
  EXPECT_GT(pinned.bus_gbps, 0.9);
  EXPECT_LT(pinned.bus_gbps, 1.5);
  // A bias shows in the signed median: p2p measured 50% slower than the joint fit says.
  std::vector<CommSample> slow_p2p = SyntheticCollectives(4, 2e-6, 4e9);
  for (CommSample& s : slow_p2p) s.seconds *= s.op == cost::Collective::kP2p ? 1.5 : 1.0;
  const CommFit biased = FitCollectives(4, slow_p2p);
  EXPECT_LT(Residuals(biased, 4, slow_p2p, cost::Collective::kP2p).median, -0.2);
  EXPECT_LT(std::fabs(Residuals(biased, 4, slow_p2p, cost::Collective::kAllReduce).median), 0.15);
}

// Reductions that also sum their bytes on the CPU: the joint fit recovers the third parameter and
// describes every sample; a collective alone cannot split a reduction's sum from its transfer.
TEST(HostProfile, FitRecoversTheReductionRate) {
  for (int ranks : {2, 3, 4, 8}) {
    const auto samples = SyntheticCollectives(ranks, 7.5e-6, 3.25e9, 0.8e9);
    const CommFit joint = FitCollectives(ranks, samples);
    EXPECT_NEAR(joint.latency_us, 7.5, 1e-6) << ranks;
    EXPECT_NEAR(joint.bus_gbps, 3.25, 1e-6) << ranks;
    EXPECT_NEAR(joint.reduce_gbps, 0.8, 1e-9) << ranks;
    EXPECT_LT(Residuals(joint, ranks, samples).max_abs, 1e-9);
    // The (latency, bandwidth) pair alone is biased low on the reductions: the old fit's error.
    const CommFit pair = FitCollectives(ranks, samples, cost::Collective::kAllGather);
    EXPECT_LT(Residuals(pair, ranks, samples, cost::Collective::kReduceScatter).median, -0.2);
    for (cost::Collective op : cost::kCollectives) {
      const CommFit own = FitCollectives(ranks, samples, op);
      EXPECT_EQ(own.reduce_gbps, 0.0) << cost::CollectiveName(op);
      EXPECT_LT(Residuals(own, ranks, samples, op).max_abs, IsReduction(op) ? 1e-6 : 1e-9)
          << cost::CollectiveName(op);
      if (!IsReduction(op)) {
        EXPECT_NEAR(own.bus_gbps, 3.25, 1e-6) << cost::CollectiveName(op);
      }
    }
  }
  // The forms: reduce-scatter = all-gather + (g-1)/g n / B_reduce; all-reduce = twice the
  // all-gather's latency and transfer + one reduction; the rest do not reduce.
  const CommFit f{.latency_us = 5, .bus_gbps = 2, .reduce_gbps = 0.5};
  const double sum = 0.75 * 1e6 / 0.5e9;
  EXPECT_DOUBLE_EQ(f.Predict(cost::Collective::kReduceScatter, 4, 1e6),
                   3 * 5e-6 + 0.75 * 1e6 / 2e9 + sum);
  EXPECT_DOUBLE_EQ(f.Predict(cost::Collective::kAllReduce, 4, 1e6),
                   2 * f.Predict(cost::Collective::kAllGather, 4, 1e6) + sum);
  EXPECT_DOUBLE_EQ(f.Predict(cost::Collective::kP2p, 4, 1e6), 5e-6 + 1e6 / 2e9);
  const CommFit free{.latency_us = 5, .bus_gbps = 2};
  EXPECT_EQ(free.Predict(cost::Collective::kReduceScatter, 4, 1e6),
            free.Predict(cost::Collective::kAllGather, 4, 1e6));
  // Reductions faster than the transfer form (a negative sum time): pinned at free.
  std::vector<CommSample> fast = SyntheticCollectives(2, 3e-6, 2e9);
  for (CommSample& s : fast) s.seconds *= IsReduction(s.op) ? 0.8 : 1.0;
  const CommFit pinned = FitCollectives(2, fast);
  EXPECT_EQ(pinned.reduce_gbps, 0.0);
  EXPECT_GT(pinned.bus_gbps, 1.5);
}

TEST(HostProfile, TomlRoundTripAndErrors) {
  HostProfile p = Profile(201.5, 33.25, 21.5, 9.5, 12.25);
  p.gemv_gbps = 28.5, p.gemv_1t_gbps = 14.75;
  p.gemms.push_back({256, 256, 256, 2e-4});
  p.gemms_1t.push_back({256, 256, 256, 3e-4});
  p.comm.push_back({.ranks = 4,
                    .fit = {.latency_us = 12.5, .bus_gbps = 3.75, .reduce_gbps = 0.625},
                    .samples = {}});
  p.comm.push_back({.ranks = 2, .fit = {.latency_us = 0, .bus_gbps = 5.5}, .samples = {}});
  p.comm.back().samples = SyntheticCollectives(2, 0, 5.5e9);
  const auto back = LoadHostProfile(WriteTemp("host_ok.toml", HostProfileToml(p)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_DOUBLE_EQ(back->peak_gflops, 201.5);
  EXPECT_DOUBLE_EQ(back->gemm_dim_overhead, 33.25);
  EXPECT_DOUBLE_EQ(back->peak_gflops_1t, 0.6 * 201.5);
  EXPECT_DOUBLE_EQ(back->gemm_dim_overhead_1t, 0.5 * 33.25);
  EXPECT_EQ(back->cores, 2);
  // The GEMM samples read back too ([[host.gemm]], [[host.gemm_1t]]).
  ASSERT_EQ(back->gemms.size(), 1u);
  ASSERT_EQ(back->gemms_1t.size(), 1u);
  EXPECT_EQ(back->gemms[0].k, 256);
  EXPECT_DOUBLE_EQ(back->gemms[0].seconds, 2e-4);
  EXPECT_DOUBLE_EQ(back->gemms_1t[0].seconds, 3e-4);
  const auto host_tables = [](const std::string& toml) {
    return toml.substr(0, toml.find("\n[[comm]]"));
  };
  EXPECT_EQ(host_tables(HostProfileToml(*back)), host_tables(HostProfileToml(p)));
  ASSERT_EQ(back->comm.size(), 2u);  // ascending ranks
  EXPECT_EQ(back->comm[0].ranks, 2);
  EXPECT_EQ(back->comm[0].samples.size(), p.comm.back().samples.size());
  EXPECT_EQ(back->comm[0].samples[7].op, p.comm.back().samples[7].op);
  EXPECT_EQ(back->comm[0].samples[7].bytes, p.comm.back().samples[7].bytes);
  EXPECT_NEAR(back->comm[0].samples[7].seconds / p.comm.back().samples[7].seconds, 1, 1e-5);
  ASSERT_NE(back->CommFor(4), nullptr);
  EXPECT_DOUBLE_EQ(back->CommFor(4)->fit.latency_us, 12.5);
  EXPECT_DOUBLE_EQ(back->CommFor(4)->fit.bus_gbps, 3.75);
  EXPECT_DOUBLE_EQ(back->CommFor(4)->fit.reduce_gbps, 0.625);
  EXPECT_EQ(back->CommFor(2)->fit.reduce_gbps, 0.0);
  EXPECT_EQ(back->CommFor(3), nullptr);
  EXPECT_DOUBLE_EQ(back->mem_gbps, 21.5);
  EXPECT_DOUBLE_EQ(back->attention_gflops, 9.5);
  EXPECT_DOUBLE_EQ(back->stream_1t_gbps, 12.25);
  EXPECT_DOUBLE_EQ(back->gemv_gbps, 28.5);
  EXPECT_DOUBLE_EQ(back->gemv_1t_gbps, 14.75);
  EXPECT_EQ(back->threads, 2);
  // A profile written before the gemv rates: they stay 0 and weights stream at the triad's rates.
  std::string old_text = HostProfileToml(p);
  for (const char* key : {"gemv_gbps = 28.5\n", "gemv_1t_gbps = 14.75\n"}) {
    ASSERT_NE(old_text.find(key), std::string::npos);
    old_text.erase(old_text.find(key), std::string(key).size());
  }
  const auto old_profile = LoadHostProfile(WriteTemp("host_old.toml", old_text));
  ASSERT_TRUE(old_profile.ok()) << old_profile.status().message();
  EXPECT_EQ(old_profile->gemv_gbps, 0);
  // A [[comm]] entry written before the reduction rate was fitted: free reductions.
  const auto old_comm = LoadHostProfile(
      WriteTemp("host_old_comm.toml", HostProfileToml(Profile(200, 50, 20, 10, 4)) +
                                          "[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\n"));
  ASSERT_TRUE(old_comm.ok()) << old_comm.status().message();
  EXPECT_EQ(old_comm->CommFor(2)->fit.reduce_gbps, 0.0);
  EXPECT_DOUBLE_EQ(old_comm->CommFor(2)->fit.bus_gbps, 2.0);
  EXPECT_DOUBLE_EQ(old_profile->WeightReadGbps(2, 1), std::min(21.5, 2 * 12.25));
  EXPECT_DOUBLE_EQ(back->WeightReadGbps(2, 1), std::min(28.5, 2 * 14.75));
  EXPECT_DOUBLE_EQ(back->WeightReadGbps(1, 2), std::min(28.5 / 2, 14.75));
  EXPECT_DOUBLE_EQ(back->WeightReadGbps(0.5, 4), std::min(28.5 / 4, 0.5 * 14.75));
  std::string bad_gemv = HostProfileToml(p);
  bad_gemv.replace(bad_gemv.find("gemv_gbps = 28.5"), 16, "gemv_gbps = -2.0");
  const auto refused = LoadHostProfile(WriteTemp("host_bad_gemv.toml", bad_gemv));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("host.gemv_gbps: must be >= 0 (got -2)"),
            std::string::npos)
      << refused.status().message();
  const auto bad = LoadHostProfile(WriteTemp(
      "host_bad.toml", "[host]\npeak_gflops = -1\nmem_gbps = 3\ngemm_dim_overhead = 1\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("host.peak_gflops: must be >= 1e-06 (got -1)"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("host.attention_gflops"), std::string::npos);
  EXPECT_FALSE(LoadHostProfile(WriteTemp("host_none.toml", "[other]\n")).ok());
  // host_fuzz: a subnormal rate (4e-320) was accepted and made the engine's predicted step time
  // NaN (peak, triad) or inf (a [[comm]] link); every rate is held to [1e-6, 1e12].
  for (const std::string name : {"peak_gflops", "mem_gbps", "stream_1t_gbps", "bus_gbps"}) {
    std::string text = HostProfileToml(Profile(200, 50, 20, 10, 4)) +
                       "\n[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\n";
    const size_t at = text.find("\n" + name + " = ") + 1;
    text.replace(at, text.find('\n', at) - at, name + " = 4e-320");
    const auto tiny = LoadHostProfile(WriteTemp("host_tiny.toml", text));
    ASSERT_FALSE(tiny.ok()) << name;
    EXPECT_NE(tiny.status().message().find(name + ": must be >= 1e-06 (got 3.99996e-320)"),
              std::string::npos)
        << tiny.status().message();
  }
  // The [[comm]] entries: every bad field named with its index.
  const std::string host = HostProfileToml(Profile(200, 50, 20, 10, 4));
  const struct {
    const char* comm;
    const char* expect;
  } cases[] = {
      {"[[comm]]\nranks = 1\nlatency_us = 1\nbus_gbps = 2\n",
       "comm[0].ranks: must be >= 2 (got 1)"},
      {"[[comm]]\nranks = 2\nlatency_us = -1\nbus_gbps = 2\n",
       "comm[0].latency_us: must be >= 0 (got -1)"},
      {"[[comm]]\nranks = 2\nlatency_us = 1\n", "comm[0].bus_gbps: missing (required)"},
      {"[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\nreduce_gbps = -0.5\n",
       "comm[0].reduce_gbps: must be >= 0 (got -0.5)"},
      {"[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\nreduce_gbps = \"fast\"\n",
       "comm[0].reduce_gbps: must be a number"},
      {"[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\n[[comm]]\nranks = 2\nlatency_us = "
       "1\nbus_gbps = 2\n",
       "comm[1].ranks: 2 ranks measured twice"},
      {"[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\n[[comm.sample]]\nop = \"bcast\"\n"
       "bytes = 4096\nseconds = 1e-5\n",
       "comm[0].sample[0].op: must be one of p2p, all_reduce"},
      {"[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\n[[comm.sample]]\nop = \"p2p\"\n"
       "bytes = 0\nseconds = 1e-5\n",
       "comm[0].sample[0].bytes: must be >= 1 (got 0)"},
      {"comm = 3\n", "comm: must be an array of tables"},
      // Unknown keys (issue 31): named with their table, never ignored.
      {"[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\nbus_gpbs = 3\n",
       "comm[0].bus_gpbs: unknown key (known: ranks, latency_us"},
      {"[[comm]]\nranks = 2\nlatency_us = 1\nbus_gbps = 2\n[[comm.sample]]\nop = \"p2p\"\n"
       "bytes = 4096\nseconds = 1e-5\nsecs = 1\n",
       "comm[0].sample[0].secs: unknown key (known: op, bytes, seconds)"},
      {"[hots]\nthreads = 2\n", "hots: unknown key (known: host, comm)"},
  };
  for (const auto& c : cases) {
    // A top-level key must precede the tables; [[comm]] entries follow the host's.
    const std::string text =
        std::string(c.comm).rfind("comm = ", 0) == 0 ? c.comm + host : host + c.comm;
    const auto r = LoadHostProfile(WriteTemp("host_comm_bad.toml", text));
    ASSERT_FALSE(r.ok()) << c.comm;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
  // A misspelt [host] key is named, not skipped.
  std::string typo = host;
  typo.replace(typo.find("[host]\n"), 7, "[host]\npeak_gflop = 1\n");
  const auto r = LoadHostProfile(WriteTemp("host_typo.toml", typo));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("host.peak_gflop: unknown key (known: threads"),
            std::string::npos)
      << r.status().message();
}

// A run config with run.host_profile takes the host's numbers; with peak_gflops too it is refused.
TEST(HostProfile, RunConfigUsesIt) {
  const HostProfile p = Profile(200, 50, 20, 10, 4);
  const std::string host = WriteTemp("host_run.toml", HostProfileToml(p));
  const std::string base = std::string(PM_SOURCE_DIR) + "/configs/tiny-dense.toml";
  auto c = LoadRunConfig(base, {"run.host_profile=\"" + host + "\"", "run.layout=\"mbs=4 dp=4\""});
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->run.host.has_value());
  EXPECT_DOUBLE_EQ(c->run.peak_gflops, 200);
  const spec::ClusterSpec hc = HostCluster(*c);
  EXPECT_DOUBLE_EQ(hc.peak_tflops * static_cast<double>(hc.gpus()), 0.2);  // MFU: the host's
  // 4 ranks on 2 cores: each runs its GEMMs on half a core, at half the one-thread rate (60),
  // capped at a quarter of the all-threads rate (50).
  EXPECT_DOUBLE_EQ(hc.peak_tflops * 1e3 * hc.gemm_efficiency, 50);
  const cost::CostParams cp = EngineCostParams(*c);
  EXPECT_DOUBLE_EQ(cp.gemm_dim_overhead, 25);  // the one-thread form's
  // ... and half a core's single-thread attention rate, over its 50 GFLOP/s of GEMM.
  EXPECT_DOUBLE_EQ(cp.attention_relative, 10 * 0.5 / 50);
  EXPECT_DOUBLE_EQ(cp.hbm_efficiency, 4 * 0.5 / 5);  // a rank's half core of one-thread triad
  auto both = LoadRunConfig(base, {"run.host_profile=\"" + host + "\"", "run.peak_gflops=90"});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("run.peak_gflops: set together with run.host_profile"),
            std::string::npos)
      << both.status().message();
  auto missing = LoadRunConfig(base, {"run.host_profile=\"/nonexistent/host.toml\""});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("run.host_profile"), std::string::npos);
}

// A rank's GEMM form is the one at its run.threads, bounded by its share of the cores, its rate
// capped at its share of the all-threads rate.
TEST(HostProfile, RankGemmRateFollowsThreads) {
  const std::string base = std::string(PM_SOURCE_DIR) + "/configs/tiny-dense.toml";
  HostProfile slow_1t = Profile(200, 50, 20, 10, 4);
  slow_1t.peak_gflops_1t = 80;  // two ranks on their own cores stay below the cap of 100 each
  const struct {
    const HostProfile profile;
    const char* layout;
    int threads;
    double gflops, dim_overhead;  // per rank
  } cases[] = {
      {Profile(200, 50, 20, 10, 4), "mbs=8", 1, 120, 25},
      {Profile(200, 50, 20, 10, 4), "mbs=8", 2, 200, 50},
      {Profile(200, 50, 20, 10, 4), "mbs=8", 0, 200, 50},
      {Profile(200, 50, 20, 10, 4), "mbs=8 dp=2", 1, 100, 25},  // 120 capped at 200 / 2
      {Profile(200, 50, 20, 10, 4), "mbs=8 dp=2", 2, 100, 25},  // one core each
      {Profile(200, 50, 20, 10, 4), "mbs=4 dp=4", 1, 50, 25},   // half a core: 60, capped
      {slow_1t, "mbs=8 dp=2", 1, 80, 25},
      {slow_1t, "mbs=4 dp=2 tp=2", 0, 40, 25},
  };
  for (const auto& k : cases) {
    const std::string host = WriteTemp("host_threads.toml", HostProfileToml(k.profile));
    auto c = LoadRunConfig(
        base, {"run.host_profile=\"" + host + "\"", fmt::format("run.layout=\"{}\"", k.layout),
               fmt::format("run.threads={}", k.threads)});
    ASSERT_TRUE(c.ok()) << c.status().message();
    const spec::ClusterSpec hc = HostCluster(*c);
    EXPECT_DOUBLE_EQ(hc.peak_tflops * 1e3 * hc.gemm_efficiency, k.gflops)
        << k.layout << " threads " << k.threads;
    EXPECT_DOUBLE_EQ(EngineCostParams(*c).gemm_dim_overhead, k.dim_overhead) << k.layout;
  }
  // Between one thread and all of them the form is interpolated linearly.
  HostProfile four = Profile(400, 40, 20, 10, 4);
  four.threads = four.cores = 4;
  four.peak_gflops_1t = 120, four.gemm_dim_overhead_1t = 10;
  EXPECT_DOUBLE_EQ(four.FormAt(2.5).gflops, 120 + 0.5 * (400 - 120));
  EXPECT_DOUBLE_EQ(four.FormAt(2.5).dim_overhead, 10 + 0.5 * (40 - 10));
  EXPECT_DOUBLE_EQ(four.FormAt(8).gflops, 400);
  EXPECT_DOUBLE_EQ(four.FormAt(0.25).gflops, 30);
}

// A hand-written profile with [[comm]] at 2 ranks: a 2-rank run's link is that entry (bus
// efficiency 1: the fit is the achieved bandwidth), and its predicted dp all-reduce is the cost
// model's form at those numbers; a 4-rank run has no entry and keeps the stated bandwidth.
TEST(HostCluster, UsesTheCommEntryForItsRanks) {
  const std::string host = WriteTemp("host_comm.toml", R"([host]
threads = 2
cores = 2
peak_gflops = 100
gemm_dim_overhead = 30
peak_gflops_1t = 60
gemm_dim_overhead_1t = 20
mem_gbps = 12
attention_gflops = 8
stream_1t_gbps = 9

[[comm]]
ranks = 2
latency_us = 40
bus_gbps = 1.5
reduce_gbps = 0.5
)");
  const std::string base = std::string(PM_SOURCE_DIR) + "/configs/tiny-dense.toml";
  auto c = LoadRunConfig(base, {"run.host_profile=\"" + host + "\"", "run.layout=\"mbs=8 dp=2\""});
  ASSERT_TRUE(c.ok()) << c.status().message();
  const spec::ClusterSpec hc = HostCluster(*c);
  EXPECT_DOUBLE_EQ(hc.intra_node_gbps, 1.5);
  EXPECT_DOUBLE_EQ(hc.intra_node_latency_us, 40);
  EXPECT_DOUBLE_EQ(hc.intra_node_reduce_gbps, 0.5);
  EXPECT_DOUBLE_EQ(EngineCostParams(*c).bus_efficiency_intra, 1.0);
  EXPECT_EQ(EngineCostParams(*c).dp_overlap, 0.0);  // the engine reduces after the backward
  // ZeRO-0 at dp = 2: one all-reduce of the fp32 gradients, nothing hidden: the ring's two
  // transfers and one sum of half the gradients at the reduction rate.
  const cost::Estimate e = PredictRun(*c);
  const double grad_bytes = 4.0 * static_cast<double>(cost::CountParams(c->model).total);
  EXPECT_NEAR(e.time.dp, 2 * 40e-6 + 2 * 0.5 * grad_bytes / 1.5e9 + 0.5 * grad_bytes / 0.5e9, 1e-9);
  EXPECT_NEAR(e.time.dp,
              cost::IntraNodeCollectiveTime(cost::Collective::kAllReduce, 2, 40e-6, 1.5e9,
                                            grad_bytes, 0.5e9),
              1e-9);
  auto four =
      LoadRunConfig(base, {"run.host_profile=\"" + host + "\"", "run.layout=\"mbs=4 dp=4\""});
  ASSERT_TRUE(four.ok()) << four.status().message();
  EXPECT_DOUBLE_EQ(HostCluster(*four).intra_node_gbps, 12);  // no entry at 4: run.mem_gbps
  EXPECT_DOUBLE_EQ(HostCluster(*four).intra_node_latency_us, 0);
  EXPECT_DOUBLE_EQ(EngineCostParams(*four).bus_efficiency_intra,
                   cost::CostParams{}.bus_efficiency_intra);
}

}  // namespace
}  // namespace pentamesh::train

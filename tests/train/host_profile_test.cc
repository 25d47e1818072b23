// HostProfile: the GEMM-form fit against samples generated from known parameters (closed form),
// the TOML round trip, errors naming the field, and a run config that uses it.
#include "train/host_profile.h"

#include <gtest/gtest.h>

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

// A two-thread host profile with these numbers.
HostProfile Profile(double peak_gflops, double dim_overhead, double mem_gbps,
                    double attention_gflops, double stream_1t_gbps) {
  HostProfile p;
  p.threads = 2;
  p.peak_gflops = peak_gflops;
  p.gemm_dim_overhead = dim_overhead;
  p.mem_gbps = mem_gbps;
  p.attention_gflops = attention_gflops;
  p.stream_1t_gbps = stream_1t_gbps;
  return p;
}

// Samples from time = 2MNK / rate (1 + d (1/M + 1/N + 1/K)): the fit returns rate and d.
TEST(HostProfile, FitRecoversTheGemmForm) {
  HostProfile p;
  const double rate = 150e9, d = 40.0;
  for (const auto& s : {std::array<int64_t, 3>{128, 128, 128},
                        {1024, 1024, 1024},
                        {64, 1024, 512},
                        {1024, 128, 128},
                        {2048, 2048, 2048}}) {
    const double x = 1.0 / s[0] + 1.0 / s[1] + 1.0 / s[2];
    p.gemms.push_back({s[0], s[1], s[2], 2.0 * s[0] * s[1] * s[2] / rate * (1 + d * x)});
  }
  FitGemmForm(p);
  EXPECT_NEAR(p.peak_gflops, 150.0, 1e-6);
  EXPECT_NEAR(p.gemm_dim_overhead, 40.0, 1e-6);
  for (const GemmSample& s : p.gemms) EXPECT_NEAR(p.Predict(s) / s.seconds, 1.0, 1e-9);
}

TEST(HostProfile, TomlRoundTripAndErrors) {
  HostProfile p = Profile(201.5, 33.25, 21.5, 9.5, 12.25);
  p.gemms.push_back({256, 256, 256, 2e-4});
  const auto back = LoadHostProfile(WriteTemp("host_ok.toml", HostProfileToml(p)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_DOUBLE_EQ(back->peak_gflops, 201.5);
  EXPECT_DOUBLE_EQ(back->gemm_dim_overhead, 33.25);
  EXPECT_DOUBLE_EQ(back->mem_gbps, 21.5);
  EXPECT_DOUBLE_EQ(back->attention_gflops, 9.5);
  EXPECT_DOUBLE_EQ(back->stream_1t_gbps, 12.25);
  EXPECT_EQ(back->threads, 2);
  const auto bad = LoadHostProfile(WriteTemp(
      "host_bad.toml", "[host]\npeak_gflops = -1\nmem_gbps = 3\ngemm_dim_overhead = 1\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("host.peak_gflops: must be a positive number"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("host.attention_gflops"), std::string::npos);
  EXPECT_FALSE(LoadHostProfile(WriteTemp("host_none.toml", "[other]\n")).ok());
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
  EXPECT_DOUBLE_EQ(hc.peak_tflops * static_cast<double>(hc.gpus()), 0.2);
  EXPECT_DOUBLE_EQ(hc.gemm_efficiency, 1.0);
  const cost::CostParams cp = EngineCostParams(*c);
  EXPECT_DOUBLE_EQ(cp.gemm_dim_overhead, 50);
  // 4 ranks on 2 cores: each gets half a core's single-thread attention rate, over its 50 GFLOP/s.
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

}  // namespace
}  // namespace pentamesh::train

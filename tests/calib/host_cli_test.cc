// `pentamesh calibrate --host --np N` as a user runs it: a real `mpirun -np 2` measurement writes
// a profile that loads with a positive, finite link per rank count (HostCalibrateNp, slow), and
// every bad input exits 2 with the flag named before anything is measured (HostCalibrateBadInput).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "testing/cli_run.h"
#include "testing/temp_dir.h"
#include "train/host_profile.h"

namespace pentamesh {
namespace {

using testing::Pentamesh;
using testing::Shell;

// Under ASan the mpirun-launched ranks run without LeakSanitizer (testing/cli_run.h's Mpirun says
// why); the environment lets mpirun run as root in containers.
const std::string kEnv =
    "env ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

TEST(HostCalibrateNp, WritesALoadableProfileWithTheLink) {
  const std::string dir = testing::MakeTempDir("calibrate_np");
  const auto run =
      Shell(kEnv + fmt::format("{} calibrate --host --np 2 --threads 1 --repetitions 1 "
                               "--comm-max-bytes 65536 --out {}/host.toml",
                               PM_BINARY, dir));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("collectives at 2 ranks"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("joint (stored)"), std::string::npos) << run.out;
  const auto p = train::LoadHostProfile(dir + "/host.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->comm.size(), 1u);
  const train::CommProfile& c = p->comm.front();
  EXPECT_EQ(c.ranks, 2);
  EXPECT_TRUE(std::isfinite(c.fit.latency_us) && c.fit.latency_us >= 0) << c.fit.latency_us;
  EXPECT_TRUE(std::isfinite(c.fit.bus_gbps) && c.fit.bus_gbps > 0) << c.fit.bus_gbps;
  // Every collective at 4, 16 and 64 KiB, each timed (positive).
  EXPECT_EQ(c.samples.size(), 3u * cost::kCollectives.size());
  for (const train::CommSample& s : c.samples) EXPECT_GT(s.seconds, 0) << s.bytes;
  // --threads 1: the one-thread GEMM form is the measured one.
  EXPECT_EQ(p->peak_gflops_1t, p->peak_gflops);
}

struct BadCase {
  std::string args;    // after `pentamesh calibrate`
  std::string expect;  // in stderr
  std::string prefix;  // before the binary (environment)
};

TEST(HostCalibrateBadInput, ExitsTwoNamingTheFlag) {
  const std::string dir = testing::MakeTempDir("calibrate_np_bad");
  const std::string out = "--out " + dir + "/host.toml";
  const std::vector<BadCase> cases = {
      {"--host --np 1 " + out, "--np: 1 ranks; collectives need at least 2", ""},
      {"--host --np 0 " + out, "--np: 0 ranks; collectives need at least 2", ""},
      {fmt::format("--host --np {} {}", train::kMaxCommRanks + 1, out),
       fmt::format("--np: {} ranks is above the limit of {} ranks on one host",
                   train::kMaxCommRanks + 1, train::kMaxCommRanks),
       ""},
      {"--host --np 2,64 " + out, "--np: 64 ranks is above the limit", ""},
      {"--np 2 " + out, "--np: needs --host", ""},
      {"--host --np 2 " + out, "--np: 'mpirun' is not on PATH", "env PATH=/nonexistent "},
      {"--host --np 2 --out /nonexistent-dir/host.toml",
       "--out: cannot write '/nonexistent-dir/host.toml': directory '/nonexistent-dir' does not "
       "exist",
       ""},
      {"--host --np 2 --out " + dir, "is a directory", ""},
  };
  for (const BadCase& c : cases) {
    const auto run = Shell(fmt::format("{}{} calibrate {}", c.prefix, PM_BINARY, c.args));
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.out << run.err;
    EXPECT_NE(run.err.find(c.expect), std::string::npos) << c.args << "\n" << run.err;
    EXPECT_EQ(run.out.find("timing"), std::string::npos) << "measured before refusing: " << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/host.toml"));
}

}  // namespace
}  // namespace pentamesh

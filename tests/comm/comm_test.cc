// Parts of comm/ that need no second rank: the timeout setting, groups of one rank
// (SelfCommunicator: local results, nothing counted) and the argument checks (death tests).
// The collectives themselves are tested under mpirun in tests/mpi/.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"

namespace pentamesh::comm {
namespace {

using core::Dtype;

bool HasError(const core::Result<double>& r, const std::string& text) {
  return !r.ok() && r.status().message().find(text) != std::string::npos;
}

TEST(CommTimeout, OptionThenEnvironmentThenDefault) {
  EXPECT_EQ(*ResolveCommTimeout(5.0, "7"), 5.0);
  EXPECT_EQ(*ResolveCommTimeout(std::nullopt, "2.5"), 2.5);
  EXPECT_EQ(*ResolveCommTimeout(std::nullopt, nullptr), kDefaultCommTimeoutS);
}

TEST(CommTimeout, RejectsBadValuesNamingThem) {
  EXPECT_TRUE(HasError(ResolveCommTimeout(0.0, nullptr), "timeout_s=0"));
  EXPECT_TRUE(HasError(ResolveCommTimeout(-3.0, nullptr), "timeout_s=-3"));
  EXPECT_TRUE(HasError(ResolveCommTimeout(std::nan(""), nullptr), "timeout_s=nan"));
  for (const char* bad : {"abc", "", "0", "-1", "3x", "inf", "nan"}) {
    EXPECT_TRUE(HasError(ResolveCommTimeout(std::nullopt, bad),
                         std::string("PENTAMESH_COMM_TIMEOUT_S='") + bad + "'"))
        << bad;
  }
}

TEST(CommTimeout, WorldCreationFailsBeforeMpiInitOnBadEnvironment) {
  ASSERT_EQ(setenv(kCommTimeoutEnv, "soon", 1), 0);
  auto world = MpiWorld::Create();
  unsetenv(kCommTimeoutEnv);
  ASSERT_FALSE(world.ok());
  EXPECT_NE(world.status().message().find("PENTAMESH_COMM_TIMEOUT_S='soon'"), std::string::npos);
  int initialized = 1;
  MPI_Initialized(&initialized);
  EXPECT_EQ(initialized, 0);
}

TEST(SelfCommunicator, CollectivesAreLocalAndUncounted) {
  SelfCommunicator c("tp", 5);
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.Describe(), "tp {5}");
  float x[2] = {1.5f, -2.0f};
  c.all_reduce(x, 2, Dtype::kF32);
  EXPECT_EQ(x[0], 1.5f);
  float gathered[2] = {0, 0};
  c.all_gather(gathered, x, 2, Dtype::kF32);
  EXPECT_EQ(gathered[1], -2.0f);
  int64_t scattered = 0;
  const int64_t full = 9;
  c.reduce_scatter(&scattered, &full, 1, Dtype::kI64);
  EXPECT_EQ(scattered, 9);
  const std::vector<int64_t> counts = {3};
  const int32_t send[3] = {4, 5, 6};
  int32_t recv[3] = {0, 0, 0};
  c.all_to_all_v(recv, counts, send, counts, Dtype::kI32);
  EXPECT_EQ(recv[2], 6);
  int32_t shifted[3] = {0, 0, 0};
  c.send_recv(shifted, 3, 0, send, 3, 0, Dtype::kI32);
  EXPECT_EQ(shifted[1], 5);
  c.broadcast(x, 2, Dtype::kF32, 0);
  c.barrier();
  EXPECT_EQ(c.stats().total().calls, 0);
  EXPECT_EQ(c.stats().total().bytes_payload, 0);
  EXPECT_EQ(c.stats().total().bytes_wire, 0.0);
}

TEST(CommDeathTest, BadArgumentsNameTheGroup) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SelfCommunicator c("dp", 3);
  uint16_t half = 0;
  EXPECT_DEATH(c.all_reduce(&half, 1, Dtype::kBF16), "dp \\{3\\} all_reduce of bf16");
  float x = 0;
  EXPECT_DEATH(c.all_reduce(&x, -1, Dtype::kF32), "all_reduce count=-1");
  EXPECT_DEATH(c.send(&x, 1, Dtype::kF32, 0), "send: peer 0 is not another member");
  EXPECT_DEATH(c.recv(&x, 1, Dtype::kF32, 1), "recv: peer 1 is not another member");
  EXPECT_DEATH(c.broadcast(&x, 1, Dtype::kF32, 1), "broadcast root=1");
  const std::vector<int64_t> two = {1, 1};
  const std::vector<int64_t> one = {1};
  EXPECT_DEATH(c.all_to_all_v(&x, two, &x, one, Dtype::kF32), "recv_counts has 2 entries");
  const std::vector<int64_t> other = {2};
  EXPECT_DEATH(c.all_to_all_v(&x, other, &x, one, Dtype::kF32), "sends 1 to itself");
  EXPECT_DEATH(c.send_recv(&x, 1, 1, &x, 1, 0, Dtype::kF32), "send_recv src=1");
  float buf[4] = {0, 0, 0, 0};
  EXPECT_DEATH(c.reduce_scatter(buf, buf, 1, Dtype::kF32), "reduce_scatter: buffers overlap");
  EXPECT_DEATH(c.all_gather(buf + 1, buf, 2, Dtype::kF32), "all_gather: input overlaps output");
  c.all_gather(buf, buf, 1, Dtype::kF32);  // in place: the input is this rank's slot
  const std::vector<int64_t> three = {3};
  EXPECT_DEATH(c.all_to_all_v(buf + 1, three, buf, three, Dtype::kF32),
               "all_to_all_v: buffers overlap");
}

TEST(CommStats, TotalSumsOps) {
  CommStats stats;
  stats[Op::kAllReduce] = {.calls = 2, .bytes_payload = 10, .bytes_wire = 5.5, .time_s = 0.25};
  stats[Op::kSend] = {.calls = 1, .bytes_payload = 4, .bytes_wire = 4, .time_s = 0.5};
  const OpStats total = stats.total();
  EXPECT_EQ(total.calls, 3);
  EXPECT_EQ(total.bytes_payload, 14);
  EXPECT_EQ(total.bytes_wire, 9.5);
  EXPECT_EQ(total.time_s, 0.75);
  EXPECT_STREQ(OpName(Op::kAllToAllV), "all_to_all_v");
  EXPECT_STREQ(OpName(Op::kReduceScatter), "reduce_scatter");
}

}  // namespace
}  // namespace pentamesh::comm

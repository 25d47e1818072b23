// cost::EstimateGoodput against closed forms worked by hand here (numbers written out, not the
// module's functions): each checkpoint mode, the interval's floor, a run that never fails, and one
// that never progresses.
#include "cost/goodput.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pentamesh::cost {
namespace {

// 2 nodes x 8 GPUs, 8 NICs of 50 GB/s per node; a rank holds 10 GB of weights and 5 GB of
// optimizer state; the run takes 10 days and USD 1000 without failures.
spec::ClusterSpec Cluster() {
  spec::ClusterSpec c;
  c.gpus_per_node = 8;
  c.nodes = 2;
  c.nics_per_node = 8;
  c.inter_node_gbps = 50;
  return c;
}

Estimate TenDayRun() {
  Estimate e;
  e.fits = true;
  e.memory.weights = 10e9;
  e.memory.optimizer = 5e9;
  e.memory.activations = 30e9;  // not part of a checkpoint
  e.tokens_per_s = 1e6;
  e.days = 10;
  e.cost_usd = 1000;
  return e;
}

// 1 hardware failure per GPU-day (16 a day) + 2 network failures per node-day (4): 20 a day.
GoodputParams Params(CheckpointMode mode) {
  GoodputParams p;
  p.rates = {};
  p.rates.per_gpu_day[static_cast<size_t>(FailureKind::kHardware)] = 1;
  p.rates.per_node_day[static_cast<size_t>(FailureKind::kNetwork)] = 2;
  p.storage_write_gbps = 100;
  p.storage_read_gbps = 200;
  p.host_copy_gbps = 50;
  p.restart_s = 60;
  p.mode = mode;
  return p;
}

TEST(Goodput, Llama3RatesGiveLlama3sInterruptions) {
  spec::ClusterSpec c;
  c.gpus_per_node = 8;
  c.nodes = 2048;
  const FailureRates r = Llama3FailureRates();
  double per_day = 0;
  for (size_t k = 0; k < 3; ++k) per_day += r.per_gpu_day[k] * 16384 + r.per_node_day[k] * 2048;
  EXPECT_NEAR(per_day, 419.0 / 54.0, 1e-12);
  Estimate e = TenDayRun();
  EXPECT_NEAR(EstimateGoodput(c, e, GoodputParams{}).failures_per_day, 419.0 / 54.0, 1e-12);
}

TEST(Goodput, SyncWaitsForTheWholeWrite) {
  const Goodput g = EstimateGoodput(Cluster(), TenDayRun(), Params(CheckpointMode::kSync));
  // 15 GB per rank, 16 ranks: 240 GB. Copy 15/50 = 0.3 s, write 240/100 = 2.4 s, read 240/200.
  EXPECT_DOUBLE_EQ(g.checkpoint_bytes_rank, 15e9);
  EXPECT_DOUBLE_EQ(g.checkpoint_bytes_total, 240e9);
  EXPECT_NEAR(g.write_s, 2.7, 1e-12);
  EXPECT_NEAR(g.stall_s, 2.7, 1e-12);
  EXPECT_NEAR(g.read_s, 1.2, 1e-12);
  EXPECT_DOUBLE_EQ(g.lag_s, 0);
  // 20 failures a day: MTBF 4320 s; Young sqrt(2 x 2.7 x 4320) = sqrt(23328) = 152.7351...
  EXPECT_NEAR(g.mtbf_s, 4320, 1e-9);
  EXPECT_NEAR(g.interval_s, 152.73506473629428, 1e-9);
  const double lost = 152.73506473629428 / 2 + 60 + 1.2;  // 137.56753236814714
  EXPECT_NEAR(g.lost_per_failure_s, lost, 1e-9);
  const double goodput = 1 - 2.7 / 152.73506473629428 - lost / 4320;
  EXPECT_NEAR(g.goodput, goodput, 1e-12);
  EXPECT_NEAR(g.goodput, 0.950477, 1e-6);
  EXPECT_NEAR(g.lost_to_failures_per_day_s, 20 * lost, 1e-9);
  EXPECT_NEAR(g.stalls_per_day_s, 86400 * 2.7 / 152.73506473629428, 1e-9);
  EXPECT_NEAR(g.days, 10 / goodput, 1e-9);
  EXPECT_NEAR(g.days_lost, 10 / goodput - 10, 1e-9);
  EXPECT_NEAR(g.cost_usd, 1000 / goodput, 1e-9);
}

TEST(Goodput, AsyncStallsForTheCopyAndLagsByTheWrite) {
  const Goodput g = EstimateGoodput(Cluster(), TenDayRun(), Params(CheckpointMode::kAsync));
  EXPECT_NEAR(g.stall_s, 0.3, 1e-12);
  EXPECT_NEAR(g.write_s, 2.7, 1e-12);
  EXPECT_NEAR(g.lag_s, 2.7, 1e-12);
  const double interval = std::sqrt(2 * 0.3 * 4320.0);  // 50.91 s > the 2.7 s write
  EXPECT_NEAR(g.interval_s, interval, 1e-9);
  EXPECT_NEAR(g.goodput, 1 - 0.3 / interval - (interval / 2 + 2.7 + 60 + 1.2) / 4320, 1e-12);
}

TEST(Goodput, MemoryModeUsesThePartnersNicShare) {
  const Goodput g = EstimateGoodput(Cluster(), TenDayRun(), Params(CheckpointMode::kMemory));
  // NIC share per GPU: 8 x 50 / 8 = 50 GB/s; 15 GB each way takes 0.3 s.
  EXPECT_NEAR(g.stall_s, 0.3, 1e-12);
  EXPECT_NEAR(g.write_s, 0.6, 1e-12);
  EXPECT_NEAR(g.read_s, 0.3, 1e-12);
  const double interval = std::sqrt(2 * 0.3 * 4320.0);
  EXPECT_NEAR(g.goodput, 1 - 0.3 / interval - (interval / 2 + 0.6 + 60 + 0.3) / 4320, 1e-12);
}

TEST(Goodput, IntervalIsNeverShorterThanTheWrite) {
  GoodputParams p = Params(CheckpointMode::kAsync);
  p.storage_write_gbps = 1;  // 240 s to write; Young's interval is 50.9 s
  const Goodput g = EstimateGoodput(Cluster(), TenDayRun(), p);
  EXPECT_LT(g.young_interval_s, g.write_s);
  EXPECT_NEAR(g.interval_s, 240.3, 1e-9);
}

TEST(Goodput, NoFailuresNoLoss) {
  GoodputParams p = Params(CheckpointMode::kSync);
  p.rates = {};
  const Goodput g = EstimateGoodput(Cluster(), TenDayRun(), p);
  EXPECT_TRUE(g.progresses);
  EXPECT_DOUBLE_EQ(g.goodput, 1);
  EXPECT_DOUBLE_EQ(g.days, 10);
  EXPECT_DOUBLE_EQ(g.days_lost, 0);
  EXPECT_TRUE(std::isinf(g.interval_s));
}

TEST(Goodput, FailuresFasterThanRestartsNeverFinish) {
  GoodputParams p = Params(CheckpointMode::kSync);
  p.rates.per_gpu_day[static_cast<size_t>(FailureKind::kSoftware)] = 100;  // MTBF 54 s < restart
  const Goodput g = EstimateGoodput(Cluster(), TenDayRun(), p);
  EXPECT_FALSE(g.progresses);
  EXPECT_DOUBLE_EQ(g.goodput, 0);
  EXPECT_TRUE(std::isinf(g.days));
  EXPECT_DOUBLE_EQ(GoodputTokensPerS(Cluster(), TenDayRun(), p), 0);
}

// A layout change between phases: from's 16 ranks write 15 GB each (host copy at 50 GB/s, then
// 240 GB to the file system at 100 GB/s), restart 600 s, to's 16 ranks read 8 GB each (128 GB at
// 64 GB/s): 0.3 + 2.4 + 600 + 2 = 604.7 s, whatever the checkpoint mode.
TEST(Goodput, ReshardIsWriteRestartRead) {
  Estimate to = TenDayRun();
  to.memory.weights = 6e9;
  to.memory.optimizer = 2e9;
  for (CheckpointMode mode :
       {CheckpointMode::kSync, CheckpointMode::kAsync, CheckpointMode::kMemory}) {
    GoodputParams p = Params(mode);
    p.host_copy_gbps = 50;
    p.storage_write_gbps = 100;
    p.storage_read_gbps = 64;
    p.restart_s = 600;
    const Reshard r = EstimateReshard(Cluster(), TenDayRun(), to, p);
    EXPECT_DOUBLE_EQ(r.bytes_written, 240e9);
    EXPECT_DOUBLE_EQ(r.bytes_read, 128e9);
    EXPECT_DOUBLE_EQ(r.write_s, 0.3 + 2.4);
    EXPECT_DOUBLE_EQ(r.read_s, 2.0);
    EXPECT_DOUBLE_EQ(r.restart_s, 600);
    EXPECT_DOUBLE_EQ(r.seconds, 604.7);
  }
}

}  // namespace
}  // namespace pentamesh::cost

// The planner's fast API: closed forms vs the memoized simulator, errors, thread safety, speed.
#include "schedule/estimate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace pentamesh::schedule {
namespace {

TEST(Estimate, BubbleFractionEqualsSimulatorEverywhereInTheSweep) {
  for (Schedule kind :
       {Schedule::kGPipe, Schedule::kOneFOneB, Schedule::kInterleaved, Schedule::kZeroBubble}) {
    for (int pp = 1; pp <= 8; ++pp) {
      for (int m = 1; m <= 32; ++m) {
        for (int v = 1; v <= 4; ++v) {
          const ScheduleSpec s{kind, pp, m, v};
          if (!ValidateSchedule(s).ok()) continue;
          auto fast = BubbleFraction(kind, pp, m, v);
          auto simulated = BubbleFractionSimulated(s);
          ASSERT_TRUE(fast.ok() && simulated.ok());
          EXPECT_NEAR(*fast, *simulated, 1e-12) << ToString(s) << " pp=" << pp << " m=" << m;
        }
      }
    }
  }
}

// ZB-H1 below m = p: makespan 2m + 2p - 1 (the sweep checks it against the simulator everywhere).
TEST(Estimate, ZeroBubbleBelowPHasAClosedFormTooAndItIsTheSimulators) {
  EXPECT_TRUE(BubbleFractionClosedForm({Schedule::kZeroBubble, 4, 3, 1}).has_value());
  EXPECT_TRUE(BubbleFractionClosedForm({Schedule::kZeroBubble, 4, 4, 1}).has_value());
  EXPECT_FALSE(BubbleFractionClosedForm({Schedule::kZeroBubble, 4, 3, 2}).has_value());  // ZB-V
  // pp=2, m=1: F0 [0,1] F0 [1,2] B0 [2,3] W0 [3,4]; rank 0 B0 [3,4] W0 [4,5]. Makespan 5, busy 3.
  EXPECT_DOUBLE_EQ(*BubbleFraction(Schedule::kZeroBubble, 2, 1), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(*BubbleFractionClosedForm({Schedule::kZeroBubble, 2, 1, 1}), 2.0 / 5.0);
  for (int p = 2; p <= 8; ++p) {
    for (int m = 1; m < p; ++m) {
      const ScheduleSpec s{Schedule::kZeroBubble, p, m, 1};
      EXPECT_NEAR(*BubbleFractionClosedForm(s), *BubbleFractionSimulated(s), 1e-12)
          << "pp=" << p << " m=" << m;
    }
  }
}

TEST(Estimate, ClosedFormsAnswerBeyondTheSimulatorsLimit) {
  auto bubble = BubbleFraction(Schedule::kInterleaved, 1024, 65536, 64);
  ASSERT_TRUE(bubble.ok()) << bubble.status().message();
  EXPECT_DOUBLE_EQ(*bubble, 1023.0 / (64.0 * 65536 + 1023));
  EXPECT_EQ(*PeakInFlight(Schedule::kOneFOneB, 1024, 65536, 1, 1000), 24);
}

TEST(Estimate, RejectsInvalidInput) {
  auto bad_m = BubbleFraction(Schedule::kInterleaved, 4, 6, 2);
  ASSERT_FALSE(bad_m.ok());
  EXPECT_NE(bad_m.status().message().find("microbatches=6 must be divisible by pp=4"),
            std::string::npos);
  auto bad_rank = PeakInFlight(Schedule::kOneFOneB, 4, 8, 1, 7);
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_NE(bad_rank.status().message().find("rank=7 must be in [0, pp=4)"), std::string::npos);
  EXPECT_FALSE(PeakInFlight(Schedule::kGPipe, 0, 8, 1, 0).ok());
  EXPECT_FALSE(BubbleFractionSimulated({Schedule::kOneFOneB, 2, 0, 1}).ok());
}

TEST(Estimate, MemoIsThreadSafe) {
  // Many threads race to fill the memo for the same specs; every answer equals a fresh simulation.
  std::vector<std::thread> threads;
  std::vector<std::vector<double>> answers(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &answers] {
      for (int pp = 2; pp <= 8; ++pp) {
        for (int m = 1; m < pp; ++m) {
          answers[t].push_back(*BubbleFractionSimulated({Schedule::kZeroBubble, pp, m, 1}));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  size_t i = 0;
  for (int pp = 2; pp <= 8; ++pp) {
    for (int m = 1; m < pp; ++m, ++i) {
      const double fresh =
          SimulateSchedule({Schedule::kZeroBubble, pp, m, 1}, Costs::Equal())->bubble_fraction;
      for (int t = 0; t < 8; ++t) EXPECT_EQ(answers[t][i], fresh);
    }
  }
}

template <typename Fn>
double NsPerCall(int calls, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  double sink = 0;
  for (int i = 0; i < calls; ++i) sink += fn(i);
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(sink, 0);  // keeps the loop
  return ns / calls;
}

TEST(Estimate, FastPathSpeed) {
  // Prints ns/call (the number in docs/schedules.md comes from the release build). The checks are
  // relative, so they hold under sanitizers and on a loaded machine: a closed form or memo hit
  // must be far cheaper than the simulation it replaces.
  constexpr int kCalls = 1 << 18;
  const double closed_ns = NsPerCall(
      kCalls, [](int i) { return *BubbleFraction(Schedule::kOneFOneB, 2 + i % 7, 1 + i % 64); });
  const double interleaved_ns = NsPerCall(kCalls, [](int i) {
    return *BubbleFraction(Schedule::kInterleaved, 4, 4 * (1 + i % 16), 2 + i % 3);
  });
  (void)BubbleFraction(Schedule::kZeroBubble, 8, 3);  // warm the memo
  const double memo_ns =
      NsPerCall(kCalls, [](int) { return *BubbleFraction(Schedule::kZeroBubble, 8, 3); });
  const double peak_ns = NsPerCall(
      kCalls, [](int i) { return double(*PeakInFlight(Schedule::kInterleaved, 8, 64, 4, i % 8)); });
  const double simulate_zb_ns = NsPerCall(256, [](int) {
    return SimulateSchedule({Schedule::kZeroBubble, 8, 3, 1}, Costs::Equal())->bubble_fraction;
  });
  const double simulate_1f1b_ns = NsPerCall(256, [](int i) {
    return SimulateSchedule({Schedule::kOneFOneB, 2 + i % 7, 1 + i % 64, 1}, Costs::Equal())
        ->makespan_s;
  });
  std::printf(
      "ns/call: BubbleFraction closed form %.1f (1f1b), %.1f (interleaved), memo hit %.1f; "
      "PeakInFlight %.1f; a fresh simulation %.0f (zb pp=8 m=3), %.0f (1f1b)\n",
      closed_ns, interleaved_ns, memo_ns, peak_ns, simulate_zb_ns, simulate_1f1b_ns);
  EXPECT_LT(closed_ns * 10, simulate_1f1b_ns);
  EXPECT_LT(memo_ns * 5, simulate_zb_ns);
}

TEST(Estimate, SimulateScheduleWithUnequalCosts) {
  // 1F1B with uniform stages: makespan (m + p - 1)(T_F + T_B + T_W) for any costs.
  Costs costs;
  costs.per_stage = {{.time_f_s = 0.7, .time_b_s = 1.1, .time_w_s = 0.4}};
  for (int pp = 1; pp <= 6; ++pp) {
    for (int m = 1; m <= 12; ++m) {
      auto sim = SimulateSchedule({Schedule::kOneFOneB, pp, m, 1}, costs);
      ASSERT_TRUE(sim.ok());
      EXPECT_NEAR(sim->makespan_s, (m + pp - 1) * 2.2, 1e-9) << "pp=" << pp << " m=" << m;
    }
  }
  auto bad = SimulateSchedule({Schedule::kGPipe, 2, 4, 2}, costs);
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace pentamesh::schedule

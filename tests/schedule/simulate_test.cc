// The simulator on small hand-checked cases: timing, latency, per-stage costs, memory, deadlock
// reports, malformed input, completeness and pairing failures.
#include "schedule/simulate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "schedule/generate.h"

namespace pentamesh::schedule {
namespace {

std::vector<Program> All(Schedule kind, int pp, int m, int v = 1) {
  auto programs = MakeAll({kind, pp, m, v});
  EXPECT_TRUE(programs.ok()) << programs.status().message();
  return *programs;
}

TEST(Simulate, OneFOneBTwoStagesByHand) {
  // pp=2, m=2, F=1, full B=2. Rank 0: F0 [0,1] F1 [1,2] B0 [5,7] B1 [9,11];
  // rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]... B1 needs F1 of rank 1 [4,5] -> [5,7].
  const Topology t{2, 1, 2};
  auto r = Simulate(All(Schedule::kOneFOneB, 2, 2), t);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->complete);
  ASSERT_EQ(r->timeline[0].size(), 4u);
  EXPECT_EQ(r->timeline[1][0].start_s, 1.0);
  EXPECT_EQ(r->timeline[1][1].start_s, 2.0);  // B0 on the last stage right after F0
  EXPECT_EQ(r->timeline[1][2].start_s, 4.0);  // F1 waits for B0 (program order)
  EXPECT_EQ(r->timeline[0][2].start_s, 4.0);  // B0 on rank 0 after rank 1's B0 [2,4]
  EXPECT_EQ(r->timeline[0][3].start_s, 7.0);  // B1 after rank 1's B1 [5,7]
  EXPECT_EQ(r->makespan_s, 9.0);              // (m + p - 1) * 3
  EXPECT_EQ(r->ranks[0].busy_s, 6.0);
  EXPECT_EQ(r->ranks[0].idle_s, 3.0);
  EXPECT_DOUBLE_EQ(r->bubble_fraction, 1.0 / 3.0);  // (p-1)/(m+p-1)
  EXPECT_DOUBLE_EQ(r->bubble_ratio, 0.5);           // (p-1)/m
  EXPECT_EQ(r->ranks[0].peak_in_flight, 2);
  EXPECT_EQ(r->ranks[1].peak_in_flight, 1);
}

TEST(Simulate, P2pLatencyIsAddedOnlyAcrossRanks) {
  Costs costs;
  costs.time_p2p_s = 0.5;
  auto r = Simulate(All(Schedule::kOneFOneB, 2, 1), {2, 1, 1}, costs);
  ASSERT_TRUE(r.ok());
  // F0 [0,1], +0.5, F0 [1.5,2.5], B0 [2.5,4.5] (own F: no latency), +0.5, B0 [5,7].
  EXPECT_DOUBLE_EQ(r->makespan_s, 7.0);
}

TEST(Simulate, PerStageCostsAndSplitBackward) {
  Costs costs;
  costs.per_stage = {{.time_f_s = 1, .time_b_s = 1, .time_w_s = 1},
                     {.time_f_s = 2, .time_b_s = 3, .time_w_s = 4}};
  // ZB-H1, pp=2, m=1: rank 0 F0 B0 W0; rank 1 F0 B0 W0 (B split: B costs time_b_s only).
  auto r = Simulate(All(Schedule::kZeroBubble, 2, 1), {2, 1, 1}, costs);
  ASSERT_TRUE(r.ok());
  // F0 [0,1]; F0 [1,3]; B0 [3,6]; W0 [6,10]; rank 0 B0 [6,7]; W0 [7,8].
  EXPECT_DOUBLE_EQ(r->timeline[1][1].end_s, 6.0);
  EXPECT_DOUBLE_EQ(r->timeline[0][2].end_s, 8.0);
  EXPECT_DOUBLE_EQ(r->makespan_s, 10.0);
  // The same stages with a full backward (GPipe): B costs time_b_s + time_w_s.
  auto g = Simulate(All(Schedule::kGPipe, 2, 1), {2, 1, 1}, costs);
  ASSERT_TRUE(g.ok());
  // F0 [0,1]; F0 [1,3]; B0 [3,10]; B0 [10,12].
  EXPECT_DOUBLE_EQ(g->makespan_s, 12.0);
}

TEST(Simulate, ReportsDeadlockWithWhoWaitsOnWhat) {
  // Rank 1 runs micro-batch 1 first, but rank 0 only sends F1 after its B0 -> a cycle.
  const std::vector<Program> programs = {{F(0), B(0), F(1), B(1)}, {F(1), B(1), F(0), B(0)}};
  auto r = Simulate(programs, {2, 1, 2});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->ranks[0].actions_done, 1);
  EXPECT_EQ(r->ranks[1].actions_done, 0);
  EXPECT_NE(r->deadlock.find("rank 0 stuck at action #1 B0 (stage 0), waiting for B0 on rank 1 "
                             "(which is at #0 F1)"),
            std::string::npos)
      << r->deadlock;
  EXPECT_NE(r->deadlock.find("rank 1 stuck at action #0 F1 (stage 1), waiting for F1 on rank 0 "
                             "(which is at #1 B0)"),
            std::string::npos)
      << r->deadlock;
  EXPECT_NE(r->deadlock.find("rank 0"), std::string::npos);
  EXPECT_NE(r->deadlock.find("F0"), std::string::npos);  // the grid of what ran
}

TEST(Simulate, MissingProducerIsADeadlock) {
  // Rank 0 never runs F1: rank 1 waits forever on it.
  auto r = Simulate({{F(0), B(0)}, {F(0), B(0), F(1), B(1)}}, {2, 1, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->complete);
  EXPECT_NE(r->deadlock.find("which has finished its program without it"), std::string::npos)
      << r->deadlock;
}

TEST(Simulate, RejectsMalformedInput) {
  struct Case {
    std::vector<Program> programs;
    Topology t;
    Costs costs;
    const char* expect;
  };
  Costs bad_cost;
  bad_cost.per_stage[0].time_b_s = -1;
  Costs wrong_len;
  wrong_len.per_stage = {ActionCosts{}, ActionCosts{}, ActionCosts{}};
  Costs bad_p2p;
  bad_p2p.time_p2p_s = -0.1;
  for (const Case& c : {
           Case{{{F(0), B(0)}}, {2, 1, 1}, Costs{}, "1 programs given for pp=2"},
           Case{{{F(0, 1), B(0, 1)}}, {1, 1, 1}, Costs{}, "rank 0 action #0 F0.1: chunk must be"},
           Case{{{F(2), B(2)}}, {1, 1, 2}, Costs{}, "micro-batch in [0, 2)"},
           Case{{{F(0), F(0), B(0)}}, {1, 1, 1}, Costs{}, "action #1 F0.0 is listed twice"},
           Case{{{F(0), B(0)}}, {1, 1, 1}, bad_cost, "action cost -1 must be finite"},
           Case{{{F(0), B(0)}, {F(0), B(0)}}, {2, 1, 1}, wrong_len, "has 3 entries, need 1 or 2"},
           Case{{{F(0), B(0)}}, {1, 1, 1}, bad_p2p, "time_p2p_s=-0.1"},
           Case{{}, {0, 1, 1}, Costs{}, "pp=0 V=1 m=1 must all be >= 1"},
           Case{{{F(0), B(0)}, {F(0), B(0)}},
                {2, 3, 1, Placement::kVShape},
                Costs{},
                "V-shaped placement needs V=2 (V=3)"},
           Case{std::vector<Program>(512), {512, 4, 4096}, Costs{}, "m * pp * V = 8388608 exceeds"},
       }) {
    auto r = Simulate(c.programs, c.t, c.costs);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(Simulate, PeakInFlightFreesAtWWhenSplitElseAtB) {
  EXPECT_EQ(PeakInFlight({F(0), F(1), F(2), B(0), B(1), B(2)}, 1, 3), 3);
  EXPECT_EQ(PeakInFlight({F(0), B(0), F(1), B(1)}, 1, 2), 1);
  // Split: B does not free, W does.
  EXPECT_EQ(PeakInFlight({F(0), B(0), F(1), B(1), W(0), W(1)}, 1, 2), 2);
  EXPECT_EQ(PeakInFlight({F(0), B(0), W(0), F(1), B(1), W(1)}, 1, 2), 1);
  // Chunks count separately.
  EXPECT_EQ(PeakInFlight({F(0, 0), F(0, 1), B(0, 1), B(0, 0)}, 2, 1), 2);
}

TEST(PeakInFlightDeathTest, OutOfRangeActionIsAProgrammerError) {
  EXPECT_DEATH(PeakInFlight({F(0, 2)}, 2, 1), "chunk");
  EXPECT_DEATH(PeakInFlight({F(3)}, 1, 2), "microbatch");
}

TEST(ExpandComm, DerivesTransfersFromComputeOrder) {
  const Topology t{3, 1, 2};
  auto program = Make(Schedule::kOneFOneB, 3, 1, 2);  // F0 F1 B0 B1 on the middle rank
  ASSERT_TRUE(program.ok());
  const std::vector<CommOp> expect = {
      {CommKind::kRecvF, 0, 0, 0, 0}, {CommKind::kSendF, 2, 0, 1, 0},
      {CommKind::kRecvF, 0, 1, 0, 1}, {CommKind::kSendF, 2, 1, 1, 1},
      {CommKind::kRecvB, 2, 0, 2, 2}, {CommKind::kSendB, 0, 0, 1, 2},
      {CommKind::kRecvB, 2, 1, 2, 3}, {CommKind::kSendB, 0, 1, 1, 3}};
  EXPECT_EQ(ExpandComm(*program, t, 1), expect);
  // The last stage receives activations but sends none forward; it starts the backward.
  const auto last = ExpandComm(*Make(Schedule::kOneFOneB, 3, 2, 2), t, 2);
  for (const CommOp& op : last) EXPECT_NE(op.kind, CommKind::kSendF);
  EXPECT_EQ(last.size(), 4u);
}

TEST(ExpandComm, InterleavedWrapsFromLastRankToFirst) {
  const Topology t{2, 2, 2};
  // Chunk 1 of rank 0 is stage 2: its input comes from stage 1 on rank 1.
  const auto ops = ExpandComm({F(0, 1)}, t, 0);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0], (CommOp{CommKind::kRecvF, 1, 0, 1, 0}));
  EXPECT_EQ(ops[1], (CommOp{CommKind::kSendF, 1, 0, 2, 0}));
}

TEST(CheckComplete, FindsMissingDuplicateAndPartialW) {
  const Topology t{2, 1, 2};
  EXPECT_TRUE(CheckComplete(All(Schedule::kOneFOneB, 2, 2), t, false).ok());
  auto missing = CheckComplete({{F(0), F(1), B(0), B(1)}, {F(0), B(0), F(1)}}, t, false);
  EXPECT_NE(missing.message().find(
                "micro-batch 1 stage 1 (rank 1 chunk 0) has 0 B action(s), expected 1"),
            std::string::npos)
      << missing.message();
  auto dup = CheckComplete({{F(0), F(0), B(0)}, {F(0), B(0)}}, {2, 1, 1}, false);
  EXPECT_NE(dup.message().find("has 2 F action(s)"), std::string::npos) << dup.message();
  auto partial_w = CheckComplete({{F(0), B(0), W(0)}, {F(0), B(0)}}, {2, 1, 1}, false);
  EXPECT_NE(partial_w.message().find("stage 1 (rank 1 chunk 0) has 0 W action(s)"),
            std::string::npos)
      << partial_w.message();
  auto need_w = CheckComplete(All(Schedule::kOneFOneB, 2, 2), t, /*require_w=*/true);
  EXPECT_FALSE(need_w.ok());
  EXPECT_FALSE(CheckComplete({{}, {}}, {2, 1, 0}, false).ok());
  EXPECT_FALSE(CheckComplete({{}, {}}, {2, 1, 1, Placement::kVShape}, false).ok());
  auto range = CheckComplete({{F(5)}, {}}, t, false);
  EXPECT_NE(range.message().find("out-of-range action F5.0"), std::string::npos);
}

TEST(CheckCommPairing, FindsOrderAndCountMismatches) {
  const Topology t{2, 1, 2};
  EXPECT_TRUE(CheckCommPairing(All(Schedule::kGPipe, 2, 2), t).ok());
  // Rank 1 consumes micro-batch 1 first: FIFO matching would hand it micro-batch 0's activation.
  auto order = CheckCommPairing({{F(0), F(1), B(0), B(1)}, {F(1), F(0), B(0), B(1)}}, t);
  EXPECT_NE(order.message().find(
                "rank 0 -> rank 1 (activations) message #0: sent micro-batch 0 of stage 0, "
                "received as micro-batch 1 of stage 0"),
            std::string::npos)
      << order.message();
  auto count = CheckCommPairing({{F(0), F(1), B(0), B(1)}, {F(0), B(0)}}, t);
  EXPECT_NE(count.message().find("rank 0 -> rank 1 (activations): 2 sends but 1 receives"),
            std::string::npos)
      << count.message();
}

}  // namespace
}  // namespace pentamesh::schedule

namespace pentamesh::schedule {
namespace {

// An independent oracle for random programs: the schedule is the DAG of program-order edges plus
// data-dependency edges. Deadlock-free iff the DAG is acyclic (Kahn), and then every action's
// simulated end equals its longest-path end time.
struct Oracle {
  bool acyclic = false;
  double makespan_s = 0.0;
};

Oracle LongestPath(const std::vector<Program>& programs, const Topology& t, const Costs& costs) {
  struct Node {
    int rank;
    size_t index;
  };
  std::vector<Node> nodes;
  std::map<std::tuple<int, int, int>, size_t> id;  // (kind, mb, stage) -> node
  std::vector<uint8_t> split(static_cast<size_t>(t.microbatches * t.stages()), 0);
  for (int r = 0; r < t.pp; ++r) {
    for (size_t i = 0; i < programs[r].size(); ++i) {
      const Action& a = programs[r][i];
      const int s = t.Stage(r, a.chunk);
      id[{static_cast<int>(a.kind), a.microbatch, s}] = nodes.size();
      nodes.push_back({r, i});
      if (a.kind == ActionKind::kWeight) split[a.microbatch * t.stages() + s] = 1;
    }
  }
  std::vector<std::vector<std::pair<size_t, double>>> out(nodes.size());  // (to, latency)
  std::vector<int> indegree(nodes.size(), 0);
  auto edge = [&](size_t from, size_t to, double latency_s) {
    out[from].push_back({to, latency_s});
    ++indegree[to];
  };
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Action& a = programs[nodes[n].rank][nodes[n].index];
    const int s = t.Stage(nodes[n].rank, a.chunk);
    if (nodes[n].index > 0) edge(n - 1, n, 0.0);  // program order (nodes of a rank are adjacent)
    auto dep = [&](ActionKind kind, int stage) {
      const size_t from = id.at({static_cast<int>(kind), a.microbatch, stage});
      edge(from, n, t.RankOf(stage) != nodes[n].rank ? costs.time_p2p_s : 0.0);
    };
    if (a.kind == ActionKind::kForward && s > 0) dep(ActionKind::kForward, s - 1);
    if (a.kind == ActionKind::kBackward) dep(ActionKind::kForward, s);
    if (a.kind == ActionKind::kBackward && s < t.stages() - 1) dep(ActionKind::kBackward, s + 1);
    if (a.kind == ActionKind::kWeight) dep(ActionKind::kBackward, s);
  }
  std::vector<double> start(nodes.size(), 0.0);
  std::vector<size_t> ready;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (indegree[n] == 0) ready.push_back(n);
  }
  Oracle oracle;
  size_t visited = 0;
  while (!ready.empty()) {
    const size_t n = ready.back();
    ready.pop_back();
    ++visited;
    const Action& a = programs[nodes[n].rank][nodes[n].index];
    const int s = t.Stage(nodes[n].rank, a.chunk);
    const ActionCosts& c = costs.at(s);
    const double cost = a.kind == ActionKind::kForward ? c.time_f_s
                        : a.kind == ActionKind::kWeight
                            ? c.time_w_s
                            : c.time_b_s + (split[a.microbatch * t.stages() + s] ? 0 : c.time_w_s);
    const double end = start[n] + cost;
    oracle.makespan_s = std::max(oracle.makespan_s, end);
    for (const auto& [to, latency_s] : out[n]) {
      start[to] = std::max(start[to], end + latency_s);
      if (--indegree[to] == 0) ready.push_back(to);
    }
  }
  oracle.acyclic = visited == nodes.size();
  return oracle;
}

TEST(Simulate, RandomProgramsAgreeWithTheDagOracle) {
  std::mt19937 rng(7);
  int deadlocks = 0, completes = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int pp = 1 + static_cast<int>(rng() % 4), v = 1 + static_cast<int>(rng() % 2);
    const int m = 1 + static_cast<int>(rng() % 4);
    const bool split = rng() % 2 == 0;
    const Placement placement = v == 2 && rng() % 2 == 0 ? Placement::kVShape : Placement::kLoop;
    const Topology t{pp, v, m, placement};
    std::vector<Program> programs(static_cast<size_t>(pp));
    for (int r = 0; r < pp; ++r) {
      // Start from a dependency-respecting order (all F by stage, then all B by reverse stage),
      // then apply a few random adjacent swaps: some results deadlock, some do not.
      for (int c = 0; c < v; ++c) {
        for (int mb = 0; mb < m; ++mb) programs[r].push_back(F(mb, c));
      }
      for (int c = v - 1; c >= 0; --c) {
        for (int mb = 0; mb < m; ++mb) {
          programs[r].push_back(B(mb, c));
          if (split) programs[r].push_back(W(mb, c));
        }
      }
      const int swaps = static_cast<int>(rng() % 4);
      for (int k = 0; k < swaps && programs[r].size() > 1; ++k) {
        const size_t i = rng() % (programs[r].size() - 1);
        std::swap(programs[r][i], programs[r][i + 1]);
      }
    }
    Costs costs;
    costs.per_stage = {{0.5 + rng() % 3, 0.5 + rng() % 3, 0.25 + rng() % 2}};
    costs.time_p2p_s = 0.1 * static_cast<double>(rng() % 3);
    auto sim = Simulate(programs, t, costs);
    ASSERT_TRUE(sim.ok()) << sim.status().message();
    const Oracle oracle = LongestPath(programs, t, costs);
    ASSERT_EQ(sim->complete, oracle.acyclic) << "trial " << trial << "\n" << sim->deadlock;
    if (sim->complete) {
      ++completes;
      EXPECT_NEAR(sim->makespan_s, oracle.makespan_s, 1e-9) << "trial " << trial;
      EXPECT_TRUE(CheckComplete(programs, t, split).ok());
    } else {
      ++deadlocks;
      EXPECT_NE(sim->deadlock.find("stuck at action"), std::string::npos);
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(deadlocks, 50);
  EXPECT_GT(completes, 50);
}

}  // namespace
}  // namespace pentamesh::schedule

// Every Communicator op on every group of the meshes that fit this world (8 ranks: a 2x2x2
// {pp,dp,tp} mesh, a folded-EP {dp,cp,tp} mesh and a separate-EP {dp,ep,cp} mesh; 3 ranks: dp=3;
// 1 rank: the trivial mesh), run under mpirun. Inputs are the world rank, so every expected
// value is a closed form over the group's members; the counters must equal docs/comm.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "mesh/mesh.h"
#include "tests/mpi/mpi_test_main.h"

namespace pentamesh {
namespace {

using comm::Communicator;
using comm::Op;
using core::Dtype;
using mesh::GroupKind;
using mesh::Mesh;
using mpitest::TestWorld;

std::vector<spec::Layout> LayoutsFor(int world_size) {
  std::vector<spec::Layout> out;
  spec::Layout l;
  switch (world_size) {
    case 1:
      out.push_back(l);
      break;
    case 3:
      l.dp = 3;
      out.push_back(l);
      break;
    case 8:
      l.pp = 2, l.dp = 2, l.tp = 2;
      out.push_back(l);
      l = {};
      l.dp = 2, l.cp = 2, l.tp = 2, l.ep = 2, l.ep_placement = spec::EpPlacement::kFolded;
      out.push_back(l);
      l = {};
      l.dp = 2, l.ep = 2, l.cp = 2, l.ep_placement = spec::EpPlacement::kSeparate;
      out.push_back(l);
      break;
    default:
      break;
  }
  return out;
}

// The meshes of this world, built once (communicator creation is collective) and freed in
// TearDown, before MPI_Finalize.
class MeshEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    for (const spec::Layout& layout : LayoutsFor(TestWorld().size())) {
      auto mesh = Mesh::Create(layout, TestWorld());
      ASSERT_TRUE(mesh.ok()) << mesh.status().message();
      meshes_.push_back(std::make_unique<Mesh>(std::move(mesh).value()));
    }
  }
  void TearDown() override { meshes_.clear(); }
  static std::vector<std::unique_ptr<Mesh>> meshes_;
};
std::vector<std::unique_ptr<Mesh>> MeshEnvironment::meshes_;
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new MeshEnvironment);

// Every communicator under test: each mesh's seven groups, plus the world.
std::vector<Communicator*> AllGroups() {
  std::vector<Communicator*> out = {&TestWorld().world()};
  for (const auto& mesh : MeshEnvironment::meshes_) {
    for (GroupKind kind : mesh::kAllGroupKinds) out.push_back(&mesh->group(kind));
  }
  return out;
}

int64_t SumOfMembers(const Communicator& c) {
  return std::accumulate(c.world_ranks().begin(), c.world_ranks().end(), int64_t{0});
}

// Checks the counters of `op` after exactly one call of it since the last reset.
void ExpectOneCall(const Communicator& c, Op op, int64_t bytes_payload, double bytes_wire) {
  const comm::OpStats& s = c.stats()[op];
  if (c.size() == 1) {  // a group of one never communicates and counts nothing
    EXPECT_EQ(c.stats().total().calls, 0) << c.Describe();
    EXPECT_EQ(c.stats().total().bytes_payload, 0) << c.Describe();
    return;
  }
  EXPECT_EQ(s.calls, 1) << c.Describe() << " " << comm::OpName(op);
  EXPECT_EQ(s.bytes_payload, bytes_payload) << c.Describe() << " " << comm::OpName(op);
  EXPECT_DOUBLE_EQ(s.bytes_wire, bytes_wire) << c.Describe() << " " << comm::OpName(op);
  EXPECT_GE(s.time_s, 0.0);
  EXPECT_EQ(c.stats().total().calls, 1) << c.Describe() << " other ops were counted";
}

TEST(Collectives, MeshesExist) {
  EXPECT_EQ(MeshEnvironment::meshes_.size(), LayoutsFor(TestWorld().size()).size());
  EXPECT_FALSE(MeshEnvironment::meshes_.empty()) << "no layout for world " << TestWorld().size();
}

TEST(Collectives, AllReduceF32I32I64) {
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int g = c->size();
    const int64_t sum = SumOfMembers(*c);
    c->reset_stats();
    std::vector<float> f(5);
    for (int k = 0; k < 5; ++k) f[static_cast<size_t>(k)] = static_cast<float>(r + k);
    c->all_reduce(f.data(), 5, Dtype::kF32);
    for (int k = 0; k < 5; ++k) EXPECT_EQ(f[static_cast<size_t>(k)], sum + g * k);
    // Ring all-reduce of n = 20 bytes: 2(g-1)/g * n; e.g. g=2: 20, g=4: 30, g=8: 35.
    ExpectOneCall(*c, Op::kAllReduce, 20, 2.0 * (g - 1) * 20 / g);

    c->reset_stats();
    std::vector<int64_t> big = {int64_t{r} * 1'000'000'000'000, -r};
    c->all_reduce(big.data(), 2, Dtype::kI64);
    EXPECT_EQ(big[0], sum * 1'000'000'000'000);
    EXPECT_EQ(big[1], -sum);
    ExpectOneCall(*c, Op::kAllReduce, 16, 2.0 * (g - 1) * 16 / g);

    c->reset_stats();
    int32_t one = r;
    c->all_reduce(&one, 1, Dtype::kI32);
    EXPECT_EQ(one, sum);
    ExpectOneCall(*c, Op::kAllReduce, 4, 2.0 * (g - 1) * 4 / g);
  }
}

TEST(Collectives, AllGatherOutOfPlaceAndInPlace) {
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int g = c->size();
    const int i = c->rank();
    c->reset_stats();
    const std::vector<float> in = {static_cast<float>(r), r + 0.5f, static_cast<float>(i)};
    std::vector<float> out(static_cast<size_t>(3 * g), -1.0f);
    c->all_gather(out.data(), in.data(), 3, Dtype::kF32);
    for (int j = 0; j < g; ++j) {
      const auto w = static_cast<float>(c->world_ranks()[static_cast<size_t>(j)]);
      EXPECT_EQ(out[static_cast<size_t>(3 * j)], w);
      EXPECT_EQ(out[static_cast<size_t>(3 * j + 1)], w + 0.5f);
      EXPECT_EQ(out[static_cast<size_t>(3 * j + 2)], static_cast<float>(j));
    }
    // Output n = 12g bytes: (g-1)/g * n = 12(g-1).
    ExpectOneCall(*c, Op::kAllGather, 12 * g, 12.0 * (g - 1));

    // In place: this rank's shard already sits at its slot of the output.
    std::vector<int64_t> inplace(static_cast<size_t>(2 * g), -1);
    inplace[static_cast<size_t>(2 * i)] = r;
    inplace[static_cast<size_t>(2 * i + 1)] = 10 * r;
    c->all_gather(inplace.data(), inplace.data() + 2 * i, 2, Dtype::kI64);
    for (int j = 0; j < g; ++j) {
      const int64_t w = c->world_ranks()[static_cast<size_t>(j)];
      EXPECT_EQ(inplace[static_cast<size_t>(2 * j)], w);
      EXPECT_EQ(inplace[static_cast<size_t>(2 * j + 1)], 10 * w);
    }
  }
}

TEST(Collectives, ReduceScatter) {
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int g = c->size();
    const int i = c->rank();
    const int64_t sum = SumOfMembers(*c);
    c->reset_stats();
    std::vector<float> in(static_cast<size_t>(2 * g));
    for (int j = 0; j < g; ++j) {
      for (int k = 0; k < 2; ++k)
        in[static_cast<size_t>(2 * j + k)] = static_cast<float>(r * (j + 1) + k);
    }
    std::vector<float> out(2, -1.0f);
    c->reduce_scatter(out.data(), in.data(), 2, Dtype::kF32);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(out[static_cast<size_t>(k)], static_cast<float>(sum * (i + 1) + g * k));
    }
    // Input n = 8g bytes: (g-1)/g * n = 8(g-1).
    ExpectOneCall(*c, Op::kReduceScatter, 8 * g, 8.0 * (g - 1));
  }
}

// Elements group rank `from` sends to group rank `to`: uneven, and zero for some pairs.
int64_t A2aCount(int from, int to) { return (from + 2 * to) % 3; }

TEST(Collectives, AllToAllVUnevenAndZero) {
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int g = c->size();
    const int i = c->rank();
    std::vector<int64_t> send_counts(static_cast<size_t>(g));
    std::vector<int64_t> recv_counts(static_cast<size_t>(g));
    std::vector<float> send;
    int64_t bytes_to_others = 0;
    for (int p = 0; p < g; ++p) {
      send_counts[static_cast<size_t>(p)] = A2aCount(i, p);
      recv_counts[static_cast<size_t>(p)] = A2aCount(p, i);
      for (int e = 0; e < A2aCount(i, p); ++e)
        send.push_back(static_cast<float>(1000 * r + 10 * p + e));
      if (p != i) bytes_to_others += 4 * A2aCount(i, p);
    }
    const int64_t recv_total = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
    std::vector<float> recv(static_cast<size_t>(recv_total), -1.0f);
    c->reset_stats();
    c->all_to_all_v(recv.data(), recv_counts, send.data(), send_counts, Dtype::kF32);
    size_t offset = 0;
    for (int p = 0; p < g; ++p) {
      const int w = c->world_ranks()[static_cast<size_t>(p)];
      for (int e = 0; e < A2aCount(p, i); ++e) {
        EXPECT_EQ(recv[offset++], static_cast<float>(1000 * w + 10 * i + e)) << "from " << p;
      }
    }
    // Payload: every byte this rank sends (its own slice too); wire: only to the other ranks.
    ExpectOneCall(*c, Op::kAllToAllV, static_cast<int64_t>(4 * send.size()),
                  static_cast<double>(bytes_to_others));

    // All counts zero: a valid call with no data at all.
    const std::vector<int64_t> zeros(static_cast<size_t>(g), 0);
    c->all_to_all_v(nullptr, zeros, nullptr, zeros, Dtype::kF32);
  }
}

TEST(Collectives, SendRecvPairsInOrder) {
  for (Communicator* c : AllGroups()) {
    if (c->size() == 1) continue;  // no peer to talk to
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int i = c->rank();
    const int g = c->size();
    c->reset_stats();
    // Even group ranks send two messages to the next odd rank, which receives them in order.
    if (i % 2 == 0 && i + 1 < g) {
      const int32_t first[2] = {r, 1};
      const int32_t second[3] = {r, 2, 3};
      c->send(first, 2, Dtype::kI32, i + 1);
      c->send(second, 3, Dtype::kI32, i + 1);
      EXPECT_EQ(c->stats()[Op::kSend].calls, 2);
      EXPECT_EQ(c->stats()[Op::kSend].bytes_payload, 20);
      EXPECT_DOUBLE_EQ(c->stats()[Op::kSend].bytes_wire, 20.0);
    } else if (i % 2 == 1) {
      const int peer = c->world_ranks()[static_cast<size_t>(i - 1)];
      int32_t first[2] = {-1, -1};
      int32_t second[3] = {-1, -1, -1};
      c->recv(first, 2, Dtype::kI32, i - 1);
      c->recv(second, 3, Dtype::kI32, i - 1);
      EXPECT_EQ(first[0], peer);
      EXPECT_EQ(first[1], 1);
      EXPECT_EQ(second[0], peer);
      EXPECT_EQ(second[2], 3);
      EXPECT_EQ(c->stats()[Op::kRecv].calls, 2);
      EXPECT_EQ(c->stats()[Op::kRecv].bytes_payload, 20);
      EXPECT_DOUBLE_EQ(c->stats()[Op::kRecv].bytes_wire, 0.0);  // a receive sends nothing
    }
  }
}

TEST(Collectives, SendRecvRingShift) {
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int g = c->size();
    const int i = c->rank();
    const int next = (i + 1) % g;
    const int prev = (i + g - 1) % g;
    c->reset_stats();
    const std::vector<float> out = {static_cast<float>(r), static_cast<float>(i), 7.0f};
    std::vector<float> in(3, -1.0f);
    c->send_recv(in.data(), 3, prev, out.data(), 3, next, Dtype::kF32);
    EXPECT_EQ(in[0], static_cast<float>(c->world_ranks()[static_cast<size_t>(prev)]));
    EXPECT_EQ(in[1], static_cast<float>(prev));
    EXPECT_EQ(in[2], 7.0f);
    // Payload: 12 bytes sent + 12 received; wire: the 12 bytes sent.
    ExpectOneCall(*c, Op::kSendRecv, 24, 12.0);
  }
}

TEST(Collectives, RingPassesEveryShardAround) {
  // g-1 ring shifts (the ring-attention pattern): each rank ends up having seen every member.
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int g = c->size();
    const int i = c->rank();
    std::vector<int> seen = {TestWorld().rank()};
    int64_t current = TestWorld().rank();
    for (int step = 0; step + 1 < g; ++step) {
      int64_t incoming = -1;
      c->send_recv(&incoming, 1, (i + g - 1) % g, &current, 1, (i + 1) % g, Dtype::kI64);
      current = incoming;
      seen.push_back(static_cast<int>(current));
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, c->world_ranks());
  }
}

TEST(Collectives, LargeMessagesUseRendezvous) {
  // Above the shared-memory eager limit (4 KiB): sends complete only once matched.
  constexpr int64_t kCount = 100'000;
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int g = c->size();
    const int64_t sum = SumOfMembers(*c);
    std::vector<float> x(kCount);
    for (int64_t k = 0; k < kCount; ++k) x[static_cast<size_t>(k)] = static_cast<float>(r + k % 7);
    c->all_reduce(x.data(), kCount, Dtype::kF32);
    int64_t wrong = 0;
    for (int64_t k = 0; k < kCount; ++k) {
      wrong += x[static_cast<size_t>(k)] != static_cast<float>(sum + g * (k % 7));
    }
    EXPECT_EQ(wrong, 0);
    if (g == 1) continue;
    const int i = c->rank();
    std::vector<int32_t> message(kCount, r);
    if (i == 0) c->send(message.data(), kCount, Dtype::kI32, g - 1);
    if (i == g - 1) {
      c->recv(message.data(), kCount, Dtype::kI32, 0);
      EXPECT_EQ(message.front(), c->world_ranks().front());
      EXPECT_EQ(message.back(), c->world_ranks().front());
    }
  }
}

TEST(Collectives, PostedSendsNeverBlockAndMatchByTag) {
  // Every member posts two rendezvous-size messages to its successor (tag 2 first), reuses its
  // buffer at once, and only then receives from its predecessor in the other tag order: with
  // blocking sends this ring would deadlock; with tags matching by posting order it would swap.
  constexpr int64_t kCount = 100'000;
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int g = c->size();
    if (g == 1) continue;
    const int i = c->rank(), next = (i + 1) % g, prev = (i + g - 1) % g;
    std::vector<int32_t> out(kCount, 2000 + i);
    const int64_t sends_before = c->stats()[Op::kSend].calls;
    c->post_send(out.data(), kCount, Dtype::kI32, next, 2);
    std::fill(out.begin(), out.end(), 1000 + i);  // the communicator staged its own copy
    c->post_send(out.data(), kCount, Dtype::kI32, next, 1);
    std::fill(out.begin(), out.end(), -1);
    std::vector<int32_t> in1(kCount), in2(kCount);
    c->recv_tagged(in1.data(), kCount, Dtype::kI32, prev, 1);
    c->recv_tagged(in2.data(), kCount, Dtype::kI32, prev, 2);
    c->wait_sends();
    EXPECT_EQ(std::count(in1.begin(), in1.end(), 1000 + prev), kCount);
    EXPECT_EQ(std::count(in2.begin(), in2.end(), 2000 + prev), kCount);
    EXPECT_EQ(c->stats()[Op::kSend].calls - sends_before, 2);
  }
}

TEST(Collectives, BroadcastFromLastRank) {
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    const int r = TestWorld().rank();
    const int g = c->size();
    c->reset_stats();
    std::vector<int64_t> buf = {r, 2 * r, 3 * r, 4};
    c->broadcast(buf.data(), 4, Dtype::kI64, g - 1);
    const int64_t root = c->world_ranks().back();
    EXPECT_EQ(buf, (std::vector<int64_t>{root, 2 * root, 3 * root, 4}));
    // n = 32 bytes: (g-1)/g * n on every rank, whatever the root.
    ExpectOneCall(*c, Op::kBroadcast, 32, 32.0 * (g - 1) / g);
  }
}

TEST(Collectives, BarrierAndBf16Gather) {
  for (Communicator* c : AllGroups()) {
    SCOPED_TRACE(c->Describe());
    c->reset_stats();
    c->barrier();
    ExpectOneCall(*c, Op::kBarrier, 0, 0.0);
    // 16-bit types move as bits.
    const uint16_t bits = static_cast<uint16_t>(0x3F80 + TestWorld().rank());
    std::vector<uint16_t> out(static_cast<size_t>(c->size()));
    c->all_gather(out.data(), &bits, 1, Dtype::kBF16);
    for (int j = 0; j < c->size(); ++j) {
      EXPECT_EQ(out[static_cast<size_t>(j)], 0x3F80 + c->world_ranks()[static_cast<size_t>(j)]);
    }
  }
}

TEST(Collectives, CountersArePerCommunicator) {
  for (const auto& m : MeshEnvironment::meshes_) {
    m->ResetStats();
    float x = 1.0f;
    m->tp().all_reduce(&x, 1, Dtype::kF32);
    for (const auto& [name, stats] : m->Stats()) {
      const bool is_tp = name == "tp";
      const int64_t expected = is_tp && m->tp().size() > 1 ? 1 : 0;
      EXPECT_EQ(stats.total().calls, expected) << name;
    }
    EXPECT_EQ(x, static_cast<float>(m->tp().size()));
    // The metrics form: every group by name; only tp has an op, counted per the convention.
    const nlohmann::json json = m->StatsJson();
    ASSERT_EQ(json.size(), mesh::kAllGroupKinds.size());
    const int g = m->tp().size();
    EXPECT_EQ(json["tp"]["bytes_wire"].get<double>(), 2.0 * (g - 1) * 4 / g);
    EXPECT_EQ(json["tp"]["ops"].contains("all_reduce"), g > 1);
    EXPECT_EQ(json["dp"]["calls"].get<int64_t>(), 0);
    EXPECT_TRUE(json["dp"]["ops"].empty());
  }
}

TEST(Mesh, GroupsMatchGridAndCoords) {
  for (const auto& m : MeshEnvironment::meshes_) {
    SCOPED_TRACE(spec::ShortLayout(m->layout()));
    const int r = TestWorld().rank();
    EXPECT_EQ(m->rank(), r);
    EXPECT_EQ(m->Describe().rfind("rank " + std::to_string(r) + " pp", 0), 0u) << m->Describe();
    for (GroupKind kind : mesh::kAllGroupKinds) {
      EXPECT_EQ(m->group(kind).world_ranks(), m->grid().group(kind, r)) << mesh::GroupName(kind);
      EXPECT_EQ(m->group(kind).name(), mesh::GroupName(kind));
    }
    const mesh::MeshCoords& c = m->coords();
    EXPECT_EQ(m->tp().rank(), c.dense.tp);
    EXPECT_EQ(m->cp().rank(), c.dense.cp);
    EXPECT_EQ(m->dp().rank(), c.dense.dp);
    EXPECT_EQ(m->pp().rank(), c.dense.pp);
    EXPECT_EQ(m->ep().rank(), c.ep);
    EXPECT_EQ(m->expert_dp().rank(), c.expert_dp);
    // Sizes follow the layout.
    EXPECT_EQ(m->tp().size(), m->layout().tp);
    EXPECT_EQ(m->pp().size(), m->layout().pp);
    EXPECT_EQ(m->ep().size(), m->layout().ep);
    // Expert shards times expert replicas cover the dense replicas, in both placements.
    EXPECT_EQ(m->ep().size() * m->expert_dp().size(), m->dp_cp().size());
  }
}

TEST(MpiWorld, OnlyOnePerProcess) {
  auto second = comm::MpiWorld::Create();
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("one MpiWorld per process"), std::string::npos);
}

TEST(Mesh, RejectsLayoutOfAnotherSize) {
  spec::Layout layout;
  layout.dp = TestWorld().size() + 1;
  auto mesh = Mesh::Create(layout, TestWorld());
  ASSERT_FALSE(mesh.ok());
  EXPECT_NE(mesh.status().message().find("needs " + std::to_string(layout.dp) + " ranks"),
            std::string::npos)
      << mesh.status().message();
}

// Run only by the mpi_harness_fails_on_one_rank test (it is DISABLED_ otherwise): a failure on
// the last rank alone must make every rank exit non-zero.
TEST(Harness, DISABLED_FailsOnLastRankOnly) {
  EXPECT_NE(TestWorld().rank(), TestWorld().size() - 1) << "deliberate failure on the last rank";
}

TEST(Mesh, RanksDisagreeingOnTheLayoutGetTheSameError) {
  const int last = TestWorld().size() - 1;
  if (last == 0) GTEST_SKIP() << "needs two ranks";
  spec::Layout layout;
  if (TestWorld().rank() == last)
    layout.tp = TestWorld().size();
  else
    layout.dp = TestWorld().size();
  auto mesh = Mesh::Create(layout, TestWorld());
  ASSERT_FALSE(mesh.ok());
  EXPECT_NE(mesh.status().message().find("ranks disagree on the layout: rank 0 has pp=1 dp=" +
                                         std::to_string(TestWorld().size()) + " ep=1 cp=1 tp=1"),
            std::string::npos)
      << mesh.status().message();
  EXPECT_NE(mesh.status().message().find("rank " + std::to_string(last) + " has"),
            std::string::npos);
}

}  // namespace
}  // namespace pentamesh

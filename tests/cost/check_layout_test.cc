// CheckLayout (numeric, allocation-free) agrees with spec::Validate (messages) on a grid of
// layouts; EstimateLayout with explain = false never allocates (counted by a global operator new).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>

#include "cost/cost.h"
#include "spec/load_toml.h"
#include "spec/validate.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace pentamesh::cost {
namespace {

using spec::Layout;

std::vector<Layout> Grid() {
  std::vector<Layout> out;
  const spec::Schedule schedules[] = {spec::Schedule::kOneFOneB, spec::Schedule::kInterleaved,
                                      spec::Schedule::kZeroBubble};
  for (int64_t tp : {1, 2, 8, 16})
    for (int64_t pp : {1, 3, 4, 16})
      for (int64_t cp : {1, 2, 8})
        for (int64_t ep : {1, 4, 8})
          for (int64_t mbs : {1, 2})
            for (auto placement : {spec::EpPlacement::kSeparate, spec::EpPlacement::kFolded})
              for (auto sched : schedules) {
                Layout l{.tp = tp,
                         .pp = pp,
                         .cp = cp,
                         .ep = ep,
                         .zero = 1,
                         .mbs = mbs,
                         .schedule = sched,
                         .virtual_stages = sched == spec::Schedule::kInterleaved ? 2 : 1,
                         .cp_kind = cp == 8 ? spec::CpKind::kUlysses : spec::CpKind::kRing,
                         .ep_placement = placement};
                const int64_t rest = l.gpus();
                l.dp = rest <= 1024 && 1024 % rest == 0 ? 1024 / rest : 3;
                out.push_back(l);
              }
  return out;
}

TEST(CheckLayout, AgreesWithValidate) {
  const std::pair<const char*, const char*> cases[] = {{"meridianfin-72b", "meridian-128k"},
                                                       {"llama3-70b", "meridian-128k"},
                                                       {"mixtral-8x7b", "pretrain-4k"},
                                                       {"deepseek-v3-like", "pretrain-4k-16m"},
                                                       {"mistral-7b", "pretrain-4k"}};
  for (const auto& [name, train] : cases) {
    const spec::ModelSpec m = *spec::LoadModel(name);
    const spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", 1024);
    const spec::TrainSpec t = *spec::LoadTrain(train);
    const Context ctx(m, c, t);
    int ok = 0, bad = 0;
    for (const Layout& l : Grid()) {
      const bool valid = spec::Validate(m, c, t, l).empty();
      const Rule rule = CheckLayout(ctx, l);
      EXPECT_EQ(valid, rule == Rule::kOk)
          << name << ": " << spec::FormatLayout(l) << " -> " << RuleName(rule);
      (valid ? ok : bad)++;
    }
    EXPECT_GT(ok, 10) << name;
    EXPECT_GT(bad, 10) << name;
  }
}

TEST(CheckLayout, InvalidLayoutCostsNothingAndExplains) {
  const spec::ModelSpec m = *spec::LoadModel("llama3-70b");
  const Context ctx(m, *spec::LoadCluster("h100-sxm", 64), *spec::LoadTrain("pretrain-4k"));
  const Layout l{.dp = 3, .tp = 8};
  EXPECT_EQ(CheckLayout(ctx, l), Rule::kGpuCount);
  const Estimate quiet = EstimateLayout(ctx, l, false);
  EXPECT_FALSE(quiet.fits);
  EXPECT_TRUE(quiet.violations.empty());
  const Estimate loud = EstimateLayout(ctx, l, true);
  ASSERT_FALSE(loud.violations.empty());
  EXPECT_NE(loud.violations[0].find("must equal the cluster's 64 GPUs"), std::string::npos);
}

TEST(EstimateLayout, NoAllocationWithoutExplain) {
  const spec::ModelSpec m = *spec::LoadModel("meridianfin-72b");
  const Context ctx(m, *spec::LoadCluster("h100-sxm", 1024), *spec::LoadTrain("meridian-128k"));
  const std::vector<Layout> grid = Grid();
  double sink = 0;
  const int64_t before = g_allocations.load();
  const auto start = std::chrono::steady_clock::now();
  int64_t evaluated = 0;
  for (int rep = 0; rep < 20; ++rep) {
    for (const Layout& l : grid) {
      if (CheckLayout(ctx, l) != Rule::kOk) continue;
      sink += EstimateLayout(ctx, l).time.step;
      ++evaluated;
    }
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_GT(sink, 0.0);
  ASSERT_GT(evaluated, 0);
  std::printf("EstimateLayout: %.0f ns per valid layout over %lld layouts\n",
              ns / static_cast<double>(evaluated), static_cast<long long>(evaluated));
}

// The attention variants keep the hot path allocation-free: MLA with sliding-window layers (a
// synthetic mix: DeepSeek-V3's MLA, a 1,024-token window, every 4th layer global).
TEST(EstimateLayout, NoAllocationWithMlaAndWindows) {
  spec::ModelSpec m = *spec::LoadModel("deepseek-v3-like");
  m.sliding_window = 1024;
  m.global_every = 4;
  const Context ctx(m, *spec::LoadCluster("h100-sxm", 1024), *spec::LoadTrain("pretrain-4k-16m"));
  double sink = 0;
  int64_t evaluated = 0;
  const std::vector<Layout> grid = Grid();
  const int64_t before = g_allocations.load();
  for (const Layout& l : grid) {
    if (CheckLayout(ctx, l) != Rule::kOk) continue;
    sink += EstimateLayout(ctx, l).time.step;
    ++evaluated;
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_GT(sink, 0.0);
  EXPECT_GT(evaluated, 0);
}

}  // namespace
}  // namespace pentamesh::cost

// Generation under mpirun (train/generate.h) against one process: the same greedy tokens, and
// every step's next-token logits within 1e-5 (relative to max(1, |logit|)), at tp=2 for a dense
// GQA model and an MoE, at ep=2 for the MoE (its routed tokens dispatched with all_to_all_v as in
// training), and, on 4 ranks, at tp=2 x ep=2. A seeded sampled generation also draws the same
// tokens. Weights are the layout-independent counter-RNG init, scaled up so attention and routing
// are far from uniform; each rank computes the one-process reference itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "testing/tiny_specs.h"
#include "tests/mpi/mpi_test_main.h"
#include "train/generate.h"

namespace pentamesh {
namespace {

void ScaleWeights(model::ParamSet& params) {
  params.Init(13);
  params.ForEach(
      [](const model::ParamInfo& info, core::Tensor w, core::Tensor, core::Tensor, core::Tensor) {
        for (int64_t i = 0; i < w.numel(); ++i) {
          if (info.init.kind == model::InitKind::kNormal) {
            w.f32()[i] *= 6.0f;
          } else {  // norm weights: replicated, so the local index is the global one
            w.f32()[i] += 0.2f * std::sin(static_cast<float>(i));
          }
        }
      });
}

train::GenerateResult Run(const spec::ModelSpec& m, const spec::Layout& layout, comm::World* world,
                          const train::SamplingOptions& sampling) {
  auto g = train::Generator::Create(m, layout, world);
  PM_CHECK(g.ok()) << g.status().message();
  ScaleWeights((*g)->params());
  auto r = (*g)->Generate({.prompt = {5, 17, 2, 9, 11},
                           .max_new_tokens = m.max_seq_len - 5,
                           .sampling = sampling,
                           .keep_logits = true});
  PM_CHECK(r.ok()) << r.status().message();
  return std::move(*r);
}

void SameAsOneProcess(spec::ModelSpec m, const spec::Layout& layout) {
  m.vocab = 32;  // the vocab-parallel embedding and head need vocab % tp == 0
  comm::MpiWorld& world = mpitest::TestWorld();
  if (world.size() != layout.tp * layout.ep)
    GTEST_SKIP() << "needs " << layout.tp * layout.ep << " ranks, the job has " << world.size();
  const train::GenerateResult one = Run(m, {}, nullptr, {});
  const train::GenerateResult dist = Run(m, layout, &world, {});
  ASSERT_EQ(dist.tokens, one.tokens);
  double worst = 0;
  for (size_t s = 0; s < one.logits.size(); ++s) {
    for (size_t v = 0; v < one.logits[s].size(); ++v) {
      const double a = dist.logits[s][v], b = one.logits[s][v];
      worst = std::max(worst, std::abs(a - b) / std::max(1.0, std::abs(b)));
    }
  }
  if (world.rank() == 0)
    std::printf(
        "%s tp=%lld ep=%lld: %zu tokens equal, max logit difference %.3g; KV cache %lld "
        "bytes per rank (one process %lld)\n",
        m.name.c_str(), static_cast<long long>(layout.tp), static_cast<long long>(layout.ep),
        one.tokens.size(), worst, static_cast<long long>(dist.kv_cache_bytes),
        static_cast<long long>(one.kv_cache_bytes));
  EXPECT_LE(worst, 1e-5);
  // The kv heads are split over tp: each rank caches 1/tp of them.
  EXPECT_EQ(dist.kv_cache_bytes * layout.tp, one.kv_cache_bytes);
  const train::SamplingOptions sampled{.temperature = 1.0, .top_k = 10, .top_p = 0.9, .seed = 3};
  EXPECT_EQ(Run(m, layout, &world, sampled).tokens, Run(m, {}, nullptr, sampled).tokens);
}

TEST(Generate, DenseTp2EqualsOneProcess) {
  SameAsOneProcess(testing::TinyDense(), {.tp = 2, .sp = false});
}

TEST(Generate, MoeTp2EqualsOneProcess) {
  SameAsOneProcess(testing::TinyMoe(), {.tp = 2, .sp = false});
}

TEST(Generate, MoeEp2EqualsOneProcess) { SameAsOneProcess(testing::TinyMoe(), {.ep = 2}); }

TEST(Generate, MoeTp2Ep2EqualsOneProcess) {
  SameAsOneProcess(testing::TinyMoe(), {.tp = 2, .ep = 2, .sp = false});
}

}  // namespace
}  // namespace pentamesh

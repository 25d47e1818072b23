// Generation's KV cache (model/kv_cache.h, Stage::ForwardCached): a prefill over a prompt and one
// token per step from the cache give the same next-token logits (within 1e-5 relative) as
// recomputing the whole sequence at every step with the training forward (Stage::Forward, the
// flash-attention kernel, no cache), for a dense GQA model and an MoE (dense first layer, shared
// expert, top-2 of 4), with the tokens chosen greedily from the cached logits. The cache is
// allocated once with tag kv_cache: 2 x layers x capacity x kv_heads x head_dim floats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/stage.h"
#include "testing/tiny_model.h"

namespace pentamesh::model {
namespace {

// Scaled-up layout-independent weights, so attention and routing are far from uniform.
void ScaleWeights(ParamSet& params) {
  params.Init(11);
  params.ForEach(
      [](const ParamInfo& info, core::Tensor w, core::Tensor, core::Tensor, core::Tensor) {
        for (int64_t i = 0; i < w.numel(); ++i) {
          if (info.init.kind == InitKind::kNormal) {
            w.f32()[i] *= 6.0f;
          } else {
            w.f32()[i] += 0.2f * std::sin(static_cast<float>(i));
          }
        }
      });
}

// The last row of the logits of a full forward over `tokens` (one sequence, no cache).
std::vector<float> RecomputeLastLogits(Stage& stage, const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> copy = tokens, ignore(tokens.size(), -1);
  const MicroBatch mb{.tokens = ConstTensor(core::Tensor(copy.data(), core::Dtype::kI32, {T})),
                      .targets = ConstTensor(core::Tensor(ignore.data(), core::Dtype::kI32, {T})),
                      .dims = {.batch = 1, .seq = T}};
  stage.Forward(0, mb, {}, {});
  const ConstTensor logits = stage.logits(0);
  const int64_t V = logits.dim(1);
  std::vector<float> last(logits.f32() + (T - 1) * V, logits.f32() + T * V);
  stage.Drop(0);
  return last;
}

// A prompt longer than a query tile (32 rows) and a sequence longer than a key tile (64 rows) of
// the flash kernel, so the two paths sum in different orders.
void CachedEqualsRecomputed(spec::ModelSpec spec) {
  spec.max_seq_len = 80;
  core::Allocator alloc;
  Model model({.model = spec, .first_layer = 0, .last_layer = spec.layers}, alloc);
  ScaleWeights(model.params());
  Stage& stage = model.stage();
  const int64_t prompt_len = 37, new_tokens = spec.max_seq_len - prompt_len, V = spec.vocab;
  const testing::Batch prompt = testing::RandomBatch(1, prompt_len, V, 3, false);
  KvCache cache = stage.NewKvCache(prompt_len + new_tokens);
  EXPECT_EQ(cache.bytes(),
            2 * spec.layers * (prompt_len + new_tokens) * spec.kv_heads * spec.head_dim * 4);
  EXPECT_EQ(alloc.live_bytes(core::MemTag::kKvCache), cache.bytes());
  std::vector<int32_t> sequence = prompt.tokens, next = prompt.tokens;
  std::vector<float> logits(static_cast<size_t>(V));
  double worst = 0;
  std::vector<int32_t> chosen;
  for (int64_t step = 0; step < new_tokens; ++step) {
    const int64_t n = static_cast<int64_t>(next.size());
    stage.ForwardCached(ConstTensor(core::Tensor(next.data(), core::Dtype::kI32, {n})), cache,
                        core::Tensor(logits.data(), {V}));
    EXPECT_EQ(cache.length(), static_cast<int64_t>(sequence.size()));
    const std::vector<float> full = RecomputeLastLogits(stage, sequence);
    for (int64_t v = 0; v < V; ++v) {
      const double a = logits[static_cast<size_t>(v)], b = full[static_cast<size_t>(v)];
      worst = std::max(worst, std::abs(a - b) / std::max(1.0, std::abs(b)));
    }
    const int32_t token =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    chosen.push_back(token);
    sequence.push_back(token);
    next.assign(1, token);
  }
  std::printf("%s: %lld tokens from the cache, max |cached - recomputed| / max(1, |logit|) %.3g\n",
              spec.name.c_str(), static_cast<long long>(new_tokens), worst);
  EXPECT_LE(worst, 1e-5);
  // Not a constant continuation: the test sees more than one distinct token.
  std::sort(chosen.begin(), chosen.end());
  EXPECT_GT(std::unique(chosen.begin(), chosen.end()) - chosen.begin(), 1);
}

TEST(KvCache, CachedDecodingEqualsRecomputingDense) {
  CachedEqualsRecomputed(testing::TinyDense());
}

TEST(KvCache, CachedDecodingEqualsRecomputingMoe) { CachedEqualsRecomputed(testing::TinyMoe()); }

TEST(KvCache, AdvanceBeyondCapacityIsAProgrammerError) {
  core::Allocator alloc;
  KvCache cache(alloc, 2, 4, 1, 2);
  cache.Advance(3);
  EXPECT_EQ(cache.length(), 3);
  EXPECT_DEATH(cache.Advance(2), "capacity=4");
}

}  // namespace
}  // namespace pentamesh::model

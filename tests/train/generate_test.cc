// Generation's driver (train/generate.h) on one process: SampleToken against closed forms (greedy
// is the argmax, lowest id on ties; sampled draws follow softmax(logits / T), truncated by top-k
// and top-p and renormalised, with frequencies within 0.015 of the exact probabilities over 20000
// seeded draws; a seed reproduces its draws), and the Generator's refusals, each naming the field
// (empty prompt, a token outside the vocabulary, prompt + max_new_tokens beyond max_seq_len, tp not
// dividing kv_heads, pp or cp > 1, a rank count that is not tp*ep).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "testing/tiny_specs.h"
#include "train/generate.h"

namespace pentamesh::train {
namespace {

TEST(SampleToken, GreedyIsTheArgmaxWithTheLowestIdOnTies) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(SampleToken(logits, {}, 0), 1);
  EXPECT_EQ(SampleToken(logits, {.temperature = 1.0, .top_k = 1, .seed = 5}, 3), 1);
}

// Frequencies of 20000 draws against `expected` probabilities.
void ExpectFrequencies(const std::vector<float>& logits, const SamplingOptions& o,
                       const std::vector<double>& expected) {
  std::vector<double> count(logits.size(), 0);
  const int n = 20000;
  for (int step = 0; step < n; ++step)
    count[static_cast<size_t>(SampleToken(logits, o, step))] += 1;
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_NEAR(count[i] / n, expected[i], 0.015) << "token " << i;
}

TEST(SampleToken, DrawsFollowTheTruncatedTemperedSoftmax) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  ExpectFrequencies(logits, {.temperature = 1.0, .seed = 1}, {0.5, 0.3, 0.2});
  // T = 2: p_i^(1/2), renormalised.
  const double s = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.2);
  ExpectFrequencies(logits, {.temperature = 2.0, .seed = 2},
                    {std::sqrt(0.5) / s, std::sqrt(0.3) / s, std::sqrt(0.2) / s});
  ExpectFrequencies(logits, {.temperature = 1.0, .top_k = 2, .seed = 3}, {0.625, 0.375, 0});
  // top-p 0.6: 0.5 < 0.6, so the second token joins (0.8); top-p 0.5: the first alone.
  ExpectFrequencies(logits, {.temperature = 1.0, .top_p = 0.6, .seed = 4}, {0.625, 0.375, 0});
  ExpectFrequencies(logits, {.temperature = 1.0, .top_p = 0.5, .seed = 4}, {1, 0, 0});
}

TEST(SampleToken, ASeedReproducesItsDraws) {
  const std::vector<float> logits = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f};
  std::vector<int32_t> a, b, c;
  for (int step = 0; step < 64; ++step) {
    a.push_back(SampleToken(logits, {.temperature = 1.0, .seed = 9}, step));
    b.push_back(SampleToken(logits, {.temperature = 1.0, .seed = 9}, step));
    c.push_back(SampleToken(logits, {.temperature = 1.0, .seed = 10}, step));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

std::string Error(const spec::ModelSpec& m, const spec::Layout& layout, GenerateRequest r) {
  auto g = Generator::Create(m, layout, nullptr);
  if (!g.ok()) return g.status().message();
  auto out = (*g)->Generate(r);
  return out.ok() ? "" : out.status().message();
}

TEST(Generator, RefusesBadInputNamingTheField) {
  const spec::ModelSpec m = testing::TinyDense();  // vocab 29, max_seq_len 16, kv_heads 2
  EXPECT_EQ(Error(m, {}, {.prompt = {}, .max_new_tokens = 2}),
            "prompt: empty (give at least one token)");
  EXPECT_EQ(Error(m, {}, {.prompt = {1, 29}, .max_new_tokens = 2}),
            "prompt: token 29 at position 1 is outside the vocabulary [0, 29)");
  EXPECT_EQ(Error(m, {}, {.prompt = {1, 2, 3}, .max_new_tokens = 14}),
            "max_new_tokens: prompt 3 + max_new_tokens 14 = 17 tokens exceeds "
            "model.max_seq_len=16");
  EXPECT_EQ(Error(m, {}, {.prompt = {1}, .max_new_tokens = 0}),
            "max_new_tokens: 0 must be at least 1");
  EXPECT_EQ(Error(m, {}, {.prompt = {1}, .max_new_tokens = 2, .sampling = {.top_p = 0}}),
            "top_p: 0 must be in (0, 1]");
  EXPECT_EQ(Error(m, {}, {.prompt = {1, 2, 3}, .max_new_tokens = 13}), "");

  const auto tp4 = GenerateLayoutViolations(m, {.tp = 4, .sp = false}, 4);
  ASSERT_FALSE(tp4.empty());
  EXPECT_NE(tp4[0].find("kv_heads=2 must be divisible by tp=4"), std::string::npos) << tp4[0];
  const auto pp2 = GenerateLayoutViolations(m, {.pp = 2}, 2);
  ASSERT_EQ(pp2.size(), 1u);
  EXPECT_NE(pp2[0].find("layout: pp=2: generate runs tp and ep only"), std::string::npos);
  const auto cp2 = GenerateLayoutViolations(m, {.cp = 2}, 2);
  ASSERT_EQ(cp2.size(), 1u);
  EXPECT_NE(cp2[0].find("layout: cp=2"), std::string::npos);
  const auto vocab = GenerateLayoutViolations(m, {.tp = 2, .sp = false}, 2);
  ASSERT_EQ(vocab.size(), 1u);
  EXPECT_NE(vocab[0].find("model.vocab: 29 must be divisible by tp=2"), std::string::npos);
  spec::ModelSpec m32 = m, moe32 = testing::TinyMoe();
  m32.vocab = moe32.vocab = 32;
  const auto ranks = GenerateLayoutViolations(m32, {.tp = 2, .sp = false}, 1);
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_NE(ranks[0].find("needs 2 ranks (tp*ep), the job has 1; run under mpirun -np 2"),
            std::string::npos)
      << ranks[0];
  EXPECT_NE(GenerateLayoutViolations(m, {.ep = 2}, 2).at(0).find("ep=2 needs a MoE model"),
            std::string::npos);
  EXPECT_TRUE(GenerateLayoutViolations(moe32, {.tp = 2, .ep = 2}, 4).empty());
}

TEST(Generator, ASeedReproducesASampledGeneration) {
  auto g = Generator::Create(testing::TinyMoe(), {}, nullptr);
  ASSERT_TRUE(g.ok()) << g.status().message();
  (*g)->params().Init(5);
  const GenerateRequest r{.prompt = {3, 1, 4},
                          .max_new_tokens = 10,
                          .sampling = {.temperature = 1.5, .top_k = 20, .top_p = 0.95, .seed = 7}};
  auto a = (*g)->Generate(r), b = (*g)->Generate(r);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->tokens.size(), 10u);
  EXPECT_EQ(a->kv_cache_tokens, 13);
  EXPECT_GT(a->prefill_ms, 0);
  EXPECT_GT(a->decode_ms_mean, 0);
}

// PredictGeneration (the inference cost model on the host): a decode step reads every FP32 weight
// but the embedding table, and the KV cache of the mean context (prompt + new / 2), once, at the
// rank's BLAS threads' bandwidth: the one-thread sgemv rate times its cores, at most its share of
// the all-threads sgemv rate (the triad's for a profile without gemv rates); the bytes are counted
// here by hand from the model's shapes. tp = 2 halves both per rank (the kv heads split 2 ways)
// and each rank has one core of two.
TEST(PredictGeneration, DecodeReadsTheFp32WeightsAndKvAtTheHostsBandwidth) {
  RunConfig c;
  c.model = testing::TinyDense();
  HostProfile h;
  h.threads = 2;
  h.cores = 2;
  h.peak_gflops = 100;
  h.peak_gflops_1t = 50;
  h.mem_gbps = 20;
  h.attention_gflops = 10;
  h.stream_1t_gbps = 8;
  const spec::ModelSpec& m = c.model;
  const double d = static_cast<double>(m.hidden), hd = static_cast<double>(m.head_dim);
  const double per_layer = d * m.heads * hd + 2 * d * m.kv_heads * hd + m.heads * hd * d +
                           3 * d * m.ffn_hidden + 2 * d;  // q, k v, o, gate up down, two norms
  const double weights = m.layers * per_layer + d + m.vocab * d;  // + final norm, untied head
  const int64_t prompt = 6, fresh = 4;
  const double kv = m.layers * 2.0 * m.kv_heads * hd * (prompt + fresh / 2.0) * 4;
  for (const bool gemv : {false, true}) {
    if (gemv) h.gemv_gbps = 30, h.gemv_1t_gbps = 12;
    UseHostProfile(c.run, h);
    for (const int64_t tp : {1, 2}) {
      // Triad: tp 1: min(20, 8 x 2 cores) = 16 GB/s; tp 2: min(20 / 2, 8 x 1 core) = 8 GB/s a rank.
      // sgemv: tp 1: min(30, 12 x 2) = 24 GB/s; tp 2: min(30 / 2, 12 x 1) = 12 GB/s.
      const double bandwidth = gemv ? (tp == 1 ? 24e9 : 12e9) : (tp == 1 ? 16e9 : 8e9);
      spec::Layout layout;
      layout.tp = tp;
      const cost::ServeEstimate e = PredictGeneration(c, layout, prompt, fresh);
      SCOPED_TRACE(fmt::format("tp {} gemv {}", tp, gemv));
      EXPECT_NEAR(e.decode_weights_s, weights * 4 / tp / bandwidth, 1e-9 * e.decode_weights_s);
      EXPECT_NEAR(e.decode_kv_s, kv / tp / bandwidth, 1e-9 * e.decode_kv_s);
      EXPECT_EQ(e.kv_bytes_per_token, m.layers * 2.0 * m.kv_heads * hd * 4);  // FP32 K and V
      EXPECT_GT(e.prefill_s, 0);
      EXPECT_GE(e.itl_s, e.decode_weights_s + e.decode_kv_s);
    }
  }
}

}  // namespace
}  // namespace pentamesh::train

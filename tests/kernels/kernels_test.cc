// Every CPU kernel: forward against a direct reference (double), backward against central finite
// differences; odd sizes and tiles that do not divide the sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax_xent.h"
#include "kernels/cpu/swiglu.h"
#include "testing/grad_check.h"

namespace pentamesh::kernels {
namespace {

using testing::CheckGrad;
using testing::ExpectNear;
using testing::Project;
using testing::RandomVec;
using Vec = std::vector<float>;

Tensor T2(Vec& v, int64_t r, int64_t c) { return Tensor(v.data(), {r, c}); }

// M = 1 takes the sgemv path (a decode step); beta = 0 ignores what c held, NaN included.
TEST(Matmul, AllTransposesMatchLoops) {
  for (const int64_t M : {7, 1}) {
    const int64_t K = 5, N = 9;
    Vec a = RandomVec(M * K, 1), b = RandomVec(K * N, 2);
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        Vec c = RandomVec(M * N, 3);
        const Vec c0 = c;
        std::vector<double> want(static_cast<size_t>(M * N));
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) {
              const double av = ta ? a[k * M + i] : a[i * K + k];
              const double bv = tb ? b[j * K + k] : b[k * N + j];
              s += av * bv;
            }
            want[i * N + j] = 2.0 * s + 0.5 * c[i * N + j];
          }
        matmul(T2(c, M, N), ta ? T2(a, K, M) : T2(a, M, K), tb ? T2(b, N, K) : T2(b, K, N),
               ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, 2.0f, 0.5f);
        ExpectNear("matmul", c, want, 1e-5, 1e-5);
        Vec nan(static_cast<size_t>(M * N), std::nanf(""));
        matmul(T2(nan, M, N), ta ? T2(a, K, M) : T2(a, M, K), tb ? T2(b, N, K) : T2(b, K, N),
               ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, 2.0f, 0.0f);
        for (size_t i = 0; i < want.size(); ++i) want[i] -= 0.5 * c0[i];
        ExpectNear("matmul beta 0", nan, want, 1e-5, 1e-5);
      }
    }
  }
  const int64_t M = 7, K = 5, N = 9;
  Vec a = RandomVec(M * K, 1), b = RandomVec(K * N, 2);
  Vec c(M * N);
  EXPECT_DEATH(matmul(T2(c, M, N), T2(a, M, K), T2(b, M, K), Trans::kNo, Trans::kNo), "inner");
}

// A bf16 weight is widened in tiles of rows (more rows than one tile here); one input row takes the
// sgemv path. Against a double loop over the bf16 values.
TEST(Linear, Bf16WeightMatchesLoops) {
  const int64_t In = 11, Out = 300;
  const Vec wf = RandomVec(Out * In, 4);
  std::vector<uint16_t> w(wf.size());
  core::Bf16FromFloat(w.data(), wf.data(), Out * In);
  for (const int64_t T : {5, 1}) {
    Vec x = RandomVec(T * In, 5), y = RandomVec(T * Out, 6);
    const Vec y0 = y;
    for (const bool acc : {false, true}) {
      y = y0;
      std::vector<double> want(static_cast<size_t>(T * Out));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < Out; ++o) {
          double s = acc ? y0[t * Out + o] : 0.0;
          for (int64_t i = 0; i < In; ++i)
            s += double(x[t * In + i]) * core::Bf16ToFloat(w[o * In + i]);
          want[t * Out + o] = s;
        }
      linear_forward(T2(y, T, Out), T2(x, T, In),
                     ConstTensor(Tensor(w.data(), core::Dtype::kBF16, {Out, In})), acc);
      ExpectNear("bf16 linear", y, want, 1e-5, 1e-5);
    }
  }
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  const int64_t T = 5, In = 7, Out = 3;
  Vec x = RandomVec(T * In, 4), w = RandomVec(Out * In, 5), r = RandomVec(T * Out, 6);
  auto loss = [&] {
    Vec y(T * Out);
    linear_forward(T2(y, T, Out), T2(x, T, In), T2(w, Out, In));
    return Project(y, r);
  };
  Vec dx(T * In), dw(Out * In, 0.0f);
  linear_backward_input(T2(dx, T, In), T2(r, T, Out), T2(w, Out, In));
  linear_backward_weight(T2(dw, Out, In), T2(r, T, Out), T2(x, T, In));
  CheckGrad("dx", x, dx, loss);
  CheckGrad("dw", w, dw, loss);
}

TEST(RmsNorm, ForwardAndBackward) {
  const int64_t T = 5, H = 13;
  Vec x = RandomVec(T * H, 7), w = RandomVec(H, 8), r = RandomVec(T * H, 9);
  Vec y(T * H), rstd(T);
  rmsnorm_forward(T2(y, T, H), Tensor(rstd.data(), {T}), T2(x, T, H), Tensor(w.data(), {H}), 1e-5f);
  std::vector<double> want(T * H);
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(x[t * H + i]) * x[t * H + i];
    for (int64_t i = 0; i < H; ++i)
      want[t * H + i] = x[t * H + i] / std::sqrt(ss / H + 1e-5) * w[i];
  }
  ExpectNear("y", y, want, 1e-6, 1e-5);
  auto loss = [&] {
    Vec yy(T * H), rr(T);
    rmsnorm_forward(T2(yy, T, H), Tensor(rr.data(), {T}), T2(x, T, H), Tensor(w.data(), {H}),
                    1e-5f);
    return Project(yy, r);
  };
  Vec dx(T * H), dw(H, 0.0f);
  rmsnorm_backward(T2(dx, T, H), Tensor(dw.data(), {H}), T2(r, T, H), T2(x, T, H),
                   Tensor(w.data(), {H}), Tensor(rstd.data(), {T}));
  CheckGrad("dx", x, dx, loss);
  CheckGrad("dw", w, dw, loss);
}

TEST(Rope, RotationPreservesNormAndBackwardIsTranspose) {
  const int64_t B = 2, S = 5, N = 3, D = 6;
  RopeTable table(S, D, 10000.0);
  Vec x = RandomVec(B * S * N * D, 10), r = RandomVec(B * S * N * D, 11);
  Vec y(x.size());
  rope_forward(Tensor(y.data(), {B * S, N, D}), Tensor(x.data(), {B * S, N, D}), table, S);
  // Position 0 is the identity; each pair keeps its norm.
  for (int64_t i = 0; i < N * D; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);
  const int64_t t = 3, half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float* xr = x.data() + t * N * D;
    const float* yr = y.data() + t * N * D;
    EXPECT_NEAR(xr[i] * xr[i] + xr[i + half] * xr[i + half],
                yr[i] * yr[i] + yr[i + half] * yr[i + half], 1e-5);
    const double angle = 3.0 * std::pow(10000.0, -2.0 * i / D);
    EXPECT_NEAR(yr[i], xr[i] * std::cos(angle) - xr[i + half] * std::sin(angle), 1e-5);
  }
  auto loss = [&] {
    Vec yy(x.size());
    rope_forward(Tensor(yy.data(), {B * S, N, D}), Tensor(x.data(), {B * S, N, D}), table, S);
    return Project(yy, r);
  };
  Vec dx(x.size());
  rope_backward(Tensor(dx.data(), {B * S, N, D}), Tensor(r.data(), {B * S, N, D}), table, S);
  CheckGrad("dx", x, dx, loss);
}

// Naive causal GQA attention in double: o and lse.
void ReferenceAttention(std::vector<double>& o, std::vector<double>& lse, const Vec& q,
                        const Vec& k, const Vec& v, const AttentionDims& d) {
  const int64_t S = d.seq, A = d.heads, K = d.kv_heads, D = d.head_dim;
  o.assign(q.size(), 0.0);
  lse.assign(static_cast<size_t>(d.batch * A * S), 0.0);
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < A; ++h)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t kh = h / (A / K);
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < D; ++x)
            dot += double(q[((b * S + i) * A + h) * D + x]) * k[((b * S + j) * K + kh) * D + x];
          s[j] = dot / std::sqrt(double(D));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& sj : s) sum += std::exp(sj - mx);
        lse[(b * A + h) * S + i] = mx + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(s[j] - mx) / sum;
          for (int64_t x = 0; x < D; ++x)
            o[((b * S + i) * A + h) * D + x] += p * v[((b * S + j) * K + kh) * D + x];
        }
      }
}

void AttentionCase(const AttentionDims& d) {
  const int64_t T = d.batch * d.seq;
  Vec q = RandomVec(T * d.heads * d.head_dim, 12), k = RandomVec(T * d.kv_heads * d.head_dim, 13),
      v = RandomVec(T * d.kv_heads * d.head_dim, 14), r = RandomVec(q.size(), 15);
  auto tq = [&](Vec& x) { return Tensor(x.data(), {T, d.heads, d.head_dim}); };
  auto tk = [&](Vec& x) { return Tensor(x.data(), {T, d.kv_heads, d.head_dim}); };
  Vec o(q.size()), lse(d.batch * d.heads * d.seq);
  Tensor tlse(lse.data(), {d.batch, d.heads, d.seq});
  attention_forward(tq(o), tlse, tq(q), tk(k), tk(v), d);
  std::vector<double> o_ref, lse_ref;
  ReferenceAttention(o_ref, lse_ref, q, k, v, d);
  ExpectNear("o", o, o_ref, 1e-5, 1e-4);
  ExpectNear("lse", lse, lse_ref, 1e-5, 1e-5);
  auto loss = [&] {
    Vec oo(q.size()), ll(lse.size());
    attention_forward(tq(oo), Tensor(ll.data(), {d.batch, d.heads, d.seq}), tq(q), tk(k), tk(v), d);
    return Project(oo, r);
  };
  Vec dq(q.size()), dk(k.size()), dv(v.size());
  attention_backward(tq(dq), tk(dk), tk(dv), tq(r), tq(q), tk(k), tk(v), tq(o), tlse, d);
  CheckGrad("dq", q, dq, loss);
  CheckGrad("dk", k, dk, loss);
  CheckGrad("dv", v, dv, loss);
}

TEST(Attention, GqaOddSizesSingleTile) {
  AttentionCase({.batch = 2, .seq = 7, .heads = 4, .kv_heads = 2, .head_dim = 6});
}
TEST(Attention, MultiTileCausal) {
  AttentionCase({.batch = 1, .seq = 133, .heads = 3, .kv_heads = 1, .head_dim = 4});
}
TEST(Attention, MultiHead) {
  AttentionCase({.batch = 1, .seq = 70, .heads = 2, .kv_heads = 2, .head_dim = 8});
}

TEST(SwiGlu, ForwardAndBackward) {
  const int64_t n = 37;
  Vec a = RandomVec(n, 16, 2.0f), b = RandomVec(n, 17), r = RandomVec(n, 18);
  Vec g(n);
  swiglu_forward(Tensor(g.data(), {n}), Tensor(a.data(), {n}), Tensor(b.data(), {n}));
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = a[i] / (1 + std::exp(-double(a[i]))) * b[i];
  ExpectNear("g", g, want, 1e-6, 1e-5);
  auto loss = [&] {
    Vec gg(n);
    swiglu_forward(Tensor(gg.data(), {n}), Tensor(a.data(), {n}), Tensor(b.data(), {n}));
    return Project(gg, r);
  };
  Vec da(n), db(n);
  swiglu_backward(Tensor(da.data(), {n}), Tensor(db.data(), {n}), Tensor(r.data(), {n}),
                  Tensor(a.data(), {n}), Tensor(b.data(), {n}));
  CheckGrad("da", a, da, loss);
  CheckGrad("db", b, db, loss);
}

TEST(SoftmaxXent, LossAndGradWithIgnoredTargets) {
  const int64_t T = 6, V = 11;
  Vec logits = RandomVec(T * V, 19, 3.0f);
  std::vector<int32_t> targets = {3, -1, 0, 10, 5, -1};
  Tensor tt(targets.data(), core::Dtype::kI32, {T});
  Vec lse(T);
  const double loss = softmax_xent_forward(Tensor(lse.data(), {T}), T2(logits, T, V), tt);
  double want = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (targets[t] < 0) continue;
    double s = 0;
    for (int64_t i = 0; i < V; ++i) s += std::exp(double(logits[t * V + i]));
    want += std::log(s) - logits[t * V + targets[t]];
  }
  EXPECT_NEAR(loss, want, 1e-5);
  const float scale = 1.0f / 4;  // 4 valid tokens
  auto f = [&] {
    Vec l2(T);
    return softmax_xent_forward(Tensor(l2.data(), {T}), T2(logits, T, V), tt) * scale;
  };
  Vec dlogits(T * V);
  softmax_xent_backward(T2(dlogits, T, V), T2(logits, T, V), Tensor(lse.data(), {T}), tt, scale);
  for (int64_t i = 0; i < V; ++i) EXPECT_EQ(dlogits[V + i], 0.0f);  // ignored row
  CheckGrad("dlogits", logits, dlogits, f);
  // In place (dlogits aliases logits) gives the same result.
  Vec inplace = logits;
  softmax_xent_backward(T2(inplace, T, V), T2(inplace, T, V), Tensor(lse.data(), {T}), tt, scale);
  for (size_t i = 0; i < inplace.size(); ++i) EXPECT_EQ(inplace[i], dlogits[i]);
}

TEST(AdamW, MatchesPytorchFormula) {
  const int64_t n = 5;
  Vec w = RandomVec(n, 20), g1 = RandomVec(n, 21), g2 = RandomVec(n, 22);
  Vec m(n, 0.0f), v(n, 0.0f);
  const AdamWHyper h{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f};
  std::vector<double> W(w.begin(), w.end()), M(n, 0.0), Vv(n, 0.0);
  for (int step = 1; step <= 2; ++step) {
    const Vec& g = step == 1 ? g1 : g2;
    adamw_update(Tensor(w.data(), {n}), Tensor(m.data(), {n}), Tensor(v.data(), {n}),
                 ConstTensor(g.data(), {n}), h, step);
    for (int64_t i = 0; i < n; ++i) {
      W[i] *= 1 - 0.1 * 0.1;
      M[i] = 0.9 * M[i] + 0.1 * g[i];
      Vv[i] = 0.99 * Vv[i] + 0.01 * double(g[i]) * g[i];
      const double mh = M[i] / (1 - std::pow(0.9, step)), vh = Vv[i] / (1 - std::pow(0.99, step));
      W[i] -= 0.1 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  ExpectNear("w", w, W, 1e-6, 1e-5);
}

TEST(Elementwise, GatherScatterSoftmax) {
  Vec x = {1, 2, 3, 4, 5, 6};  // (3, 2)
  std::vector<int32_t> idx = {2, 0};
  Vec y(4);
  gather_rows(T2(y, 2, 2), T2(x, 3, 2), idx.data());
  EXPECT_EQ(y, (Vec{5, 6, 1, 2}));
  Vec acc(6, 0.0f);
  const float s[] = {2.0f, -1.0f};
  scatter_add_rows(T2(acc, 3, 2), T2(y, 2, 2), idx.data(), s);
  EXPECT_EQ(acc, (Vec{-1, -2, 0, 0, 10, 12}));
  Vec p(6), lse(3);
  softmax_rows(T2(p, 3, 2), Tensor(lse.data(), {3}), T2(x, 3, 2));
  EXPECT_NEAR(p[0] + p[1], 1.0, 1e-6);
  EXPECT_NEAR(p[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(lse[2], 6 + std::log1p(std::exp(-1.0)), 1e-5);
  std::vector<int32_t> bad = {3};
  EXPECT_DEATH(gather_rows(T2(y, 1, 2), T2(x, 3, 2), bad.data()), "gather index");
}

}  // namespace
}  // namespace pentamesh::kernels

namespace pentamesh::kernels {
namespace {

TEST(FastExp, RelativeErrorBelow2e7) {
  double worst = 0;
  for (int i = -870000; i <= 880000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(FastExp(x) - want) / want);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_LT(FastExp(-1000.0f), 1e-37f);
  EXPECT_GT(FastExp(-1000.0f), 0.0f);
}

}  // namespace
}  // namespace pentamesh::kernels

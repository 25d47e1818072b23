#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/fast_math.h"

namespace pentamesh::kernels {
namespace {

constexpr int64_t kTileQ = 32;  // query rows per tile
constexpr int64_t kTileK = 64;  // key rows per tile

void CheckDims(ConstTensor q, ConstTensor k, ConstTensor v, const AttentionDims& d) {
  PM_CHECK(d.heads % d.kv_heads == 0) << "heads=" << d.heads << " kv_heads=" << d.kv_heads;
  const int64_t T = d.batch * d.seq;
  PM_CHECK(q.numel() == T * d.heads * d.head_dim) << "q " << q.shape().ToString();
  PM_CHECK(k.numel() == T * d.kv_heads * d.head_dim) << "k " << k.shape().ToString();
  PM_CHECK(v.numel() == k.numel()) << "v " << v.shape().ToString();
}

// Strided row access: element (b, s, head, d) of a (B*S, N, D) tensor.
struct Rows {
  const float* base;
  int64_t row_stride;  // N * D
  const float* at(int64_t b, int64_t s, int64_t seq, int64_t head, int64_t D) const {
    return base + (b * seq + s) * row_stride + head * D;
  }
};

}  // namespace

void attention_forward(Tensor o, Tensor lse, ConstTensor q, ConstTensor k, ConstTensor v,
                       const AttentionDims& d) {
  CheckDims(q, k, v, d);
  PM_CHECK(o.numel() == q.numel()) << "o " << o.shape().ToString();
  PM_CHECK(lse.numel() == d.batch * d.heads * d.seq) << "lse " << lse.shape().ToString();
  const int64_t S = d.seq, D = d.head_dim, group = d.heads / d.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const Rows Q{q.f32(), d.heads * D}, Kr{k.f32(), d.kv_heads * D}, Vr{v.f32(), d.kv_heads * D};
  float* po = o.f32();
  float* plse = lse.f32();
  std::vector<float> scores(kTileQ * kTileK), acc(kTileQ * D), m(kTileQ), l(kTileQ);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t kh = h / group;
      for (int64_t i0 = 0; i0 < S; i0 += kTileQ) {
        const int64_t i1 = std::min(S, i0 + kTileQ);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
        std::fill(l.begin(), l.end(), 0.0f);
        for (int64_t j0 = 0; j0 < i1; j0 += kTileK) {  // causal: keys up to the last query
          const int64_t j1 = std::min(i1, j0 + kTileK);
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t r = i - i0;
            const float* qi = Q.at(b, i, S, h, D);
            const int64_t jend = std::min(j1, i + 1);
            if (jend <= j0) continue;
            float* sr = scores.data() + r * kTileK;
            float row_max = m[r];
            for (int64_t j = j0; j < jend; ++j) {
              sr[j - j0] = Dot(qi, Kr.at(b, j, S, kh, D), D) * scale;
              row_max = std::max(row_max, sr[j - j0]);
            }
            const float correction = std::exp(m[r] - row_max);  // exp(-inf) = 0 at first tile
            float* ar = acc.data() + r * D;
            for (int64_t x = 0; x < D; ++x) ar[x] *= correction;
            for (int64_t j = 0; j < jend - j0; ++j) sr[j] = FastExp(sr[j] - row_max);
            float sum = 0;
            for (int64_t j = j0; j < jend; ++j) {
              const float p = sr[j - j0];
              sum += p;
              const float* vj = Vr.at(b, j, S, kh, D);
              for (int64_t x = 0; x < D; ++x) ar[x] += p * vj[x];
            }
            l[r] = l[r] * correction + sum;
            m[r] = row_max;
          }
        }
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i - i0;
          float* oi = po + (b * S + i) * d.heads * D + h * D;
          const float inv = 1.0f / l[r];
          for (int64_t x = 0; x < D; ++x) oi[x] = acc[r * D + x] * inv;
          plse[(b * d.heads + h) * S + i] = m[r] + std::log(l[r]);
        }
      }
    }
  }
}

void attention_backward(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, ConstTensor q,
                        ConstTensor k, ConstTensor v, ConstTensor o, ConstTensor lse,
                        const AttentionDims& d) {
  CheckDims(q, k, v, d);
  PM_CHECK(dq.numel() == q.numel() && dk.numel() == k.numel() && dv.numel() == v.numel())
      << "grad shapes";
  PM_CHECK(dout.numel() == q.numel() && o.numel() == q.numel()) << "dout/o shapes";
  const int64_t S = d.seq, D = d.head_dim, A = d.heads, group = A / d.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const Rows Q{q.f32(), A * D}, Kr{k.f32(), d.kv_heads * D}, Vr{v.f32(), d.kv_heads * D};
  const Rows dO{dout.f32(), A * D}, O{o.f32(), A * D};
  const float* plse = lse.f32();
  float* pdq = dq.f32();
  float* pdk = dk.f32();
  float* pdv = dv.f32();
  std::fill(pdq, pdq + dq.numel(), 0.0f);
  // delta[b, h, i] = sum_x dO * O  (FlashAttention-2's D_i).
  std::vector<float> delta(static_cast<size_t>(d.batch * A * S));
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < A; ++h)
      for (int64_t i = 0; i < S; ++i)
        delta[static_cast<size_t>((b * A + h) * S + i)] =
            Dot(dO.at(b, i, S, h, D), O.at(b, i, S, h, D), D);
  std::vector<float> dk_acc(kTileK * D), dv_acc(kTileK * D);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t kh = 0; kh < d.kv_heads; ++kh) {
      for (int64_t j0 = 0; j0 < S; j0 += kTileK) {
        const int64_t j1 = std::min(S, j0 + kTileK);
        std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
        std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
        for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
          const float* lse_bh = plse + (b * A + h) * S;
          const float* delta_bh = delta.data() + (b * A + h) * S;
          for (int64_t i = j0; i < S; ++i) {  // causal: queries at or after the first key
            const float* qi = Q.at(b, i, S, h, D);
            const float* doi = dO.at(b, i, S, h, D);
            float* dqi = pdq + (b * S + i) * A * D + h * D;
            const int64_t jend = std::min(j1, i + 1);
            for (int64_t j = j0; j < jend; ++j) {
              const float* kj = Kr.at(b, j, S, kh, D);
              const float* vj = Vr.at(b, j, S, kh, D);
              const float p = FastExp(Dot(qi, kj, D) * scale - lse_bh[i]);
              const float dp = Dot(doi, vj, D);
              const float ds = p * (dp - delta_bh[i]) * scale;
              float* dvj = dv_acc.data() + (j - j0) * D;
              float* dkj = dk_acc.data() + (j - j0) * D;
              for (int64_t x = 0; x < D; ++x) {
                dvj[x] += p * doi[x];
                dkj[x] += ds * qi[x];
                dqi[x] += ds * kj[x];
              }
            }
          }
        }
        for (int64_t j = j0; j < j1; ++j) {
          float* dkj = pdk + (b * S + j) * d.kv_heads * D + kh * D;
          float* dvj = pdv + (b * S + j) * d.kv_heads * D + kh * D;
          for (int64_t x = 0; x < D; ++x) {
            dkj[x] = dk_acc[(j - j0) * D + x];
            dvj[x] = dv_acc[(j - j0) * D + x];
          }
        }
      }
    }
  }
}

void attention_cached(Tensor o, ConstTensor q, ConstTensor k, ConstTensor v,
                      const CachedAttentionDims& d) {
  PM_CHECK(d.heads % d.kv_heads == 0) << "heads=" << d.heads << " kv_heads=" << d.kv_heads;
  const int64_t N = d.queries, D = d.head_dim, A = d.heads, K = d.kv_heads, group = A / K;
  const int64_t keys = d.pos0 + N;
  PM_CHECK(q.numel() == N * A * D && o.numel() == q.numel()) << "q " << q.shape().ToString();
  PM_CHECK(k.numel() >= keys * K * D && v.numel() == k.numel())
      << "cache " << k.shape().ToString() << " holds fewer than " << keys << " rows";
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> scores(static_cast<size_t>(keys));
  for (int64_t i = 0; i < N; ++i) {
    const int64_t visible = d.pos0 + i + 1;
    for (int64_t h = 0; h < A; ++h) {
      const float* qi = q.f32() + (i * A + h) * D;
      const int64_t kh = h / group;
      float row_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < visible; ++j) {
        scores[static_cast<size_t>(j)] = Dot(qi, k.f32() + (j * K + kh) * D, D) * scale;
        row_max = std::max(row_max, scores[static_cast<size_t>(j)]);
      }
      float* oi = o.f32() + (i * A + h) * D;
      std::fill(oi, oi + D, 0.0f);
      float sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        const float p = FastExp(scores[static_cast<size_t>(j)] - row_max);
        sum += p;
        const float* vj = v.f32() + (j * K + kh) * D;
        for (int64_t x = 0; x < D; ++x) oi[x] += p * vj[x];
      }
      const float inv = 1.0f / sum;
      for (int64_t x = 0; x < D; ++x) oi[x] *= inv;
    }
  }
}

}  // namespace pentamesh::kernels

#include "model/cp_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/check.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/fast_math.h"

namespace pentamesh::model {
namespace {

using core::Buffer;
using core::ConstTensor;
using core::Dtype;
using core::MemTag;
using core::Tensor;

using kernels::Dot;

// The shapes of one call, checked once.
struct Geometry {
  int64_t B, S, L, T, A, K, D, group;
  int cp, rank;
  float scale;
};

Geometry MakeGeometry(const CpAttentionDims& d, const comm::Communicator& cp) {
  PM_CHECK(d.seq % (2 * cp.size()) == 0) << "seq " << d.seq << " not divisible by 2 cp";
  PM_CHECK(d.heads % d.kv_heads == 0) << "heads " << d.heads << " kv_heads " << d.kv_heads;
  Geometry g{};
  g.B = d.batch, g.S = d.seq, g.L = d.seq / cp.size(), g.T = d.batch * g.L;
  g.A = d.heads, g.K = d.kv_heads, g.D = d.head_dim, g.group = d.heads / d.kv_heads;
  g.cp = cp.size(), g.rank = cp.rank();
  g.scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  return g;
}

// Running online-softmax state of the local queries: acc (T, A, D), m and l (B, A, L).
struct Online {
  float* acc;
  float* m;
  float* l;
};

// Merges the block of keys k, v (rows at global positions kpos) into the state of the queries
// q (positions qpos): per query, the block's max, the rescale of acc and l, the weighted sum.
void ForwardBlock(Online st, const float* q, const float* k, const float* v,
                  const std::vector<int64_t>& qpos, const std::vector<int64_t>& kpos,
                  const Geometry& g) {
  std::vector<float> scores(static_cast<size_t>(g.L));
  for (int64_t b = 0; b < g.B; ++b) {
    for (int64_t h = 0; h < g.A; ++h) {
      const int64_t kh = h / g.group;
      for (int64_t i = 0; i < g.L; ++i) {
        const float* qi = q + ((b * g.L + i) * g.A + h) * g.D;
        const int64_t si = (b * g.A + h) * g.L + i;
        float row_max = st.m[si];
        bool any = false;
        for (int64_t j = 0; j < g.L; ++j) {
          if (kpos[static_cast<size_t>(j)] > qpos[static_cast<size_t>(i)]) continue;
          const float s = Dot(qi, k + ((b * g.L + j) * g.K + kh) * g.D, g.D) * g.scale;
          scores[static_cast<size_t>(j)] = s;
          row_max = std::max(row_max, s);
          any = true;
        }
        if (!any) continue;
        const float correction = std::exp(st.m[si] - row_max);
        float* ai = st.acc + ((b * g.L + i) * g.A + h) * g.D;
        for (int64_t x = 0; x < g.D; ++x) ai[x] *= correction;
        float sum = 0;
        for (int64_t j = 0; j < g.L; ++j) {
          if (kpos[static_cast<size_t>(j)] > qpos[static_cast<size_t>(i)]) continue;
          const float p = std::exp(scores[static_cast<size_t>(j)] - row_max);
          sum += p;
          const float* vj = v + ((b * g.L + j) * g.K + kh) * g.D;
          for (int64_t x = 0; x < g.D; ++x) ai[x] += p * vj[x];
        }
        st.l[si] = st.l[si] * correction + sum;
        st.m[si] = row_max;
      }
    }
  }
}

// Gradients of the block k, v (positions kpos) for the local queries: dq accumulates, and the
// block's dk, dv (same layout as k, v) accumulate.
struct BackwardInputs {
  const float *q, *dout, *lse, *delta;
};
void BackwardBlock(float* dq, float* dk, float* dv, const BackwardInputs& in, const float* k,
                   const float* v, const std::vector<int64_t>& qpos,
                   const std::vector<int64_t>& kpos, const Geometry& g) {
  for (int64_t b = 0; b < g.B; ++b) {
    for (int64_t h = 0; h < g.A; ++h) {
      const int64_t kh = h / g.group;
      for (int64_t i = 0; i < g.L; ++i) {
        const int64_t row = ((b * g.L + i) * g.A + h) * g.D;
        const float* qi = in.q + row;
        const float* doi = in.dout + row;
        float* dqi = dq + row;
        const int64_t si = (b * g.A + h) * g.L + i;
        for (int64_t j = 0; j < g.L; ++j) {
          if (kpos[static_cast<size_t>(j)] > qpos[static_cast<size_t>(i)]) continue;
          const int64_t krow = ((b * g.L + j) * g.K + kh) * g.D;
          const float p = std::exp(Dot(qi, k + krow, g.D) * g.scale - in.lse[si]);
          const float dp = Dot(doi, v + krow, g.D);
          const float ds = p * (dp - in.delta[si]) * g.scale;
          for (int64_t x = 0; x < g.D; ++x) {
            dv[krow + x] += p * doi[x];
            dk[krow + x] += ds * qi[x];
            dqi[x] += ds * k[krow + x];
          }
        }
      }
    }
  }
}

// The two halves of one ring hop (to rank+1, from rank-1) of `count` floats, split so a block's
// compute runs between them: post_send copies the data out and returns at once, the transfer
// proceeds while this rank computes, and RingRecv then waits only for what has not arrived.
// Tags keep the K/V stream and the dK/dV stream of the backward apart.
constexpr int kTagKv = 1, kTagGrad = 2;
void RingPost(comm::Communicator& cp, const float* send, int64_t count, int tag) {
  cp.post_send(send, count, Dtype::kF32, (cp.rank() + 1) % cp.size(), tag);
}
void RingRecv(comm::Communicator& cp, float* recv, int64_t count, int tag) {
  cp.recv_tagged(recv, count, Dtype::kF32, (cp.rank() + cp.size() - 1) % cp.size(), tag);
}

void RingForward(Tensor o, CpAttentionSaved& saved, ConstTensor q, ConstTensor k, ConstTensor v,
                 const Geometry& g, comm::Communicator& cp, core::Allocator& alloc) {
  const int64_t kv_count = g.T * g.K * g.D;
  Buffer acc(alloc, MemTag::kOther, Dtype::kF32, {g.T, g.A, g.D});
  saved.lse = Buffer(alloc, MemTag::kActivations, Dtype::kF32, {g.B, g.A, g.L});
  Buffer l(alloc, MemTag::kOther, Dtype::kF32, {g.B, g.A, g.L});
  std::fill(acc.f32(), acc.f32() + acc.view().numel(), 0.0f);
  std::fill(l.f32(), l.f32() + l.view().numel(), 0.0f);
  float* m = saved.lse.f32();  // the running max lives where the lse will be written
  std::fill(m, m + saved.lse.view().numel(), -std::numeric_limits<float>::infinity());
  // The block held, K then V. Each step first posts it on to rank+1 (the communicator stages a
  // copy), computes with it while it travels, then receives the next block into it.
  Buffer cur(alloc, MemTag::kComm, Dtype::kF32, {2, kv_count});
  std::copy(k.f32(), k.f32() + kv_count, cur.f32());
  std::copy(v.f32(), v.f32() + kv_count, cur.f32() + kv_count);
  const std::vector<int64_t> qpos = CpLocalPositions(g.S, g.cp, g.rank);
  for (int step = 0; step < g.cp; ++step) {
    const int src = (g.rank - step + g.cp) % g.cp;  // owner of the block held at this step
    const bool more = step + 1 < g.cp;
    if (more) RingPost(cp, cur.f32(), 2 * kv_count, kTagKv);
    ForwardBlock({acc.f32(), m, l.f32()}, q.f32(), cur.f32(), cur.f32() + kv_count, qpos,
                 CpLocalPositions(g.S, g.cp, src), g);
    if (more) RingRecv(cp, cur.f32(), 2 * kv_count, kTagKv);
  }
  if (g.cp > 1) cp.wait_sends();
  for (int64_t b = 0; b < g.B; ++b) {
    for (int64_t h = 0; h < g.A; ++h) {
      for (int64_t i = 0; i < g.L; ++i) {
        const int64_t si = (b * g.A + h) * g.L + i, row = ((b * g.L + i) * g.A + h) * g.D;
        const float inv = 1.0f / l.f32()[si];
        for (int64_t x = 0; x < g.D; ++x) o.f32()[row + x] = acc.f32()[row + x] * inv;
        m[si] = m[si] + std::log(l.f32()[si]);
      }
    }
  }
}

void RingBackward(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, ConstTensor q, ConstTensor k,
                  ConstTensor v, ConstTensor o, const CpAttentionSaved& saved, const Geometry& g,
                  comm::Communicator& cp, core::Allocator& alloc) {
  const int64_t kv_count = g.T * g.K * g.D;
  Buffer delta(alloc, MemTag::kOther, Dtype::kF32, {g.B, g.A, g.L});
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.A; ++h)
      for (int64_t i = 0; i < g.L; ++i) {
        const int64_t row = ((b * g.L + i) * g.A + h) * g.D;
        delta.f32()[(b * g.A + h) * g.L + i] = Dot(dout.f32() + row, o.f32() + row, g.D);
      }
  std::fill(dq.f32(), dq.f32() + dq.numel(), 0.0f);
  std::fill(dk.f32(), dk.f32() + dk.numel(), 0.0f);
  std::fill(dv.f32(), dv.f32() + dv.numel(), 0.0f);
  const BackwardInputs in{q.f32(), dout.f32(), saved.lse.f32(), delta.f32()};
  const std::vector<int64_t> qpos = CpLocalPositions(g.S, g.cp, g.rank);
  // Step 0: the own block, into the own gradients, while the own K, V already travel on.
  Buffer cur(alloc, MemTag::kComm, Dtype::kF32, {2, kv_count});
  if (g.cp > 1) {
    std::copy(k.f32(), k.f32() + kv_count, cur.f32());
    std::copy(v.f32(), v.f32() + kv_count, cur.f32() + kv_count);
    RingPost(cp, cur.f32(), 2 * kv_count, kTagKv);
  }
  BackwardBlock(dq.f32(), dk.f32(), dv.f32(), in, k.f32(), v.f32(), qpos, qpos, g);
  if (g.cp == 1) return;
  // Steps 1..cp-1: K, V of rank-step arrive and are posted on before the compute. That block's
  // dK, dV partial (born at step 1 on the rank after the owner) rides the ring one step behind:
  // this step's contribution goes into `partial` while the accumulated one (from rank-1) is in
  // flight, then is added to it and posted on; after the last step it makes one last hop home.
  Buffer partial(alloc, MemTag::kComm, Dtype::kF32, {2, kv_count});
  Buffer grad(alloc, MemTag::kComm, Dtype::kF32, {2, kv_count});
  float* pk = partial.f32();
  float* gk = grad.f32();
  for (int step = 1; step < g.cp; ++step) {
    RingRecv(cp, cur.f32(), 2 * kv_count, kTagKv);
    if (step + 1 < g.cp) RingPost(cp, cur.f32(), 2 * kv_count, kTagKv);
    std::fill(pk, pk + 2 * kv_count, 0.0f);
    const int src = (g.rank - step + g.cp) % g.cp;
    BackwardBlock(dq.f32(), pk, pk + kv_count, in, cur.f32(), cur.f32() + kv_count, qpos,
                  CpLocalPositions(g.S, g.cp, src), g);
    if (step >= 2) {
      RingRecv(cp, gk, 2 * kv_count, kTagGrad);
      for (int64_t x = 0; x < 2 * kv_count; ++x) pk[x] += gk[x];
    }
    RingPost(cp, pk, 2 * kv_count, kTagGrad);
  }
  RingRecv(cp, gk, 2 * kv_count, kTagGrad);  // now: the own block's dK, dV
  cp.wait_sends();
  for (int64_t x = 0; x < kv_count; ++x) {
    dk.f32()[x] += gk[x];
    dv.f32()[x] += gk[kv_count + x];
  }
}

// Ulysses re-layout of x (T, N, D), sequence-sharded with all N heads, into full (B*S, N/cp, D):
// the whole sequence in global order for this rank's N/cp heads. to_heads = false is the inverse.
// src is local when to_heads, full otherwise; dst the other one.
void UlyssesExchange(float* dst, const float* src_data, int64_t N, bool to_heads, const Geometry& g,
                     comm::Communicator& cp, core::Allocator& alloc) {
  const int64_t Nh = N / g.cp, slice = g.T * Nh * g.D;
  Buffer send(alloc, MemTag::kComm, Dtype::kF32, {g.cp, slice});
  Buffer recv(alloc, MemTag::kComm, Dtype::kF32, {g.cp, slice});
  const std::vector<int64_t> counts(static_cast<size_t>(g.cp), slice);
  // Row t = (b, r) of rank p's local rows sits at full row b*S + pos_p[r]; heads of p: [p Nh, ..).
  auto for_each = [&](auto&& fn) {
    for (int p = 0; p < g.cp; ++p) {
      const std::vector<int64_t> pos = CpLocalPositions(g.S, g.cp, p);
      for (int64_t b = 0; b < g.B; ++b)
        for (int64_t r = 0; r < g.L; ++r) fn(p, b, r, pos[static_cast<size_t>(r)]);
    }
  };
  const int64_t row_bytes = Nh * g.D;
  if (to_heads) {
    for_each([&](int p, int64_t b, int64_t r, int64_t) {
      const float* src = src_data + ((b * g.L + r) * N + p * Nh) * g.D;
      std::copy(src, src + row_bytes, send.f32() + p * slice + (b * g.L + r) * row_bytes);
    });
  } else {
    for_each([&](int p, int64_t b, int64_t r, int64_t pos) {
      const float* src = src_data + (b * g.S + pos) * row_bytes;
      std::copy(src, src + row_bytes, send.f32() + p * slice + (b * g.L + r) * row_bytes);
    });
  }
  cp.all_to_all_v(recv.f32(), counts, send.f32(), counts, Dtype::kF32);
  if (to_heads) {
    for_each([&](int p, int64_t b, int64_t r, int64_t pos) {
      const float* src = recv.f32() + p * slice + (b * g.L + r) * row_bytes;
      std::copy(src, src + row_bytes, dst + (b * g.S + pos) * row_bytes);
    });
  } else {
    for_each([&](int p, int64_t b, int64_t r, int64_t) {
      const float* src = recv.f32() + p * slice + (b * g.L + r) * row_bytes;
      std::copy(src, src + row_bytes, dst + ((b * g.L + r) * N + p * Nh) * g.D);
    });
  }
}

kernels::AttentionDims UlyssesDims(const Geometry& g) {
  PM_CHECK(g.K % g.cp == 0) << "ulysses: kv_heads " << g.K << " not divisible by cp " << g.cp;
  return {.batch = g.B, .seq = g.S, .heads = g.A / g.cp, .kv_heads = g.K / g.cp, .head_dim = g.D};
}

Buffer HeadBuffer(core::Allocator& alloc, MemTag tag, const Geometry& g, int64_t heads) {
  return Buffer(alloc, tag, Dtype::kF32, {g.B * g.S, heads / g.cp, g.D});
}

void UlyssesForward(Tensor o, CpAttentionSaved& s, ConstTensor q, ConstTensor k, ConstTensor v,
                    const Geometry& g, comm::Communicator& cp, core::Allocator& alloc) {
  const kernels::AttentionDims ad = UlyssesDims(g);
  s.q = HeadBuffer(alloc, MemTag::kActivations, g, g.A);
  s.k = HeadBuffer(alloc, MemTag::kActivations, g, g.K);
  s.v = HeadBuffer(alloc, MemTag::kActivations, g, g.K);
  s.o = HeadBuffer(alloc, MemTag::kActivations, g, g.A);
  s.lse = Buffer(alloc, MemTag::kActivations, Dtype::kF32, {g.B, g.A / g.cp, g.S});
  UlyssesExchange(s.q.f32(), q.f32(), g.A, true, g, cp, alloc);
  UlyssesExchange(s.k.f32(), k.f32(), g.K, true, g, cp, alloc);
  UlyssesExchange(s.v.f32(), v.f32(), g.K, true, g, cp, alloc);
  kernels::attention_forward(s.o.view(), s.lse.view(), s.q.view(), s.k.view(), s.v.view(), ad);
  UlyssesExchange(o.f32(), s.o.f32(), g.A, false, g, cp, alloc);
}

void UlyssesBackward(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, const CpAttentionSaved& s,
                     const Geometry& g, comm::Communicator& cp, core::Allocator& alloc) {
  const kernels::AttentionDims ad = UlyssesDims(g);
  Buffer dout_h = HeadBuffer(alloc, MemTag::kOther, g, g.A);
  Buffer dq_h = HeadBuffer(alloc, MemTag::kOther, g, g.A);
  Buffer dk_h = HeadBuffer(alloc, MemTag::kOther, g, g.K);
  Buffer dv_h = HeadBuffer(alloc, MemTag::kOther, g, g.K);
  UlyssesExchange(dout_h.f32(), dout.f32(), g.A, true, g, cp, alloc);
  kernels::attention_backward(dq_h.view(), dk_h.view(), dv_h.view(), dout_h.view(), s.q.view(),
                              s.k.view(), s.v.view(), s.o.view(), s.lse.view(), ad);
  UlyssesExchange(dq.f32(), dq_h.f32(), g.A, false, g, cp, alloc);
  UlyssesExchange(dk.f32(), dk_h.f32(), g.K, false, g, cp, alloc);
  UlyssesExchange(dv.f32(), dv_h.f32(), g.K, false, g, cp, alloc);
}

}  // namespace

std::vector<int64_t> CpLocalPositions(int64_t seq, int cp, int rank) {
  PM_CHECK(cp >= 1 && rank >= 0 && rank < cp) << "cp " << cp << " rank " << rank;
  PM_CHECK(seq % (2 * cp) == 0) << "seq " << seq << " not divisible by 2 cp = " << 2 * cp;
  const int64_t chunk = seq / (2 * cp);
  std::vector<int64_t> pos;
  pos.reserve(static_cast<size_t>(2 * chunk));
  for (const int64_t c : {int64_t{rank}, int64_t{2 * cp - 1 - rank}})
    for (int64_t i = 0; i < chunk; ++i) pos.push_back(c * chunk + i);
  return pos;
}

void CpAttentionForward(Tensor o, CpAttentionSaved& saved, ConstTensor q, ConstTensor k,
                        ConstTensor v, const CpAttentionDims& dims, spec::CpKind kind,
                        comm::Communicator& cp, core::Allocator& alloc) {
  const Geometry g = MakeGeometry(dims, cp);
  PM_CHECK(q.numel() == g.T * g.A * g.D && k.numel() == g.T * g.K * g.D && v.numel() == k.numel() &&
           o.numel() == q.numel())
      << "cp attention shapes: q " << q.shape().ToString() << " k " << k.shape().ToString();
  saved = CpAttentionSaved();
  if (kind == spec::CpKind::kRing) {
    RingForward(o, saved, q, k, v, g, cp, alloc);
  } else {
    UlyssesForward(o, saved, q, k, v, g, cp, alloc);
  }
}

void CpAttentionBackward(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, ConstTensor q,
                         ConstTensor k, ConstTensor v, ConstTensor o, CpAttentionSaved& saved,
                         const CpAttentionDims& dims, spec::CpKind kind, comm::Communicator& cp,
                         core::Allocator& alloc) {
  const Geometry g = MakeGeometry(dims, cp);
  PM_CHECK(dq.numel() == g.T * g.A * g.D && dk.numel() == g.T * g.K * g.D &&
           dv.numel() == dk.numel() && dout.numel() == dq.numel())
      << "cp attention grad shapes";
  PM_CHECK(!saved.lse.empty()) << "cp attention backward without forward";
  if (kind == spec::CpKind::kRing) {
    RingBackward(dq, dk, dv, dout, q, k, v, o, saved, g, cp, alloc);
  } else {
    UlyssesBackward(dq, dk, dv, dout, saved, g, cp, alloc);
  }
  saved = CpAttentionSaved();
}

}  // namespace pentamesh::model

// The router options of model/moe.h on one Moe layer, against independent references:
//   - topk_renorm's gates are the chosen experts' softmax probabilities divided by their sum
//     (recomputed here from x and the router weight in double), so a token's kept gates sum to 1
//     when nothing is dropped; softmax_topk's are the probabilities themselves.
//   - the router weight's and the input's gradients through the renormalisation equal central
//     finite differences of L = sum(y * r), with the aux and z losses off (the router's gradient
//     then comes only through the gates), dropless and with capacity drops (a dropped choice still
//     counts in the denominator).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/rng.h"
#include "model/moe.h"

namespace pentamesh::model {
namespace {

constexpr int64_t kH = 8, kE = 4, kK = 2, kT = 12;

struct Layer {
  core::Allocator alloc;
  ParamSet params{alloc, core::Dtype::kF32};
  Moe moe;
  std::vector<float> x, r;  // (T, H) input and the loss weights of y
  explicit Layer(const MoeConfig& c) : moe(params, "moe", c) {
    params.Finalize();
    params.Init(5);
    params.ForEach([&](const ParamInfo& info, Tensor w, Tensor, Tensor, Tensor) {
      for (int64_t i = 0; i < w.numel(); ++i)  // well above fp32 finite-difference noise
        w.f32()[i] =
            static_cast<float>(0.5 * core::CounterRng::Normal(11, core::HashName(info.name),
                                                              static_cast<uint64_t>(i)));
    });
    for (int64_t i = 0; i < kT * kH; ++i) {
      x.push_back(static_cast<float>(core::CounterRng::Normal(12, 0, static_cast<uint64_t>(i))));
      r.push_back(static_cast<float>(core::CounterRng::Normal(13, 0, static_cast<uint64_t>(i))));
    }
  }
  // L = sum(y * r); `saved` keeps the forward's state.
  double Loss(Moe::Saved& saved) {
    std::vector<float> y(x.size());
    const LayerContext ctx{.alloc = &alloc};
    moe.Forward(core::Tensor(y.data(), {kT, kH}), saved, core::Tensor(x.data(), {kT, kH}), ctx,
                nullptr);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
    return l;
  }
  double Loss() {
    Moe::Saved saved;
    return Loss(saved);
  }
  // Forward and backward of L; returns dx, router grad in params.grad.
  std::vector<float> Backward() {
    params.ZeroGrads();
    Moe::Saved saved;
    Loss(saved);
    std::vector<float> dx(x.size());
    const LayerContext ctx{.alloc = &alloc};
    moe.Backward(core::Tensor(dx.data(), {kT, kH}), core::Tensor(r.data(), {kT, kH}),
                 core::Tensor(x.data(), {kT, kH}), saved, ctx);
    return dx;
  }
};

MoeConfig Config(spec::MoeRouter router, double capacity_factor) {
  MoeConfig c{.hidden = kH, .experts = kE, .top_k = kK, .expert_ffn = 8};
  c.capacity_factor = capacity_factor;
  c.router = router;
  c.aux_loss_coef = 0;
  c.z_loss_coef = 0;
  return c;
}

// Softmax of x_t Wr^T in double: (T, E).
std::vector<double> Probs(Layer& l) {
  const float* w = l.params.master(l.params.Find("moe.router")).f32();
  std::vector<double> p(static_cast<size_t>(kT * kE));
  for (int64_t t = 0; t < kT; ++t) {
    double mx = -1e300, sum = 0;
    for (int64_t e = 0; e < kE; ++e) {
      double z = 0;
      for (int64_t h = 0; h < kH; ++h) z += double(l.x[t * kH + h]) * w[e * kH + h];
      p[t * kE + e] = z;
      mx = std::max(mx, z);
    }
    for (int64_t e = 0; e < kE; ++e) sum += (p[t * kE + e] = std::exp(p[t * kE + e] - mx));
    for (int64_t e = 0; e < kE; ++e) p[t * kE + e] /= sum;
  }
  return p;
}

void ExpectGates(spec::MoeRouter router) {
  Layer l(Config(router, 0));
  Moe::Saved saved;
  l.Loss(saved);
  const std::vector<double> p = Probs(l);
  std::vector<double> gate_sum(kT, 0.0);
  ASSERT_EQ(saved.gate.size(), static_cast<size_t>(kT * kK));  // dropless: every choice kept
  for (int64_t e = 0; e < kE; ++e) {
    for (int64_t a = saved.offsets[e]; a < saved.offsets[e + 1]; ++a) {
      const int64_t t = saved.token[a];
      std::vector<double> pt(p.begin() + t * kE, p.begin() + (t + 1) * kE);
      std::sort(pt.rbegin(), pt.rend());
      const double top = std::accumulate(pt.begin(), pt.begin() + kK, 0.0);
      const double want =
          router == spec::MoeRouter::kTopKRenorm ? p[t * kE + e] / top : p[t * kE + e];
      EXPECT_NEAR(saved.gate[a], want, 1e-6) << "token " << t << " expert " << e;
      gate_sum[t] += saved.gate[a];
    }
  }
  for (int64_t t = 0; t < kT; ++t) {
    if (router == spec::MoeRouter::kTopKRenorm) {
      EXPECT_NEAR(gate_sum[t], 1.0, 1e-6);
    } else {
      EXPECT_LT(gate_sum[t], 1.0);
    }
  }
}

TEST(MoeRouter, TopKRenormGatesSumToOne) { ExpectGates(spec::MoeRouter::kTopKRenorm); }
TEST(MoeRouter, SoftmaxTopKGatesAreTheProbabilities) { ExpectGates(spec::MoeRouter::kSoftmaxTopK); }

// Central differences of L against the analytic router and input gradients; top-k switches
// (one-sided differences disagree) have no reference and are skipped.
void ExpectFiniteDifferences(double capacity_factor) {
  Layer l(Config(spec::MoeRouter::kTopKRenorm, capacity_factor));
  const std::vector<float> dx = l.Backward();
  const ParamId router = l.params.Find("moe.router");
  const std::vector<float> grad(l.params.grad(router).f32(), l.params.grad(router).f32() + kE * kH);
  int checked = 0, kinks = 0;
  double max_grad = 0;
  auto check = [&](float& v, double analytic, const char* what, int64_t i) {
    const double eps = 1e-2, center = l.Loss();
    const float saved = v;
    v = static_cast<float>(saved + eps);
    const double up = l.Loss();
    v = static_cast<float>(saved - eps);
    const double down = l.Loss();
    v = saved;
    const double numeric = (up - down) / (2 * eps);
    if (std::fabs((up - center) / eps - (center - down) / eps) > 0.05 * std::fabs(numeric) + 2e-3) {
      ++kinks;
      return;
    }
    ++checked;
    max_grad = std::max(max_grad, std::fabs(analytic));
    EXPECT_NEAR(analytic, numeric, 2e-4 + 2e-2 * std::fabs(numeric)) << what << "[" << i << "]";
  };
  float* w = l.params.master(router).f32();
  for (int64_t i = 0; i < kE * kH; ++i) check(w[i], grad[i], "router", i);
  for (int64_t i = 0; i < kT * kH; i += 3) check(l.x[i], dx[i], "x", i);
  EXPECT_GT(checked, 50);
  EXPECT_LT(kinks, checked / 10);
  EXPECT_GT(max_grad, 1e-2);  // the router really receives a gradient through the gates
}

TEST(MoeRouter, TopKRenormGradientsMatchFiniteDifferencesDropless) { ExpectFiniteDifferences(0); }

TEST(MoeRouter, TopKRenormGradientsMatchFiniteDifferencesWithDrops) {
  ExpectFiniteDifferences(0.5);  // capacity ceil(0.5 * 12 * 2 / 4) = 3 of 6 per expert on average
}

}  // namespace
}  // namespace pentamesh::model

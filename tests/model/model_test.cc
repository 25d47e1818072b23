// The model's layers through the whole-model gradient: every parameter's gradient against central
// finite differences (fp32 model, perturbed weights), recomputation policies and micro-batch
// accumulation against the plain run, the zero-bubble split (also with ZeRO-style parked grads),
// MoE capacity/dropping, layout-independent init.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/stage.h"
#include "testing/tiny_model.h"

namespace pentamesh::model {
namespace {

using testing::Batch;
using testing::ForwardBackward;
using testing::LossOnly;

StageConfig Config(const spec::ModelSpec& m, spec::Recompute rc = spec::Recompute::kNone) {
  return {.model = m, .recompute = rc, .aux_loss_coef = 0.1, .z_loss_coef = 0.01};
}

// Larger weights than the default init, so gradients are well above fp32 finite-difference noise.
void Perturb(ParamSet& params, uint64_t seed) {
  params.ForEach([&](const ParamInfo& info, Tensor w, Tensor, Tensor, Tensor) {
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double n =
          core::CounterRng::Normal(seed, core::HashName(info.name), static_cast<uint64_t>(i));
      w.f32()[i] = info.init.kind == InitKind::kOnes ? static_cast<float>(1.0 + 0.2 * n)
                                                     : static_cast<float>(0.3 * n);
    }
  });
}

std::vector<float> Grads(ParamSet& params) {
  std::vector<float> g;
  params.ForEach([&](const ParamInfo&, Tensor, Tensor grad, Tensor, Tensor) {
    g.insert(g.end(), grad.f32(), grad.f32() + grad.numel());
  });
  return g;
}

void FiniteDifferenceCheck(const spec::ModelSpec& spec) {
  core::Allocator alloc;
  Model model(Config(spec), alloc);
  model.params().Init(7);
  Perturb(model.params(), 8);
  const Batch b = testing::RandomBatch(2, 7, spec.vocab, 3);
  ForwardBackward(model.stage(), model.params(), b);
  const double eps = 1e-2;
  const double center = LossOnly(model.stage(), b);
  int checked = 0, failures = 0, kinks = 0;
  model.params().ForEach([&](const ParamInfo& info, Tensor w, Tensor g, Tensor, Tensor) {
    const int64_t stride = std::max<int64_t>(1, w.numel() / 6);
    for (int64_t i = 0; i < w.numel(); i += stride) {
      const float saved = w.f32()[i];
      w.f32()[i] = static_cast<float>(saved + eps);
      const double up = LossOnly(model.stage(), b);
      w.f32()[i] = static_cast<float>(saved - eps);
      const double down = LossOnly(model.stage(), b);
      w.f32()[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      ++checked;
      // A top-k switch inside [-eps, eps] makes the loss non-smooth there: the one-sided
      // differences disagree. Those points have no finite-difference reference; skip them.
      const double right = (up - center) / eps, left = (center - down) / eps;
      if (std::fabs(right - left) > 0.05 * std::fabs(numeric) + 2e-3) {
        ++kinks;
        continue;
      }
      if (std::fabs(numeric - g.f32()[i]) > 2e-4 + 3e-2 * std::fabs(numeric) && ++failures < 8) {
        ADD_FAILURE() << info.name << "[" << i << "]: analytic " << g.f32()[i] << " numeric "
                      << numeric;
      }
    }
  });
  EXPECT_GT(checked, 50);
  EXPECT_LT(kinks, checked / 10) << "too many non-smooth points to be a fair check";
  EXPECT_EQ(failures, 0);
}

// The engine runs grouped-query, full causal attention: MLA and sliding windows are refused,
// naming the field, rather than trained as plain attention.
TEST(Model, RefusesAttentionItDoesNotImplement) {
  ASSERT_TRUE(model::CheckSupported(testing::TinyDense()).ok());
  spec::ModelSpec mla = testing::TinyDense();
  mla.mla = {.kv_lora_rank = 8, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4, .v_head_dim = 4};
  const core::Status a = model::CheckSupported(mla);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.message().find("model.mla: the engine implements grouped-query attention only"),
            std::string::npos)
      << a.message();
  spec::ModelSpec window = testing::TinyDense();
  window.sliding_window = 16;
  const core::Status w = model::CheckSupported(window);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("model.sliding_window: 16"), std::string::npos) << w.message();
  // Whatever reader built the spec, zero KV heads is an error naming the field, not a division by
  // zero (hf_fuzz found one reader that let it through).
  spec::ModelSpec no_kv = testing::TinyDense();
  no_kv.kv_heads = 0;
  const core::Status k = model::CheckSupported(no_kv);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.message().find("model.kv_heads: 0 must be positive"), std::string::npos)
      << k.message();
}

TEST(Model, DenseGradientsMatchFiniteDifferences) { FiniteDifferenceCheck(testing::TinyDense()); }

TEST(Model, MoeGradientsMatchFiniteDifferences) {
  spec::ModelSpec m = testing::TinyMoe();
  m.tied_embeddings = true;
  FiniteDifferenceCheck(m);
}

// Mixtral routing: the whole model's gradients through the renormalised gates.
TEST(Model, MoeRenormRouterGradientsMatchFiniteDifferences) {
  spec::ModelSpec m = testing::TinyMoe();
  m.moe.router = spec::MoeRouter::kTopKRenorm;
  FiniteDifferenceCheck(m);
}

// Same weights and batch under every recompute policy: same loss and grads (bitwise: the same
// kernels run on the same inputs).
TEST(Model, RecomputePoliciesGiveIdenticalGradients) {
  for (const spec::ModelSpec& spec : {testing::TinyDense(), testing::TinyMoe()}) {
    std::vector<float> ref;
    double ref_loss = 0;
    for (spec::Recompute rc :
         {spec::Recompute::kNone, spec::Recompute::kSelective, spec::Recompute::kFull}) {
      core::Allocator alloc;
      Model model(Config(spec, rc), alloc);
      model.params().Init(11);
      const double loss =
          ForwardBackward(model.stage(), model.params(), testing::RandomBatch(2, 9, spec.vocab, 5))
              .loss;
      std::vector<float> g = Grads(model.params());
      if (rc == spec::Recompute::kNone) {
        ref = g;
        ref_loss = loss;
      } else {
        EXPECT_EQ(loss, ref_loss) << spec.name << " " << spec::ToString(rc);
        EXPECT_EQ(g, ref) << spec.name << " " << spec::ToString(rc);
      }
    }
  }
}

TEST(Model, RecomputeLowersStashedActivations) {
  const spec::ModelSpec spec = testing::TinyDense();
  std::vector<int64_t> peaks;
  for (spec::Recompute rc :
       {spec::Recompute::kNone, spec::Recompute::kSelective, spec::Recompute::kFull}) {
    core::Allocator alloc;
    Model model(Config(spec, rc), alloc);
    model.params().Init(1);
    const Batch b = testing::RandomBatch(4, 16, spec.vocab, 5);
    alloc.ResetPeaks();
    ForwardBackward(model.stage(), model.params(), b);
    EXPECT_EQ(alloc.live_bytes(core::MemTag::kActivations), 0) << "stash freed";
    peaks.push_back(alloc.peak_bytes(core::MemTag::kActivations));
  }
  EXPECT_GT(peaks[0], peaks[1]);
  EXPECT_GT(peaks[1], peaks[2]);
}

TEST(Model, MicroBatchAccumulationMatchesOneBatch) {
  const spec::ModelSpec spec = testing::TinyMoe();
  core::Allocator alloc;
  Model model(Config(spec), alloc);
  model.params().Init(3);
  StageConfig c = Config(spec);
  c.aux_loss_coef = 0;  // the aux loss is per micro-batch by definition; compare the LM part
  c.z_loss_coef = 0;
  core::Allocator alloc2;
  Model model2(c, alloc2);
  model2.params().Init(3);
  const Batch b = testing::RandomBatch(4, 8, spec.vocab, 9);
  const double one = ForwardBackward(model2.stage(), model2.params(), b, 1).loss;
  const std::vector<float> g1 = Grads(model2.params());
  const double four = ForwardBackward(model2.stage(), model2.params(), b, 4).loss;
  const std::vector<float> g4 = Grads(model2.params());
  EXPECT_NEAR(one, four, 1e-6 * std::fabs(one));
  double num = 0, den = 0;
  for (size_t i = 0; i < g1.size(); ++i) {
    num += (double(g1[i]) - g4[i]) * (double(g1[i]) - g4[i]);
    den += double(g1[i]) * g1[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

TEST(Model, MoeCapacityDropsAndCounts) {
  spec::ModelSpec spec = testing::TinyMoe();
  spec.moe.capacity_factor = 0.5;  // capacity = ceil(0.5 * T * k / E)
  core::Allocator alloc;
  Model model(Config(spec), alloc);
  model.params().Init(3);
  const Batch b = testing::RandomBatch(2, 8, spec.vocab, 9);
  const testing::StepResult r = ForwardBackward(model.stage(), model.params(), b);
  const int64_t T = 16, k = 2, E = 4, capacity = 4;  // ceil(0.5 * 16 * 2 / 4)
  int64_t routed = 0, kept = 0;
  for (int64_t e = 0; e < E; ++e) {
    routed += r.moe.routed[e];
    kept += r.moe.kept[e];
    EXPECT_LE(r.moe.kept[e], capacity);
    EXPECT_EQ(r.moe.kept[e], std::min(r.moe.routed[e], capacity));
  }
  EXPECT_EQ(routed, T * k);  // one MoE layer
  EXPECT_EQ(routed - kept, r.moe.dropped);
  EXPECT_GT(r.moe.dropped, 0);
  EXPECT_GE(r.moe.LoadImbalance(), 1.0);
  EXPECT_GT(r.moe.aux_loss, 0);
  EXPECT_TRUE(std::isfinite(r.loss));
}

// Two stages (embedding + layer 0 | layer 1 + head) passing activations and their gradients by
// hand, two micro-batches in flight (F0 F1 B0 B1), give bitwise the single model's loss and grads:
// the interface the pipeline schedules of the distributed engine drive.
TEST(Stage, TwoStagesWithMicroBatchesInFlightMatchTheModel) {
  spec::ModelSpec m = testing::TinyMoe();
  const testing::Batch b = testing::RandomBatch(4, 6, m.vocab, 21);
  core::Allocator alloc;
  Model whole(Config(m), alloc);
  whole.params().Init(9);
  const double loss = ForwardBackward(whole.stage(), whole.params(), b, 2).loss;

  ParamSet params(alloc, core::Dtype::kF32);
  StageConfig c0 = Config(m), c1 = Config(m);
  c0.first_layer = 0;
  c0.last_layer = 1;
  c0.has_head = false;
  c1.first_layer = 1;
  c1.last_layer = m.layers;
  c1.has_embedding = false;
  Stage s0(c0, params, alloc), s1(c1, params, alloc);
  params.Finalize();
  params.Init(9);
  params.ZeroGrads();
  const int64_t seqs = 2, T = seqs * b.seq;
  int64_t valid = 0;
  for (int32_t t : b.targets) valid += t >= 0 ? 1 : 0;
  std::vector<core::Buffer> acts, grads;
  double ce = 0, aux = 0;
  std::vector<MicroBatch> mbs;
  for (int64_t mb = 0; mb < 2; ++mb) {
    mbs.push_back({.tokens = core::ConstTensor(core::Tensor(
                       const_cast<int32_t*>(b.tokens.data()) + mb * T, core::Dtype::kI32, {T})),
                   .targets = core::ConstTensor(core::Tensor(
                       const_cast<int32_t*>(b.targets.data()) + mb * T, core::Dtype::kI32, {T})),
                   .dims = {.batch = seqs, .seq = b.seq},
                   .loss_scale = 1.0f / static_cast<float>(valid),
                   .aux_scale = 0.5f});
    acts.emplace_back(alloc, core::MemTag::kComm, core::Dtype::kF32, core::Shape{T, m.hidden});
    grads.emplace_back(alloc, core::MemTag::kComm, core::Dtype::kF32, core::Shape{T, m.hidden});
  }
  for (int64_t mb = 0; mb < 2; ++mb) {
    StageForward f0 = s0.Forward(mb, mbs[mb], {}, acts[mb].view());
    StageForward f1 = s1.Forward(mb, mbs[mb], acts[mb].view(), {});
    ce += f1.loss_sum;
    aux += f0.moe.aux_loss + f0.moe.z_loss + f1.moe.aux_loss + f1.moe.z_loss;
  }
  EXPECT_EQ(s0.in_flight(), 2);
  for (int64_t mb = 0; mb < 2; ++mb) {
    s1.Backward(mb, {}, grads[mb].view());
    s0.Backward(mb, grads[mb].view(), {});
  }
  EXPECT_EQ(s0.in_flight(), 0);
  EXPECT_NEAR(ce / static_cast<double>(valid) + aux, loss, 1e-12 * std::fabs(loss));
  ASSERT_EQ(params.size(), whole.params().size());
  for (ParamId id = 0; id < params.size(); ++id) {
    const ParamId w = whole.params().Find(params.info(id).name);
    ASSERT_GE(w, 0) << params.info(id).name;
    const Tensor a = params.grad(id), g = whole.params().grad(w);
    ASSERT_EQ(a.numel(), g.numel());
    for (int64_t i = 0; i < a.numel(); ++i) {
      ASSERT_EQ(a.f32()[i], g.f32()[i]) << params.info(id).name << "[" << i << "]";
    }
  }
}

// Zero-bubble split: B (input grads, weight GEMMs deferred) for every micro-batch, then W, gives
// bitwise the grads of the full backward (each grad still accumulates micro-batch 0 then 1), for
// the dense and the MoE model; W's stash is freed by W.
TEST(Stage, SplitBackwardInputThenWeightEqualsFullBackward) {
  for (const spec::ModelSpec& m : {testing::TinyDense(), testing::TinyMoe()}) {
    const testing::Batch b = testing::RandomBatch(4, 6, m.vocab, 5);
    core::Allocator alloc;
    Model full(Config(m), alloc), split(Config(m), alloc);
    full.params().Init(3);
    split.params().Init(3);
    ForwardBackward(full.stage(), full.params(), b, 2);
    split.params().ZeroGrads();
    int64_t valid = 0;
    for (int32_t t : b.targets) valid += t >= 0 ? 1 : 0;
    const int64_t T = 2 * b.seq;
    for (int64_t mb = 0; mb < 2; ++mb) {
      MicroBatch mbatch{
          .tokens = core::ConstTensor(
              core::Tensor(const_cast<int32_t*>(b.tokens.data()) + mb * T, core::Dtype::kI32, {T})),
          .targets = core::ConstTensor(core::Tensor(const_cast<int32_t*>(b.targets.data()) + mb * T,
                                                    core::Dtype::kI32, {T})),
          .dims = {.batch = 2, .seq = b.seq},
          .loss_scale = 1.0f / static_cast<float>(valid),
          .aux_scale = 0.5f};
      split.stage().Forward(mb, mbatch, {}, {});
    }
    split.stage().BackwardInput(0, {}, {});
    split.stage().BackwardInput(1, {}, {});
    EXPECT_EQ(split.stage().in_flight(), 0);
    EXPECT_EQ(split.stage().pending_weight(), 2);
    EXPECT_GT(alloc.live_bytes(core::MemTag::kActivations), 0);
    split.stage().BackwardWeight(0);
    split.stage().BackwardWeight(1);
    EXPECT_EQ(split.stage().pending_weight(), 0);
    EXPECT_EQ(alloc.live_bytes(core::MemTag::kActivations), 0);
    for (ParamId id = 0; id < split.params().size(); ++id) {
      const Tensor a = split.params().grad(id), g = full.params().grad(id);
      double norm = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        ASSERT_EQ(a.f32()[i], g.f32()[i]) << m.name << " " << split.params().info(id).name;
        norm += std::fabs(a.f32()[i]);
      }
      EXPECT_GT(norm, 0) << split.params().info(id).name;
    }
  }
}

// ParamHooks as ZeRO-2 uses them, without the reduce-scatter: a full grad buffer per unit bound
// while acquired; Park keeps it per (unit, micro-batch), FinishWeightGrads adds it into a total.
class ParkingHooks : public ParamHooks {
 public:
  explicit ParkingHooks(ParamSet& params)
      : params_(params),
        acquired_(params.units().size(), 0),
        bound_(params.units().size()),
        total_(params.units().size()) {
    for (size_t u = 0; u < total_.size(); ++u)
      total_[u].assign(static_cast<size_t>(params.units()[u].numel_padded), 0.0f);
  }
  void Acquire(int32_t unit, Pass pass) override {
    const auto u = static_cast<size_t>(unit);
    if (pass != Pass::kBackward || acquired_[u]++ > 0) return;
    bound_[u].assign(total_[u].size(), 0.0f);
    params_.BindUnitGrads(unit, bound_[u].data());
  }
  void Release(int32_t unit, Pass pass) override {
    if (pass == Pass::kBackward) ADD_FAILURE() << "Release(kBackward) in a split backward";
    (void)unit;
  }
  void Park(int32_t unit, int64_t mb_id) override {
    const auto u = static_cast<size_t>(unit);
    ASSERT_GT(acquired_[u], 0);
    if (--acquired_[u] > 0) return;
    params_.UnbindUnitGrads(unit);
    parked_[{unit, mb_id}] = std::move(bound_[u]);
    bound_[u].clear();
    events_.push_back("P" + std::to_string(unit) + "." + std::to_string(mb_id));
  }
  void FinishWeightGrads(int32_t unit, int64_t mb_id) override {
    auto it = parked_.find({unit, mb_id});
    ASSERT_NE(it, parked_.end()) << "unit " << unit << " mb " << mb_id;
    for (size_t i = 0; i < it->second.size(); ++i)
      total_[static_cast<size_t>(unit)][i] += it->second[i];
    parked_.erase(it);
    events_.push_back("F" + std::to_string(unit) + "." + std::to_string(mb_id));
  }
  ParamSet& params_;
  std::vector<int> acquired_;
  std::vector<std::vector<float>> bound_, total_;
  std::map<std::pair<int32_t, int64_t>, std::vector<float>> parked_;
  std::vector<std::string> events_;
};

// ZeRO-2/3 under zero-bubble: B parks each layer's grads per micro-batch and W finishes them in
// B's order; the finished grads (the deferred weight GEMMs included) equal the full backward's.
TEST(Stage, SplitBackwardParksGradsUntilWeightPass) {
  const spec::ModelSpec m = testing::TinyDense();
  const testing::Batch b = testing::RandomBatch(4, 6, m.vocab, 5);
  core::Allocator alloc;
  Model full(Config(m), alloc);
  Model split(Config(m), alloc, {.unit_pad = true, .sharded_grads = true});
  full.params().Init(3);
  split.params().Init(3);
  ForwardBackward(full.stage(), full.params(), b, 2);
  ParkingHooks hooks(split.params());
  split.stage().SetParamHooks(&hooks);
  int64_t valid = 0;
  for (int32_t t : b.targets) valid += t >= 0 ? 1 : 0;
  const int64_t T = 2 * b.seq;
  for (int64_t mb = 0; mb < 2; ++mb) {
    MicroBatch mbatch{.tokens = core::ConstTensor(core::Tensor(
                          const_cast<int32_t*>(b.tokens.data()) + mb * T, core::Dtype::kI32, {T})),
                      .targets = core::ConstTensor(core::Tensor(
                          const_cast<int32_t*>(b.targets.data()) + mb * T, core::Dtype::kI32, {T})),
                      .dims = {.batch = 2, .seq = b.seq},
                      .loss_scale = 1.0f / static_cast<float>(valid),
                      .aux_scale = 0.5f};
    split.stage().Forward(mb, mbatch, {}, {});
  }
  split.stage().BackwardInput(0, {}, {});
  split.stage().BackwardInput(1, {}, {});
  const size_t units = split.params().units().size();
  EXPECT_EQ(hooks.parked_.size(), 2 * units);  // every unit of both micro-batches, none finished
  split.stage().BackwardWeight(0);
  split.stage().BackwardWeight(1);
  ASSERT_TRUE(hooks.parked_.empty());
  ASSERT_EQ(hooks.events_.size(), 4 * units);
  for (size_t i = 0; i < units; ++i) {  // W finishes in the order B parked
    EXPECT_EQ(hooks.events_[2 * units + i].substr(1), hooks.events_[i].substr(1));
    EXPECT_EQ(hooks.events_[3 * units + i].substr(1), hooks.events_[units + i].substr(1));
  }
  for (size_t u = 0; u < units; ++u)
    split.params().BindUnitGrads(static_cast<int32_t>(u), hooks.total_[u].data());
  for (ParamId id = 0; id < split.params().size(); ++id) {
    const Tensor a = split.params().grad(id), g = full.params().grad(id);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.f32()[i], g.f32()[i], 1e-6 * (1 + std::fabs(g.f32()[i])))
          << split.params().info(id).name;
  }
}

TEST(ParamSet, InitIsLayoutIndependent) {
  core::Allocator alloc;
  ParamSet full(alloc, core::Dtype::kF32);
  full.Add("w", {6, 4}, {}, {}, true);
  full.Finalize();
  full.Init(5);
  for (int dim = 0; dim < 2; ++dim) {
    for (int64_t rank = 0; rank < 2; ++rank) {
      ParamSet shard(alloc, core::Dtype::kF32);
      shard.Add("w", {6, 4}, {.dim = dim, .axis = MeshAxis::kTp, .size = 2, .rank = rank}, {},
                true);
      shard.Finalize();
      shard.Init(5);
      Tensor s = shard.master(0);
      const int64_t rows = s.dim(0), cols = s.dim(1);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t gr = dim == 0 ? rank * rows + r : r, gc = dim == 1 ? rank * cols + c : c;
          EXPECT_EQ(s.f32()[r * cols + c], full.master(0).f32()[gr * 4 + gc]);
        }
    }
  }
  ParamSet bad(alloc, core::Dtype::kF32);
  EXPECT_DEATH(
      bad.Add("w", {5, 4}, {.dim = 0, .axis = MeshAxis::kTp, .size = 2, .rank = 0}, {}, true),
      "not divisible");
}

TEST(ParamSet, Bf16KeepsMasterAndRoundsWeights) {
  core::Allocator alloc;
  ParamSet p(alloc, core::Dtype::kBF16);
  p.Add("w", {3, 5}, {}, {}, true);
  p.Finalize();
  p.Init(2);
  EXPECT_EQ(alloc.live_bytes(core::MemTag::kWeights), 15 * 2);
  EXPECT_EQ(alloc.live_bytes(core::MemTag::kOptimizer), 15 * 4 * 3);
  for (int64_t i = 0; i < 15; ++i) {
    EXPECT_EQ(core::Bf16ToFloat(p.weight(0).bf16()[i]), core::RoundBf16(p.master(0).f32()[i]));
  }
}

// ZeRO-3 with ep: a unit's dense params slice over the dense group, its routed experts over the
// expert group (the example of model/param_set.h: 6 dense and 4 expert elements, groups of 4
// and 2). Every param element lies in exactly one rank's slice of its group, and each slice
// holds the same initial values as the unsharded ParamSet at those flat indices.
TEST(ParamSet, ShardedWeightsSliceDenseAndExpertParamsOverTheirGroups) {
  core::Allocator alloc;
  const auto add = [](ParamSet& p) {
    p.BeginUnit();
    p.Add("d", {6}, {}, {}, true);
    p.Add("e", {8}, {.dim = 0, .axis = MeshAxis::kEp, .size = 2, .rank = 1}, {}, true);
  };
  ParamSet full(alloc, core::Dtype::kF32);
  add(full);
  full.Finalize({.pad_multiple = 4, .unit_pad = true});
  full.Init(3);
  std::vector<int> owners(10, 0);
  for (int64_t dense_rank = 0; dense_rank < 4; ++dense_rank) {
    for (int64_t expert_rank = 0; expert_rank < 2; ++expert_rank) {
      ParamSet p(alloc, core::Dtype::kF32);
      add(p);
      p.Finalize({.pad_multiple = 4,
                  .optimizer_state = false,
                  .unit_pad = true,
                  .sharded_grads = true,
                  .sharded_weights = true,
                  .shard_rank = dense_rank,
                  .expert_pad_multiple = 2,
                  .expert_shard_rank = expert_rank});
      p.Init(3);
      const ShardPlan plan = PlanShards(p, true, {4, dense_rank}, {2, expert_rank});
      ASSERT_EQ(plan.groups.size(), 2u);
      EXPECT_EQ(plan.groups[0].padded, 8);  // dense: 6 elements padded to 4 ranks
      EXPECT_EQ(plan.groups[1].padded, 4);  // expert: 4 elements over 2 ranks
      EXPECT_EQ(plan.numel, 2 + 2);
      EXPECT_EQ(p.weight_slice().numel(), plan.numel);
      if (dense_rank == 1 && expert_rank == 0) {
        ASSERT_EQ(plan.pieces.size(), 2u);
        EXPECT_EQ(plan.pieces[0].flat_begin, 2);
        EXPECT_EQ(plan.pieces[1].flat_begin, 6);
        EXPECT_EQ(plan.pieces[1].local, 2);
      }
      for (const ShardPiece& piece : plan.pieces) {
        for (int64_t i = 0; i < piece.n; ++i) {
          const int64_t f = piece.flat_begin + i;
          // Count each dense element once (expert_rank 0) and each expert one once (dense_rank 0).
          if ((f < 6 && expert_rank == 0) || (f >= 6 && dense_rank == 0))
            ++owners[static_cast<size_t>(f)];
          EXPECT_EQ(p.weight_slice().f32()[piece.local + i], full.flat_master().f32()[f]) << f;
        }
      }
    }
  }
  for (int f = 0; f < 10; ++f) EXPECT_EQ(owners[static_cast<size_t>(f)], 1) << "flat element " << f;
}

}  // namespace
}  // namespace pentamesh::model

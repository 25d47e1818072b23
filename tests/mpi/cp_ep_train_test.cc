// Whole-model context- and expert-parallel training equivalence under mpirun. For the layout in
// $PM_TEST_LAYOUT (e.g. "cp=2 cp_kind=ulysses" or "dp=2 ep=2 tp=2") and the model in
// $PM_TEST_MODEL ("dense", "moe", "moe-noaux" or "moe-renorm"), every rank first trains the tiny
// fp32 model as a single process (the reference), then as its rank of the mesh, and checks
//  - the loss of each of 6 steps matches the reference to relative 1e-5 (MoE: aux and z-loss on,
//    dropless; the aux loss matches because every data rank's micro-batch holds the same
//    sequences as the single process's and its f_i, P_i are summed over the cp ranks sharing
//    them; "moe-global": over every data rank, against a one-micro-batch reference);
//  - the summed per-expert routed counts of every step equal the reference's (MoE);
//  - each MoE layer of this rank routes its own T/tp rows exactly when spec::RoutesRankRows says
//    so, all T rows otherwise (MoE; RoutedRowsPerRankFollowSpecRoutesRankRows);
//  - after the last step this rank's shard of every weight equals the same global elements of the
//    reference weights: relative 1e-5 per tensor, every element within 1e-4 of the tensor's max;
//  - after one step the cp, pp, tp and dp groups' wire bytes equal cost::CommBytesForStage of this
//    rank's pp stage exactly, and the ep group carries the count exchange plus the rows the router
//    actually sent off-rank;
//  - the measured peak activation bytes per rank are within 5% of the cost model's prediction
//    (PredictRun; with pp > 1 cost::MemoryForStage of this rank's stage), which falls as 1 / cp;
//    so are the weights, grads and optimizer state, and with zero >= 1 (ep: dense state sharded
//    over dp x cp, the experts' over expert-dp) the optimizer state is below the ZeRO-0 state by
//    the predicted factor.
// Pipeline layouts (pp > 1, e.g. "pp=2 cp=2 schedule=1f1b") combine the schedule with cp, ep, dp
// and tp: this rank holds only its stage's weights (compared by name), and every rank still sees
// the global loss and expert counts.
// The data is a synthetic token stream each rank writes identically (tests/data/fixtures.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/fixtures.h"
#include "mesh/mesh.h"
#include "model/moe.h"
#include "spec/layout.h"
#include "spec/moe_routing.h"
#include "testing/reference_run.h"
#include "tests/mpi/dist_trainer.h"
#include "tests/mpi/mpi_test_main.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace pentamesh::train {
namespace {

constexpr int kSteps = 6;

std::string Env(const char* name, const char* fallback) {
  const char* env = std::getenv(name);
  return env ? env : fallback;
}

// "dense", "moe" (aux, z-loss and aux-loss-free bias on; f_i and P_i summed over the cp ranks
// sharing the sequences), "moe-noaux" (the load-balancing loss off), "moe-noshared" (no shared
// expert), "moe-global" (model.moe.aux_loss_scope = "global": f_i and P_i over every data
// rank's micro-batch; the reference is then one process whose single micro-batch is the whole
// global batch, so the layout must give every data rank exactly one micro-batch) or "moe-renorm"
// ("moe" with Mixtral's router: top-k gates renormalised, model.moe.router = "topk_renorm").
std::string Model() { return Env("PM_TEST_MODEL", "dense"); }
bool Moe() { return Model().starts_with("moe"); }
bool Aux() { return Moe() && Model() != "moe-noaux"; }
bool Global() { return Model() == "moe-global"; }
bool Renorm() { return Model() == "moe-renorm"; }

// 2 layers; 4 under an interleaved schedule (pp=2 x V=2 chunks of one layer each).
int Layers() { return Env("PM_TEST_LAYOUT", "").find("interleaved") != std::string::npos ? 4 : 2; }

const std::string& DatasetDir() {
  static const std::string dir = data::testing::WriteSynthetic(64, 400, 4096).dir;
  return dir;
}

// `layout` without an mbs gets mbs=2.
RunConfig Config(const std::string& layout) {
  const std::string moe =
      Moe() ? fmt::format(R"(
[model.moe]
experts = 4
top_k = 2
expert_ffn_hidden = 32
shared_experts = {}
capacity_factor = 0
aux_loss_scope = "{}"
router = "{}"
)",
                          Model() == "moe-noshared" ? 0 : 1, Global() ? "global" : "sequence",
                          Renorm() ? "topk_renorm" : "softmax_topk")
            : "";
  return testing::TinyRunConfig(
      {.name = "cp-ep-tiny",
       .layers = Layers(),
       .model_keys = moe,
       .optim_keys = fmt::format("aux_loss_coef = {}\nz_loss_coef = 0.001\nbias_update_rate = {}",
                                 Aux() ? "0.01" : "0", Moe() ? "0.01" : "0"),
       .dataset = DatasetDir(),
       .layout = layout.find("mbs=") == std::string::npos ? "mbs=2 " + layout : layout},
      "cp_ep_test.toml");
}

using Reference = testing::ReferenceRun;

const Reference& SingleProcess() {
  static const Reference ref = testing::RunSingleProcess(Config(Global() ? "mbs=8" : ""), kSteps);
  return ref;
}

// Step 1's communication and memory against the cost model.
void CheckStepOne(const Trainer& t, const StepStats& s, const RunConfig& config,
                  const Reference& ref, int pp_rank) {
  const spec::Layout& l = config.run.layout;
  const cost::Context ctx(config.model, HostCluster(config), config.train, EngineCostParams());
  const cost::CommBytes predicted = cost::CommBytesForStage(ctx, l, pp_rank);
  const auto wire = [&](const char* group) {
    return s.comm_bytes.at(group).at("bytes_wire").get<double>();
  };
  EXPECT_EQ(wire("cp"), predicted.cp) << spec::ShortLayout(l);
  if (l.cp > 1) {
    EXPECT_GT(wire("cp"), 0.0);
  }
  EXPECT_EQ(wire("pp"), predicted.pp) << spec::ShortLayout(l) << " stage " << pp_rank;
  if (l.pp > 1) {
    EXPECT_GT(wire("pp"), 0.0);
  }
  EXPECT_EQ(wire("tp"), predicted.tp) << spec::ShortLayout(l) << " stage " << pp_rank;
  // Dense grads reduce over dp_cp, expert grads over expert_dp: the cost model's dp term.
  const double dp_wire = wire("dp_cp") + wire("dp") + wire("expert_dp");
  EXPECT_EQ(dp_wire, predicted.dp) << spec::ShortLayout(l) << " stage " << pp_rank;
  std::printf(
      "rank %d %s stage %d: wire bytes pp %.0f/%.0f cp %.0f/%.0f tp %.0f/%.0f dp %.0f/%.0f "
      "(measured/predicted)\n",
      t.rank(), spec::ShortLayout(l).c_str(), pp_rank, wire("pp"), predicted.pp, wire("cp"),
      predicted.cp, wire("tp"), predicted.tp, dp_wire, predicted.dp);
  if (l.ep > 1) {
    // The rows dispatched off-rank follow the router: the cost model's count assumes balanced
    // routing (exact equality is tested with a balanced router in ep_moe_test.cc), so the mean
    // over the ranks is compared (one rank's few T/tp rows under etp=1 route unevenly).
    auto total_ep = static_cast<int64_t>(wire("ep"));
    mpitest::TestWorld().world().all_reduce(&total_ep, 1, core::Dtype::kI64);
    const double mean_ep =
        static_cast<double>(total_ep) / static_cast<double>(mpitest::TestWorld().world().size());
    EXPECT_NEAR(mean_ep, predicted.ep, 0.1 * predicted.ep);
    std::printf(
        "rank %d %s: ep bytes measured %.0f (mean over ranks %.0f) predicted (balanced routing) "
        "%.0f\n",
        t.rank(), spec::ShortLayout(l).c_str(), wire("ep"), mean_ep, predicted.ep);
  } else {
    EXPECT_EQ(wire("ep"), 0.0);
  }
  // metrics.jsonl carries the same counters and the expert statistics.
  const auto line = nlohmann::json::parse(StepStatsToJson(s));
  EXPECT_EQ(line.at("comm_bytes").at("cp").at("bytes_wire").get<double>(), predicted.cp);
  if (Moe()) {
    EXPECT_TRUE(line.contains("tokens_per_expert")) << line.dump();
    EXPECT_TRUE(line.contains("expert_load_imbalance")) << line.dump();
  }
  // Peak activations per rank: within 5% of the prediction, and 1/cp of one process's.
  const double got =
      static_cast<double>(s.peak_bytes[static_cast<size_t>(core::MemTag::kActivations)]);
  const double want = t.predicted().memory.activations;
  // Dropless MoE: the rows each rank's experts stash follow the router (the model: balanced), so
  // one rank is within 10%, and the sum over all ranks (the balanced expectation) within 5%.
  EXPECT_NEAR(got, want, (Moe() ? 0.1 : 0.05) * want) << spec::ShortLayout(l);
  std::array<int64_t, 2> sums = {static_cast<int64_t>(got), std::llround(want)};
  mpitest::TestWorld().world().all_reduce(sums.data(), 2, core::Dtype::kI64);
  EXPECT_NEAR(static_cast<double>(sums[0]), static_cast<double>(sums[1]),
              0.05 * static_cast<double>(sums[1]))
      << spec::ShortLayout(l) << ": activations summed over the ranks";
  if (l.pp == 1 && l.tp == 1 && l.ep == 1 && l.cp_kind == spec::CpKind::kRing) {
    EXPECT_NEAR(got * static_cast<double>(l.cp), ref.activations_bytes,
                0.05 * ref.activations_bytes);
  }
  std::printf("rank %d %s: activations measured %.0f predicted %.0f (one process %.0f)\n", t.rank(),
              spec::ShortLayout(l).c_str(), got, want, ref.activations_bytes);
  // Weights, grads and optimizer state per rank: the cost model's split of dense and expert params
  // over tp and ep (routed experts replicated over tp in this engine) and the ZeRO shard.
  const cost::Memory& mem = t.predicted().memory;
  for (const auto& [tag, predicted_bytes] :
       {std::pair{core::MemTag::kWeights, mem.weights}, std::pair{core::MemTag::kGrads, mem.grads},
        std::pair{core::MemTag::kOptimizer, mem.optimizer}}) {
    const double measured = static_cast<double>(s.peak_bytes[static_cast<size_t>(tag)]);
    EXPECT_NEAR(measured, predicted_bytes, 0.05 * predicted_bytes)
        << core::MemTagName(tag) << " " << spec::ShortLayout(l);
    std::printf("rank %d %s: %s MiB measured %.4f predicted %.4f\n", t.rank(),
                spec::ShortLayout(l).c_str(), core::MemTagName(tag), measured / 1048576.0,
                predicted_bytes / 1048576.0);
  }
  if (l.zero >= 1) {
    // The sharded optimizer state (dense over dp x cp, experts over expert-dp) is below the
    // unsharded ZeRO-0 state by the cost model's factor.
    spec::Layout unsharded = l;
    unsharded.zero = 0;
    const double full = cost::MemoryForStage(ctx, unsharded, pp_rank).optimizer;
    const double measured =
        static_cast<double>(s.peak_bytes[static_cast<size_t>(core::MemTag::kOptimizer)]);
    EXPECT_LT(measured, full);
    EXPECT_NEAR(measured / full, mem.optimizer / full, 0.05 * mem.optimizer / full);
  }
}

TEST(CpEpTrain, MatchesSingleProcess) {
  const Reference& ref = SingleProcess();
  const RunConfig config = Config(Env("PM_TEST_LAYOUT", "cp=1"));
  const auto dist = mpitest::MakeDistTrainer(config);
  ASSERT_NE(dist, nullptr);
  Trainer& t = dist->trainer();
  mesh::Mesh& mesh = *dist->mesh();
  const spec::Layout& l = config.run.layout;
  if (Global()) {
    ASSERT_EQ(spec::MicroBatches(config.train, l), 1)
        << "moe-global needs one micro-batch per rank";
  }

  double worst_loss = 0;
  for (int i = 0; i < kSteps; ++i) {
    const StepStats s = t.Step();
    const size_t step = static_cast<size_t>(i);
    worst_loss = std::max(worst_loss, std::fabs(s.loss - ref.losses[step]) / ref.losses[0]);
    EXPECT_NEAR(s.loss, ref.losses[step], 1e-5 * ref.losses[0])
        << "step " << i + 1 << " layout " << spec::ShortLayout(l);
    EXPECT_EQ(s.moe.routed, ref.routed[step]) << "step " << i + 1;
    if (i == 0) CheckStepOne(t, s, config, ref, mesh.coords().dense.pp);
  }

  model::ParamSet& p = t.params();
  // The fp32 masters (ZeRO-3 keeps only a slice of the weights; every rank of the group calls).
  const std::vector<float> flat = t.optimizer().FullMaster();
  // pp > 1: this rank holds its stage's params only; each is found in the reference by name.
  if (l.pp == 1) {
    ASSERT_EQ(p.size(), static_cast<int32_t>(ref.names.size()));
  }
  double worst = 0, worst_norm = 0;
  std::string worst_at;
  for (model::ParamId id = 0; id < p.size(); ++id) {
    const model::ParamInfo& info = p.info(id);
    const auto at = std::find(ref.names.begin(), ref.names.end(), info.name);
    ASSERT_NE(at, ref.names.end()) << info.name;
    const std::vector<float>& want = ref.weights[static_cast<size_t>(at - ref.names.begin())];
    double scale = 0;
    for (float x : want) scale = std::max(scale, std::fabs(static_cast<double>(x)));
    const float* got = flat.data() + info.offset;
    double diff2 = 0, norm2 = 0;
    for (int64_t i = 0; i < info.numel(); ++i) {
      const double w = want[static_cast<size_t>(model::GlobalIndex(info, i))];
      diff2 += (got[i] - w) * (got[i] - w);
      norm2 += w * w;
      const double rel = std::fabs(got[i] - w) / scale;
      if (rel > worst) {
        worst = rel;
        worst_at = fmt::format("{}[{}] {} vs {}", info.name, i, got[i], w);
      }
    }
    const double rel_norm = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
    EXPECT_LE(rel_norm, 1e-5) << info.name << " " << spec::ShortLayout(l);
    worst_norm = std::max(worst_norm, rel_norm);
  }
  EXPECT_LE(worst, 1e-4) << worst_at;
  std::printf("layout %s: worst loss difference %.3g (relative)\n", spec::ShortLayout(l).c_str(),
              worst_loss);
  std::printf("layout %s (%s): weights within %.3g (relative, per tensor); worst element %.3g\n",
              spec::ShortLayout(l).c_str(), Moe() ? "moe" : "dense", worst_norm, worst);
}

// spec::RoutesRankRows against what the engine's MoE layers do: every MoE layer of this rank runs
// one forward of the rows this rank holds of a T-row micro-batch (T/tp under sp with tp > 1, else
// all T), and the rows it routes (its assignments / top_k) are T/tp when the predicate holds (each
// tp rank routes its own rows) and T otherwise (sp gathers all T rows first). The engine's column
// of the truth table (experts replicated over tp at etp = tp) is also written out here: whole
// experts under sp with tp > 1.
TEST(CpEpTrain, RoutedRowsPerRankFollowSpecRoutesRankRows) {
  if (!Moe()) GTEST_SKIP() << "dense model";
  const RunConfig config = Config(Env("PM_TEST_LAYOUT", "cp=1"));
  const spec::Layout& l = config.run.layout;
  // ZeRO-3 keeps only a slice of each weight outside the stage's gather hooks.
  if (l.zero >= 3) GTEST_SKIP() << "zero=3";
  const auto dist = mpitest::MakeDistTrainer(config);
  ASSERT_NE(dist, nullptr);
  Trainer& t = dist->trainer();
  const bool own_rows = spec::RoutesRankRows(l, EngineCostParams().moe_replicated_over_tp);
  EXPECT_EQ(own_rows, l.sp && l.tp > 1 && l.expert_tp() == 1) << spec::ShortLayout(l);
  const int64_t T = 8 * l.tp, H = config.model.hidden, k = config.model.moe.top_k;
  const int64_t held = l.sp && l.tp > 1 ? T / l.tp : T;
  core::Allocator alloc;
  const model::LayerContext ctx{.alloc = &alloc};
  const auto layers = t.MoeLayers();
  auto checked = static_cast<int64_t>(layers.size());  // MoE layers probed over the world
  mpitest::TestWorld().world().all_reduce(&checked, 1, core::Dtype::kI64);
  EXPECT_GT(checked, 0);
  for (const auto& [layer, moe] : layers) {
    core::Buffer x(alloc, core::MemTag::kOther, core::Dtype::kF32, {held, H});
    core::Buffer y(alloc, core::MemTag::kOther, core::Dtype::kF32, {held, H});
    for (int64_t i = 0; i < held * H; ++i)
      x.view().f32()[i] = static_cast<float>((i * 7 + layer) % 11) / 11.0f - 0.5f;
    model::Moe::Saved saved;
    model::MoeStats stats;
    moe->Forward(y.view(), saved, x.view(), ctx, &stats);
    int64_t assignments = 0;
    for (const int64_t n : stats.routed) assignments += n;
    EXPECT_EQ(assignments, (own_rows ? T / l.tp : T) * k)
        << "layer " << layer << " rank " << t.rank() << " " << spec::ShortLayout(l);
    std::printf("rank %d %s layer %lld: routed %lld of T=%lld rows (RoutesRankRows %d)\n", t.rank(),
                spec::ShortLayout(l).c_str(), static_cast<long long>(layer),
                static_cast<long long>(assignments / k), static_cast<long long>(T), own_rows);
  }
}

}  // namespace
}  // namespace pentamesh::train

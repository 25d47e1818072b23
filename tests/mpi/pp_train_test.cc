// The whole Trainer with pipeline parallelism under mpirun: for the layout in $PM_TEST_LAYOUT
// (e.g. "dp=2 pp=2 tp=2 schedule=zb zero=1 sp=off"), every rank first trains the tiny fp32 model
// (6 layers, so pp=2 x V=2 and pp=4 split unevenly 1+2+2+1) as a single process, then as its rank
// of the mesh, and checks
//  - the loss of each of 6 steps and the held-out loss of Evaluate() match the single process to
//    relative 1e-5, and every final weight this rank holds (found by name; its tp shard by global
//    index) matches to relative 1e-5 per tensor; every parameter lives on exactly one pp stage;
//  - after one step the wire bytes of the pp, tp and dp groups equal cost::CommBytesForStage of
//    this rank's pp stage exactly;
//  - every stage's peak of stashed activations (and weights, grads, optimizer state; at ZeRO-2/3
//    the grads are the 1/dp sharded accumulator of the stage's layers) is within 5%
//    of cost::MemoryForStage, which is what Trainer::predicted() holds (GPipe: all m
//    micro-batches; 1F1B: min(m, p - r); ZB-H1: that plus the W stash; interleaved: Megatron's
//    warm-up weighted by each chunk's layers);
//  - the gathered Chrome trace (Trainer::GatherTrace) is JSON with every pipeline action of every
//    rank and the collectives of every rank that has a non-trivial group.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/fixtures.h"
#include "mesh/mesh.h"
#include "model/regions.h"
#include "spec/layout.h"
#include "spec/validate.h"
#include "testing/reference_run.h"
#include "testing/trace_counts.h"
#include "tests/mpi/dist_trainer.h"
#include "tests/mpi/mpi_test_main.h"
#include "train/trainer.h"

namespace pentamesh::train {
namespace {

constexpr int kSteps = 6;

std::string LayoutText() { return testing::EnvOr("PM_TEST_LAYOUT", "pp=1"); }

// data::testing::WriteSynthetic's train stream plus a held-out shard (for Evaluate).
std::string WriteDataset() {
  constexpr uint32_t kVocab = 64;
  const std::string dir = data::testing::WriteSynthetic(kVocab, 400, 1 << 20).dir;
  std::ifstream in(dir + "/" + data::kManifestFile);
  std::stringstream text;
  text << in.rdbuf();
  auto m = data::ManifestFromJson(text.str(), dir);
  EXPECT_TRUE(m.ok()) << m.status().message();
  std::vector<uint32_t> held;
  std::vector<uint64_t> ends;
  for (int d = 0; d < 40; ++d) {
    for (int t = 0; t < d + 3; ++t) held.push_back(3 + (d * 5 + 2 * t) % (kVocab - 3));
    held.push_back(2);
    ends.push_back(held.size());
  }
  const data::ShardEntry e{"heldout-00000.bin", held.size(), ends.size()};
  EXPECT_TRUE(data::WriteShard(dir + "/" + e.file, m->dtype, kVocab, 2, held, ends).ok());
  m->heldout.tokens = held.size();
  m->heldout.documents = ends.size();
  m->heldout.shards.push_back(e);
  EXPECT_TRUE(data::WriteManifest(dir, *m).ok());
  return dir;
}

const std::string& DatasetDir() {
  static const std::string dir = WriteDataset();
  return dir;
}

RunConfig Config(const std::string& layout) {
  return testing::TinyRunConfig({.name = "pp-tiny",
                                 .layers = 6,
                                 .model_keys = "tied_embeddings = false",
                                 .dataset = DatasetDir(),
                                 .layout = "mbs=1 " + layout,
                                 .run_keys = "eval_batches = 2"},
                                "pp_test.toml");
}

using Reference = testing::ReferenceRun;

const Reference& SingleProcess() {
  static const Reference ref = testing::RunSingleProcess(Config(""), kSteps, /*evaluate=*/true);
  return ref;
}

cost::Context CostContext(const RunConfig& config) {
  return cost::Context(config.model, HostCluster(config), config.train, EngineCostParams());
}

void CheckFirstStep(const Trainer& t, const StepStats& s, const mesh::Mesh& mesh,
                    const RunConfig& config) {
  const spec::Layout& l = config.run.layout;
  const int64_t stage = mesh.pp().rank();
  const cost::Context ctx = CostContext(config);
  ASSERT_EQ(cost::CheckLayout(ctx, l), cost::Rule::kOk)
      << cost::RuleName(cost::CheckLayout(ctx, l));
  const cost::CommBytes predicted = cost::CommBytesForStage(ctx, l, stage);
  const auto wire = [&](const char* group) {
    return s.comm_bytes.at(group).at("bytes_wire").get<double>();
  };
  const std::string where = fmt::format("{} pp stage {}", spec::ShortLayout(l), stage);
  EXPECT_GT(wire("pp"), 0.0) << where;
  EXPECT_EQ(wire("pp"), predicted.pp) << where;
  EXPECT_EQ(wire("tp"), predicted.tp) << where;
  EXPECT_EQ(wire("dp_cp") + wire("dp"), predicted.dp) << where;
  std::printf("rank %d %s: pp bytes %.0f (cost %.0f), tp %.0f (%.0f), dp %.0f (%.0f)\n", t.rank(),
              where.c_str(), wire("pp"), predicted.pp, wire("tp"), predicted.tp,
              wire("dp_cp") + wire("dp"), predicted.dp);
  // Every stage's peak of stashed activations (stage 0: the most micro-batches in flight; the
  // last: the head's stash, and under ZB-H1 the W stashes of the micro-batches waiting for W).
  // The Trainer's prediction is its own stage's memory.
  const cost::Memory& m = t.predicted().memory;
  EXPECT_EQ(m.activations, cost::MemoryForStage(ctx, l, stage).activations) << where;
  const auto near = [&](core::MemTag tag, double want) {
    const double got = static_cast<double>(s.peak_bytes[static_cast<size_t>(tag)]);
    std::printf("rank %d %s: peak %s %.0f B, cost %.0f B (%.3f)\n", t.rank(), where.c_str(),
                core::MemTagName(tag), got, want, got / want);
    EXPECT_NEAR(got / want, 1.0, 0.05) << core::MemTagName(tag) << " " << where;
  };
  near(core::MemTag::kActivations, m.activations);
  near(core::MemTag::kWeights, m.weights);
  near(core::MemTag::kOptimizer, m.optimizer);
  // ZeRO-2/3: the sharded fp32 accumulator (1/dp of this stage's padded layers); each layer's
  // transient full grads are kComm.
  near(core::MemTag::kGrads, m.grads);
}

void CheckTrace(const std::string& text, const RunConfig& config, const mesh::Mesh& mesh) {
  const int world_size = mesh.grid().world_size();
  const nlohmann::json trace = nlohmann::json::parse(text);  // throws (fails) if not JSON
  const spec::Layout& l = config.run.layout;
  testing::TraceCounts counts;
  ASSERT_NO_FATAL_FAILURE(testing::CountTraceEvents(trace, world_size, &counts));
  auto spec = schedule::FromLayout(l, spec::MicroBatches(config.train, l));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  for (int r = 0; r < world_size; ++r) {
    auto program = schedule::Make(spec->kind, spec->pp, mesh.grid().coords(r).dense.pp,
                                  spec->microbatches, spec->virtual_stages);
    ASSERT_TRUE(program.ok());
    EXPECT_EQ(counts.actions[static_cast<size_t>(r)], static_cast<int>(program->size()))
        << "rank " << r;
    // Every rank sums its scalars over the world at least (valid tokens, loss, grad norm).
    EXPECT_GT(counts.collectives[static_cast<size_t>(r)], 0) << "rank " << r;
  }
}

TEST(PipelineTrain, MatchesSingleProcess) {
  const Reference& ref = SingleProcess();
  const RunConfig config = Config(LayoutText());
  const auto dist = mpitest::MakeDistTrainer(config);
  ASSERT_NE(dist, nullptr);
  Trainer& t = dist->trainer();
  mesh::Mesh& mesh = *dist->mesh();
  const spec::Layout& l = config.run.layout;
  double worst_loss = 0;
  for (int i = 0; i < kSteps; ++i) {
    if (i == kSteps - 1) t.set_tracing(true);
    const StepStats s = t.Step();
    EXPECT_NEAR(s.loss, ref.losses[static_cast<size_t>(i)], 1e-5 * ref.losses[0])
        << "step " << i + 1 << " layout " << spec::ShortLayout(l);
    worst_loss = std::max(worst_loss, std::fabs(s.loss - ref.losses[static_cast<size_t>(i)]) /
                                          ref.losses[static_cast<size_t>(i)]);
    if (i == 0) CheckFirstStep(t, s, mesh, config);
  }
  const std::string trace = t.GatherTrace();
  if (t.rank() == 0) CheckTrace(trace, config, mesh);
  EXPECT_NEAR(t.Evaluate(), ref.eval_loss, 1e-5 * ref.eval_loss) << spec::ShortLayout(l);

  model::ParamSet& p = t.params();
  // The fp32 masters (ZeRO-3 keeps only a slice of the weights; every dp x cp rank calls it).
  const std::vector<float> flat = t.optimizer().FullMaster();
  double worst = 0;
  for (model::ParamId id = 0; id < p.size(); ++id) {
    const model::ParamInfo& info = p.info(id);
    const std::vector<float>* want = ref.Find(info.name);
    ASSERT_NE(want, nullptr) << info.name;
    const float* got = flat.data() + info.offset;
    double diff2 = 0, norm2 = 0;
    for (int64_t i = 0; i < info.numel(); ++i) {
      const double w = (*want)[static_cast<size_t>(model::GlobalIndex(info, i))];
      diff2 += (got[i] - w) * (got[i] - w);
      norm2 += w * w;
    }
    const double rel = std::sqrt(diff2 / std::max(norm2, 1e-30));
    EXPECT_LE(rel, 1e-5) << info.name << " " << spec::ShortLayout(l);
    worst = std::max(worst, rel);
  }
  // Every parameter lives on exactly one pp stage (counted once per tp x dp rank).
  int64_t held = p.size();
  mesh.pp().all_reduce(&held, 1, core::Dtype::kI64);
  EXPECT_EQ(held, static_cast<int64_t>(ref.weights.size()));
  std::printf(
      "layout %s: %d steps, losses within %.3g, final weights within %.3g (relative, per "
      "tensor)\n",
      spec::ShortLayout(l).c_str(), kSteps, worst_loss, worst);
}

}  // namespace
}  // namespace pentamesh::train

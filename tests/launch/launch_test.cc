// launch/: emit -> import-config round trips over each engine's searchable space, the capability
// table's refusals, and import-config on published example configs and on bad files.
#include "launch/launch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "plan/space.h"
#include "spec/load_toml.h"
#include "spec/validate.h"

namespace pentamesh::launch {
namespace {

namespace fs = std::filesystem;

struct Case {
  const char* model;
  const char* train;
  int64_t gpus;
  // The MoE router and aux-loss scope, when the case sets them over the preset's.
  std::optional<spec::MoeRouter> router = std::nullopt;
  std::optional<spec::AuxLossScope> aux_loss_scope = std::nullopt;
};

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("pentamesh_launch_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const char* MainFile(Engine e) {
  switch (e) {
    case Engine::kMegatron:
      return "train.sh";
    case Engine::kTorchtitan:
      return "job.toml";
    case Engine::kDeepSpeed:
      return "launch.sh";
  }
  return "";
}

void ExpectSameModel(const spec::ModelSpec& a, const spec::ModelSpec& b, const std::string& where) {
  EXPECT_EQ(a.layers, b.layers) << where;
  EXPECT_EQ(a.hidden, b.hidden) << where;
  EXPECT_EQ(a.heads, b.heads) << where;
  EXPECT_EQ(a.kv_heads, b.kv_heads) << where;
  EXPECT_EQ(a.head_dim, b.head_dim) << where;
  EXPECT_EQ(a.ffn_hidden, b.ffn_hidden) << where;
  EXPECT_EQ(a.vocab, b.vocab) << where;
  EXPECT_EQ(a.max_seq_len, b.max_seq_len) << where;
  EXPECT_EQ(a.activation, b.activation) << where;
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings) << where;
  EXPECT_DOUBLE_EQ(a.norm_eps, b.norm_eps) << where;
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta) << where;
  EXPECT_EQ(a.moe.experts, b.moe.experts) << where;
  EXPECT_EQ(a.moe.top_k, b.moe.top_k) << where;
  EXPECT_EQ(a.moe.expert_ffn_hidden, b.moe.expert_ffn_hidden) << where;
  EXPECT_EQ(a.moe.moe_layer_freq, b.moe.moe_layer_freq) << where;
  EXPECT_EQ(a.moe.first_dense_layers, b.moe.first_dense_layers) << where;
  EXPECT_EQ(a.moe.shared_experts, b.moe.shared_experts) << where;
  if (a.is_moe()) {
    EXPECT_DOUBLE_EQ(a.moe.capacity_factor, b.moe.capacity_factor) << where;
  }
  if (a.is_moe() && where.rfind("megatron ", 0) == 0) {  // Megatron-LM's flags carry both
    EXPECT_EQ(a.moe.router, b.moe.router) << where;
    EXPECT_EQ(a.moe.aux_loss_scope, b.moe.aux_loss_scope) << where;
  }
  EXPECT_EQ(a.mla.q_lora_rank, b.mla.q_lora_rank) << where;
  EXPECT_EQ(a.mla.kv_lora_rank, b.mla.kv_lora_rank) << where;
  EXPECT_EQ(a.mla.qk_nope_head_dim, b.mla.qk_nope_head_dim) << where;
  EXPECT_EQ(a.mla.qk_rope_head_dim, b.mla.qk_rope_head_dim) << where;
  EXPECT_EQ(a.mla.v_head_dim, b.mla.v_head_dim) << where;
  EXPECT_EQ(a.sliding_window, b.sliding_window) << where;
  EXPECT_EQ(a.global_every, b.global_every) << where;
}

// Emits `n` layouts spread over the engine's searchable space (every layout the planner would
// consider under --engine) and imports each back.
void RoundTrip(Engine engine, const std::vector<Case>& cases, int n) {
  std::vector<std::tuple<spec::ModelSpec, spec::ClusterSpec, spec::TrainSpec, spec::Layout>> all;
  for (const Case& c : cases) {
    auto model = spec::LoadModel(c.model);
    auto cluster = spec::LoadCluster("h100-sxm", c.gpus);
    auto train = spec::LoadTrain(c.train);
    ASSERT_TRUE(model.ok() && cluster.ok() && train.ok());
    if (c.router) model->moe.router = *c.router;
    if (c.aux_loss_scope) model->moe.aux_loss_scope = *c.aux_loss_scope;
    plan::SpaceOptions options;
    RestrictToEngine(engine, *model, options.allow);
    const plan::Space space(*model, *cluster, *train, options);
    std::vector<spec::Layout> layouts;
    space.ForEach([&](const spec::Layout& l) { layouts.push_back(l); });
    ASSERT_GT(layouts.size(), 0u) << c.model;
    const size_t take = static_cast<size_t>(n) / cases.size();
    for (size_t i = 0; i < take; ++i) {
      // A fixed stride through the enumeration: meshes, ZeRO stages, schedules, mbs, recompute.
      const spec::Layout& l = layouts[(i * 7919 + 13) % layouts.size()];
      all.emplace_back(*model, *cluster, *train, l);
    }
  }
  ASSERT_GE(all.size(), static_cast<size_t>(n) - cases.size());
  int checked = 0;
  for (const auto& [model, cluster, train, layout] : all) {
    const std::string where =
        std::string(ToString(engine)) + " " + model.name + ": " + spec::FormatLayout(layout);
    EXPECT_TRUE(Violations(engine, model, layout).empty()) << where;
    EmitInput in{.model = model,
                 .cluster = cluster,
                 .train = train,
                 .layout = layout,
                 .estimate = {},
                 .command = "pentamesh test"};
    auto files = Emit(engine, in);
    ASSERT_TRUE(files.ok()) << where << ": " << files.status().message();
    const fs::path dir = TempDir(std::string(ToString(engine)) + std::to_string(checked));
    ASSERT_TRUE(WriteFiles(dir.string(), *files).ok());
    // Nothing but the emitted files: torchtitan's custom flavors carry the preset's name.
    const ImportOptions options;
    auto im = ImportConfig((dir / MainFile(engine)).string(), options);
    ASSERT_TRUE(im.ok()) << where << ": " << im.status().message();
    EXPECT_EQ(spec::FormatLayout(im->layout), spec::FormatLayout(CanonicalForEngines(layout)))
        << where;
    ASSERT_TRUE(im->gpus.has_value()) << where;
    EXPECT_EQ(*im->gpus, cluster.gpus()) << where;
    ExpectSameModel(model, im->model, where);
    EXPECT_EQ(im->train.seq_len, train.seq_len) << where;
    EXPECT_EQ(im->train.global_batch_tokens, train.global_batch_tokens) << where;
    EXPECT_EQ(im->train.precision, train.precision) << where;
    // The imported layout is a valid layout of the same run.
    EXPECT_TRUE(spec::Validate(im->model, cluster, im->train, im->layout).empty()) << where;
    fs::remove_all(dir);
    ++checked;
  }
  EXPECT_GE(checked, n - static_cast<int>(cases.size()));
}

TEST(LaunchRoundTrip, Megatron50Layouts) {
  RoundTrip(Engine::kMegatron,
            {{"llama3-70b", "pretrain-4k", 512}, {"meridianfin-72b", "meridian-128k", 256}}, 50);
}

// The router (--moe-router-pre-softmax for softmax_topk, Megatron-Core's default top-k-then-softmax
// for topk_renorm: Mixtral's preset) and the aux-loss scope (--moe-router-load-balancing-type
// aux_loss | global_aux_loss) survive emit -> import-config.
TEST(LaunchRoundTrip, MegatronRouterAndAuxLossScope) {
  RoundTrip(Engine::kMegatron,
            {{"mixtral-8x7b", "pretrain-4k", 64},
             {"meridianfin-72b", "meridian-128k", 256, spec::MoeRouter::kTopKRenorm,
              spec::AuxLossScope::kGlobal},
             {"meridianfin-72b", "meridian-128k", 256, spec::MoeRouter::kSoftmaxTopK,
              spec::AuxLossScope::kGlobal}},
            6);
}

// MLA (--multi-latent-attention and its ranks and head dims) and sliding windows (--window-size
// w-1,0, --window-attn-skip-freq) survive Megatron-LM's emit -> import-config.
TEST(LaunchRoundTrip, MegatronAttentionVariants) {
  RoundTrip(Engine::kMegatron,
            {{"deepseek-v3-like", "pretrain-4k-16m", 1024}, {"mistral-7b", "pretrain-4k", 64}}, 6);
}

// torchtitan's llama3 model and Megatron-DeepSpeed have neither MLA nor sliding windows.
TEST(LaunchCapability, RefusesAttentionVariants) {
  struct Refusal {
    Engine engine;
    const char* model;
    const char* rule;
  };
  for (const Refusal& r : {Refusal{Engine::kTorchtitan, "deepseek-v3-like", "tt-no-mla"},
                           Refusal{Engine::kDeepSpeed, "deepseek-v3-like", "ds-no-mla"},
                           Refusal{Engine::kTorchtitan, "mistral-7b", "tt-no-window"},
                           Refusal{Engine::kDeepSpeed, "mistral-7b", "ds-no-window"}}) {
    auto model = spec::LoadModel(r.model);
    ASSERT_TRUE(model.ok());
    const spec::Layout l{.dp = 8, .zero = 2};
    std::set<std::string> ids;
    for (const CapabilityRule* rule : Violations(r.engine, *model, l)) ids.insert(rule->id);
    EXPECT_TRUE(ids.count(r.rule)) << r.model << " " << ToString(r.engine);
    EXPECT_TRUE(Violations(Engine::kMegatron, *model, l).empty()) << r.model;
  }
}

TEST(LaunchRoundTrip, Torchtitan50Layouts) {
  RoundTrip(Engine::kTorchtitan,
            {{"llama3-70b", "pretrain-4k", 512}, {"mixtral-8x7b", "pretrain-4k", 256}}, 50);
}

TEST(LaunchRoundTrip, DeepSpeed50Layouts) {
  RoundTrip(Engine::kDeepSpeed,
            {{"llama3-70b", "pretrain-4k", 512}, {"mixtral-8x7b", "pretrain-4k", 256}}, 50);
}

TEST(LaunchCapability, RulesHaveUniqueIdsAndParse) {
  std::set<std::string> ids;
  for (const CapabilityRule& r : CapabilityTable()) {
    EXPECT_TRUE(ids.insert(r.id).second) << r.id;
    EXPECT_TRUE(plan::Constraints::Parse(r.when).ok()) << r.id;
    EXPECT_TRUE(plan::Constraints::Parse(r.require).ok()) << r.id;
    EXPECT_TRUE(r.check != nullptr || *r.require != '\0') << r.id << " says nothing";
  }
}

TEST(LaunchCapability, RefusesNamingTheRule) {
  auto model = spec::LoadModel("llama3-405b");
  auto cluster = spec::LoadCluster("h100-sxm", 16384);
  auto train = spec::LoadTrain("llama3-405b-8k");
  ASSERT_TRUE(model.ok() && cluster.ok() && train.ok());
  struct Refusal {
    Engine engine;
    const char* layout;
    const char* rule;
  };
  for (const Refusal& r :
       {Refusal{Engine::kDeepSpeed, "dp=128 tp=8 pp=16 zero=2 recompute=full", "ds-pp-zero01"},
        Refusal{Engine::kDeepSpeed, "dp=128 tp=8 pp=16 zero=1 schedule=interleaved:2",
                "ds-pp-1f1b"},
        Refusal{Engine::kTorchtitan, "dp=128 tp=8 pp=16 zero=1", "tt-no-zero1"},
        Refusal{Engine::kTorchtitan, "dp=128 tp=8 pp=16 zero=3 sp=off", "tt-tp-is-sp"},
        Refusal{Engine::kMegatron, "dp=128 tp=8 pp=16 zero=1 schedule=gpipe", "mg-no-gpipe"},
        Refusal{Engine::kMegatron, "dp=128 tp=8 pp=16 zero=1 schedule=zb", "mg-no-zero-bubble"}}) {
    auto layout = spec::ParseLayout(r.layout);
    ASSERT_TRUE(layout.ok()) << r.layout;
    auto files = Emit(r.engine, EmitInput{.model = *model,
                                          .cluster = *cluster,
                                          .train = *train,
                                          .layout = *layout,
                                          .estimate = {},
                                          .command = ""});
    ASSERT_FALSE(files.ok()) << r.layout;
    EXPECT_NE(files.status().message().find(std::string("rule ") + r.rule), std::string::npos)
        << files.status().message();
  }
}

TEST(LaunchCapability, EngineSpaceExcludesWhatTheEngineCannotRun) {
  auto model = spec::LoadModel("llama3-70b");
  auto cluster = spec::LoadCluster("h100-sxm", 512);
  auto train = spec::LoadTrain("pretrain-4k");
  ASSERT_TRUE(model.ok() && cluster.ok() && train.ok());
  const plan::Space full(*model, *cluster, *train, plan::SpaceOptions{});
  for (Engine e : kEngines) {
    plan::SpaceOptions options;
    RestrictToEngine(e, *model, options.allow);
    const plan::Space restricted(*model, *cluster, *train, options);
    int64_t kept = 0, runnable = 0;
    restricted.ForEach([&](const spec::Layout& l) {
      ++kept;
      EXPECT_TRUE(Violations(e, *model, l).empty()) << spec::FormatLayout(l);
    });
    full.ForEach([&](const spec::Layout& l) { runnable += Violations(e, *model, l).empty(); });
    EXPECT_EQ(kept, runnable) << ToString(e);  // the filter loses no runnable layout
    EXPECT_LT(kept, full.CountLayouts()) << ToString(e);
  }
}

// Published examples, kept as data in the developers' shared/launch_examples beside the checkout
// (see its README for the sources); a user's clone does not have it, and these tests skip saying
// so. $PENTAMESH_SHARED names another place for the folder.
fs::path Examples() {
  if (const char* env = std::getenv("PENTAMESH_SHARED")) return fs::path(env) / "launch_examples";
  return fs::path(PM_SOURCE_DIR) / ".." / "shared" / "launch_examples";
}

TEST(LaunchImport, MegatronMixtralExample) {
  const fs::path file = Examples() / "megatron_train_mixtral_8x7b_distributed.sh";
  if (!fs::exists(file)) {
    GTEST_SKIP() << file
                 << " is absent: the published example is kept under shared/launch_examples "
                 << "(fetched data stays out of the repo), which this checkout does not have";
  }
  ImportOptions o;
  o.gpus = 64;
  auto im = ImportConfig(file.string(), o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->engine, Engine::kMegatron);
  EXPECT_EQ(im->model.layers, 32);
  EXPECT_EQ(im->model.hidden, 4096);
  EXPECT_EQ(im->model.kv_heads, 8);
  EXPECT_EQ(im->model.ffn_hidden, 14336);
  EXPECT_EQ(im->model.vocab, 32000);  // Llama2Tokenizer
  EXPECT_EQ(im->model.moe.experts, 8);
  EXPECT_EQ(im->model.moe.top_k, 2);
  EXPECT_DOUBLE_EQ(im->model.rope_theta, 1e6);
  EXPECT_EQ(im->train.seq_len, 4096);
  EXPECT_EQ(im->train.global_batch_tokens, 256 * 4096);
  EXPECT_EQ(spec::FormatLayout(im->layout),
            "dp=16 tp=1 pp=4 cp=1 ep=8 zero=1 mbs=1 recompute=none schedule=1f1b cp_kind=ring "
            "ep_placement=folded sp=on");
  auto cluster = spec::LoadCluster("h100-sxm", 64);
  ASSERT_TRUE(cluster.ok());
  EXPECT_TRUE(spec::Validate(im->model, *cluster, im->train, im->layout).empty());
  // The script takes its node count from $SLURM_NNODES at run time: without --gpus the world
  // size is not guessed.
  auto no_gpus = ImportConfig(file.string(), ImportOptions{});
  ASSERT_FALSE(no_gpus.ok());
  EXPECT_NE(no_gpus.status().message().find("pass --gpus"), std::string::npos);
}

TEST(LaunchImport, TorchtitanLlama3Example) {
  const fs::path file = Examples() / "torchtitan_llama3_8b.toml";
  if (!fs::exists(file)) {
    GTEST_SKIP() << file
                 << " is absent: the published example is kept under shared/launch_examples "
                 << "(fetched data stays out of the repo), which this checkout does not have";
  }
  ImportOptions o;
  o.gpus = 64;  // the file's own note: a preset for 64 A100 GPUs
  auto im = ImportConfig(file.string(), o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->engine, Engine::kTorchtitan);
  EXPECT_EQ(im->model.name, "llama3-8b");
  EXPECT_EQ(im->train.seq_len, 8192);
  EXPECT_EQ(im->train.global_batch_tokens, 64 * 8192);
  EXPECT_EQ(spec::FormatLayout(im->layout),
            "dp=64 tp=1 pp=1 cp=1 ep=1 zero=3 mbs=1 recompute=selective schedule=1f1b "
            "cp_kind=ring ep_placement=separate sp=on");
  // data_parallel_shard_degree = -1 needs the world size.
  auto no_gpus = ImportConfig(file.string(), ImportOptions{});
  ASSERT_FALSE(no_gpus.ok());
  EXPECT_NE(no_gpus.status().message().find("data_parallel_shard_degree"), std::string::npos);
}

TEST(LaunchImport, BadFilesNameTheLineOrKey) {
  struct Bad {
    const char* name;
    const char* text;
    const char* expect;
  };
  for (const Bad& b : {
           Bad{"job.toml", "[training]\nseq_len = \"long\"\n", "line 2: training.seq_len"},
           Bad{"job.toml", "[model]\nflavor = \"8B\"\n[parallelism]\ntensor_parallel_degree = 0\n",
               "line 4: parallelism.tensor_parallel_degree"},
           Bad{"job.toml", "[training\n", "line 1"},
           Bad{"train.sh",
               "python pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads "
               "32\\\n --vocab-size 32000 --seq-length 4096 --micro-batch-size 1 \\\n "
               "--tensor-model-parallel-size two\n",
               "line 3: --tensor-model-parallel-size 'two' is not an integer"},
           Bad{"train.sh", "python pretrain_gpt.py --num-layers 32 --hidden-size \"4096\n",
               "line 1: unterminated \" quote"},
           Bad{"ds_config.json", "{\"train_batch_size\": \"auto\"}", "train_batch_size"},
           Bad{"ds_config.json", "{\"zero_optimization\": {\"stage\": 7}}",
               "zero_optimization.stage"},
       }) {
    ImportOptions o;
    o.gpus = 8;
    o.model = "llama3-8b";
    o.seq_len = 4096;
    auto im = ImportText(b.name, b.text, ".", o);
    ASSERT_FALSE(im.ok()) << b.text;
    EXPECT_NE(im.status().message().find(b.expect), std::string::npos)
        << "expected '" << b.expect << "' in: " << im.status().message();
  }
  // A Megatron router pentamesh does not model, with the model read from the flags.
  ImportOptions o;
  o.gpus = 8;
  const std::string moe =
      "python pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 \\\n"
      " --ffn-hidden-size 512 --vocab-size 1000 --max-position-embeddings 1024 --seq-length 1024 "
      "\\\n --micro-batch-size 1 --global-batch-size 8 --num-experts 8 --moe-router-topk 2 \\\n"
      " --moe-router-load-balancing-type sinkhorn\n";
  auto im = ImportText("train.sh", moe, ".", o);
  ASSERT_FALSE(im.ok());
  EXPECT_NE(im.status().message().find("line 4: --moe-router-load-balancing-type 'sinkhorn' is "
                                       "not modelled"),
            std::string::npos)
      << im.status().message();
  const size_t at = moe.find("sinkhorn");
  auto global = ImportText("train.sh", moe.substr(0, at) + "global_aux_loss\n", ".", o);
  ASSERT_TRUE(global.ok()) << global.status().message();
  EXPECT_EQ(global->model.moe.aux_loss_scope, spec::AuxLossScope::kGlobal);
  EXPECT_EQ(global->model.moe.router, spec::MoeRouter::kTopKRenorm);  // no --moe-router-pre-softmax
}

}  // namespace
}  // namespace pentamesh::launch

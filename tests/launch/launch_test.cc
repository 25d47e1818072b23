// launch/: emit -> import-config round trips over each engine's searchable space, the capability
// table's refusals, and import-config on published example configs and on bad files.
#include "launch/launch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "launch/internal.h"
#include "plan/space.h"
#include "schedule/table.h"
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

// A directory of this test's own: ctest runs the tests in parallel processes, and the round-trip
// helper's names ("megatron0", ...) recur in several tests.
fs::path TempDir(const std::string& name) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const fs::path dir = fs::path(::testing::TempDir()) / ("pentamesh_launch_" + test + "_" + name);
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

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The flags of an engine's parser (src/launch/data: extracted from the engine's own parser at
// the commit its header names): flag -> "switch" | "value" and nargs.
struct ParserFlag {
  std::string kind, nargs;
};
std::map<std::string, ParserFlag> ParserFlags(Engine e) {
  const fs::path data = fs::path(PM_SOURCE_DIR) / "src" / "launch" / "data";
  const fs::path file = e == Engine::kMegatron ? data / "megatron_flags_core_v0.16.1.tsv"
                                               : data / "megatron_deepspeed_flags_f4157be.tsv";
  std::map<std::string, ParserFlag> flags;
  std::istringstream in(Slurp(file));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::istringstream row(line);
    std::string col;
    while (std::getline(row, col, '\t')) cols.push_back(col);
    if (cols.size() >= 4) flags[cols[0]] = {cols[1], cols[3]};
  }
  return flags;
}

// Every flag the emitted script passes to pretrain_gpt.py is one the engine's parser knows, with
// its arity (a switch takes no value, a value flag one, nargs '+' at least one). Returns the
// flags, for the caller's own checks.
std::map<std::string, internal::FlagValue> ExpectParserAccepts(Engine e, const std::string& text,
                                                               const std::string& where) {
  static const std::map<std::string, ParserFlag> megatron = ParserFlags(Engine::kMegatron);
  static const std::map<std::string, ParserFlag> deepspeed = ParserFlags(Engine::kDeepSpeed);
  const auto& known = e == Engine::kMegatron ? megatron : deepspeed;
  EXPECT_GT(known.size(), 300u);
  auto script = internal::ReadScript("emitted", text);
  EXPECT_TRUE(script.ok()) << where;
  if (!script.ok()) return {};
  // The words after pretrain_gpt.py, up to "$@".
  std::vector<internal::Word> argv;
  bool on = false;
  for (const internal::Word& w : script->words) {
    if (w.text.find("pretrain_gpt.py") != std::string::npos) {
      on = true;
      continue;
    }
    if (on && w.text == "$@") break;
    if (on) argv.push_back(w);
  }
  EXPECT_FALSE(argv.empty()) << where;
  const auto flags = internal::CollectFlags(argv);
  for (const auto& [flag, value] : flags) {
    const auto it = known.find(flag);
    if (it == known.end()) {
      ADD_FAILURE() << where << ": " << flag << " is not a flag of " << ToString(e) << "'s parser";
      continue;
    }
    const size_t n = value.values.size();
    if (it->second.kind == "switch") {
      EXPECT_EQ(n, 0u) << where << ": " << flag;
    } else if (it->second.nargs == "+") {
      EXPECT_GE(n, 1u) << where << ": " << flag;
    } else {
      EXPECT_EQ(n, 1u) << where << ": " << flag;
    }
  }
  return flags;
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
  if (a.is_moe() && where.rfind("torchtitan ", 0) != 0) {  // Megatron's flags, DeepSpeed's gate
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
    if (engine != Engine::kTorchtitan) {
      ExpectParserAccepts(engine, Slurp(dir / MainFile(engine)), where);
    }
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

// Every schedule of schedule/'s table, on every engine: run under the engine's name (no schedule
// rule fires), refused by the rule its EngineSchedules row names, or, without a row, refused by
// the engine's "-unknown-schedule" rule.
TEST(LaunchCapability, EveryScheduleIsNamedOrRefusedByEachEngine) {
  auto model = spec::LoadModel("llama3-405b");
  ASSERT_TRUE(model.ok());
  const std::map<Engine, std::string> unknown = {{Engine::kMegatron, "mg-unknown-schedule"},
                                                 {Engine::kTorchtitan, "tt-unknown-schedule"},
                                                 {Engine::kDeepSpeed, "ds-unknown-schedule"}};
  for (const schedule::ScheduleRow& row : schedule::Schedules()) {
    spec::Layout l{.dp = 128, .tp = 8, .pp = 16, .zero = 1};
    l.schedule = row.kind;
    l.virtual_stages = row.layout_virtual_stages_min;
    for (Engine e : kEngines) {
      std::set<std::string> fired, schedule_rules = {unknown.at(e)};
      for (const CapabilityRule* r : Violations(e, *model, l)) fired.insert(r->id);
      for (const EngineSchedule& es : EngineSchedules()) {
        if (es.engine == e && es.refused_by != nullptr) schedule_rules.insert(es.refused_by);
      }
      const EngineSchedule* es = FindEngineSchedule(e, row.kind);
      const std::string where = fmt::format("{} on {}", spec::ToString(row.kind), ToString(e));
      if (es == nullptr) {
        EXPECT_TRUE(fired.count(unknown.at(e))) << where;
      } else if (es->name == nullptr) {
        ASSERT_NE(es->refused_by, nullptr) << where;
        EXPECT_TRUE(fired.count(es->refused_by)) << where << ": " << es->refused_by;
        EXPECT_FALSE(fired.count(unknown.at(e))) << where;
      } else {
        for (const std::string& id : schedule_rules) EXPECT_FALSE(fired.count(id)) << where << id;
      }
    }
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

// The other four published examples of shared/launch_examples, each read as written with the
// layout, batch and model the file sets (the values below are the files' own, read by hand from
// them); the options are what the files leave open (torchtitan's -1 shard degree: the world).
struct PublishedExample {
  const char* file;
  std::optional<int64_t> gpus;
  std::optional<std::string> model;
  Engine engine;
  int64_t layers, hidden, vocab, seq, sequences;
  const char* layout;
};

class LaunchPublished : public ::testing::TestWithParam<PublishedExample> {};

TEST_P(LaunchPublished, ReadsTheLayoutTheFileSets) {
  const PublishedExample& e = GetParam();
  const fs::path file = Examples() / e.file;
  if (!fs::exists(file)) {
    GTEST_SKIP() << file
                 << " is absent: the published example is kept under shared/launch_examples "
                 << "(fetched data stays out of the repo), which this checkout does not have";
  }
  ImportOptions o;
  o.gpus = e.gpus;
  o.model = e.model;
  auto im = ImportConfig(file.string(), o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->engine, e.engine);
  EXPECT_EQ(im->model.layers, e.layers);
  EXPECT_EQ(im->model.hidden, e.hidden);
  EXPECT_EQ(im->model.vocab, e.vocab);
  EXPECT_EQ(im->train.seq_len, e.seq);
  EXPECT_EQ(im->train.global_batch_tokens, e.sequences * e.seq);
  EXPECT_EQ(spec::FormatLayout(im->layout), e.layout);
  EXPECT_TRUE(im->warnings.empty());
}

INSTANTIATE_TEST_SUITE_P(
    SharedExamples, LaunchPublished,
    ::testing::Values(
        // examples/llama/train_llama3_8b_h100_fp8.sh: torchrun 1 node x 8, TP 1, CP 1, MBS 1,
        // GBS 128, seq 8192; the Llama 3 tokenizer.
        PublishedExample{"megatron_train_llama3_8b_h100_fp8.sh", std::nullopt, std::nullopt,
                         Engine::kMegatron, 32, 4096, 128256, 8192, 128,
                         "dp=8 tp=1 pp=1 cp=1 ep=1 zero=1 mbs=1 recompute=none schedule=1f1b "
                         "cp_kind=ring ep_placement=separate sp=on"},
        // llama3_70b.toml: shard -1, TP 8, local batch 8, seq 8192, full activation checkpointing.
        PublishedExample{"torchtitan_llama3_70b.toml", 64, std::nullopt, Engine::kTorchtitan, 80,
                         8192, 128256, 8192, 64,
                         "dp=8 tp=8 pp=1 cp=1 ep=1 zero=3 mbs=8 recompute=full schedule=1f1b "
                         "cp_kind=ring ep_placement=separate sp=on"},
        // deepseek_v3_16b.toml: shard -1, EP 8, local batch 4, seq 4096, selective AC.
        PublishedExample{"torchtitan_deepseek_v3_16b.toml", 64, std::nullopt, Engine::kTorchtitan,
                         27, 2048, 102400, 4096, 256,
                         "dp=64 tp=1 pp=1 cp=1 ep=8 zero=3 mbs=4 recompute=selective "
                         "schedule=1f1b cp_kind=ring ep_placement=folded sp=on"},
        // examples_deepspeed/pretrain_llama2_distributed.sh: torchrun 1 node x 8, TP 2, PP 2,
        // ZeRO 0, MBS 4, GBS 32, 24 x 2048; its ds_config is a heredoc into ./tmp (made in the
        // sandbox) and its SentencePiece tokenizer's size is in a file the user has: --model
        // gives only the vocabulary.
        PublishedExample{"megatron_deepspeed_pretrain_llama2_distributed.sh", std::nullopt,
                         "llama2-7b", Engine::kDeepSpeed, 24, 2048, 32000, 2048, 32,
                         "dp=2 tp=2 pp=2 cp=1 ep=1 zero=0 mbs=4 recompute=none schedule=1f1b "
                         "cp_kind=ring ep_placement=separate sp=off"}));

// Found by fuzz/launch_fuzz.cc: an array spliced into itself (A=( "${A[@]}" )) pushed into the
// vector it iterated (heap use after free under ASan); it reads as bash reads it. A variable or
// array doubled from itself per line is refused at the expansion limit instead of growing
// exponentially.
TEST(LaunchImport, SelfExpansionsReadAndBounded) {
  auto s = internal::ReadScript(
      "train.sh",
      "A=(--num-layers 2)\nA=(\"${A[@]}\" \"${A[@]}\")\npython pretrain_gpt.py \"${A[@]}\"\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::vector<std::string> words;
  for (const auto& w : s->words) words.push_back(w.text);
  EXPECT_EQ(words, (std::vector<std::string>{"python", "pretrain_gpt.py", "--num-layers", "2",
                                             "--num-layers", "2"}));
  std::string vars = "X=ab\n", arrays = "A=(ab)\n";
  for (int i = 0; i < 40; ++i) {
    vars += "X=\"$X$X\"\n";
    arrays += "A=(\"${A[@]}\" \"${A[@]}\")\n";
  }
  // Line n (n >= 2) expands 2^n bytes: the total 2^(n+1) - 4 passes 2^24 at line 24.
  const auto v = internal::ReadScript("train.sh", vars + "echo \"$X\"\n");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("train.sh: line 24: variable expansions exceed 16777216"),
            std::string::npos)
      << v.status().message();
  const auto a = internal::ReadScript("train.sh", arrays + "echo \"${A[@]}\"\n");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("the expansions exceed 16777216 bytes"), std::string::npos)
      << a.status().message();
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

namespace pentamesh::launch {
namespace {

struct Emitted {
  std::map<std::string, std::string> files;  // name -> text
};

Emitted EmitOrDie(Engine engine, const spec::ModelSpec& model, int64_t gpus, const char* train,
                  const char* layout) {
  auto cluster = spec::LoadCluster("h100-sxm", gpus);
  auto t = spec::LoadTrain(train);
  auto l = spec::ParseLayout(layout);
  EXPECT_TRUE(cluster.ok() && t.ok() && l.ok()) << layout;
  auto files = Emit(engine, EmitInput{.model = model,
                                      .cluster = *cluster,
                                      .train = *t,
                                      .layout = *l,
                                      .estimate = {},
                                      .command = "pentamesh test"});
  EXPECT_TRUE(files.ok()) << layout << ": " << files.status().message();
  Emitted out;
  if (files.ok()) {
    for (const File& f : *files) out.files[f.name] = f.text;
  }
  return out;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Megatron-DeepSpeed's launch.sh: only flags its parser has (the theta flag is
// --rotary-position-embeddings-theta), FlashAttention-2, and DeepSpeed-MoE set to what pentamesh
// costs: dropless top-k (or the model's capacity with dropping), argmax second expert, the MoE
// parameter group ZeRO asserts, experts split over tp (or whole with etp=1); import reads it back.
TEST(LaunchEmit, DeepSpeedMoeIsWhatWasCosted) {
  auto model = spec::LoadModel("mixtral-8x7b");
  ASSERT_TRUE(model.ok());
  const char* layout =
      "dp=64 tp=2 cp=2 ep=8 ep_placement=folded zero=2 recompute=full cp_kind=ulysses sp=off";
  Emitted e = EmitOrDie(Engine::kDeepSpeed, *model, 256, "pretrain-4k", layout);
  const std::string& sh = e.files["launch.sh"];
  const auto flags = ExpectParserAccepts(Engine::kDeepSpeed, sh, layout);
  for (const char* f :
       {"--use-flash-attn-v2", "--create-moe-param-group", "--disable-moe-token-dropping",
        "--disable-moe-top2-2nd-expert-sampling", "--enable-expert-tensor-parallelism"}) {
    EXPECT_TRUE(flags.count(f)) << f;
  }
  ASSERT_TRUE(flags.count("--rotary-position-embeddings-theta"));
  EXPECT_EQ(flags.at("--rotary-position-embeddings-theta").values.front(), "1000000");
  EXPECT_FALSE(Contains(sh, "--rope-theta"));
  EXPECT_FALSE(flags.count("--moe-train-capacity-factor"));

  // A capacity factor: carried, with dropping on; whole experts per tp rank (etp=1): no flag.
  spec::ModelSpec capped = *model;
  capped.moe.capacity_factor = 1.25;
  const char* etp1 = "dp=128 tp=2 ep=8 etp=1 ep_placement=folded zero=1";
  e = EmitOrDie(Engine::kDeepSpeed, capped, 256, "pretrain-4k", etp1);
  const auto capped_flags = ExpectParserAccepts(Engine::kDeepSpeed, e.files["launch.sh"], etp1);
  ASSERT_TRUE(capped_flags.count("--moe-train-capacity-factor"));
  EXPECT_EQ(capped_flags.at("--moe-train-capacity-factor").values.front(), "1.25");
  EXPECT_FALSE(capped_flags.count("--disable-moe-token-dropping"));
  EXPECT_FALSE(capped_flags.count("--enable-expert-tensor-parallelism"));
  const fs::path dir = TempDir("ds_moe");
  std::vector<File> files;
  for (const auto& [name, text] : e.files) files.push_back(File{name, text, false});
  ASSERT_TRUE(WriteFiles(dir.string(), files).ok());
  auto im = ImportConfig((dir / "launch.sh").string(), ImportOptions{});
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_DOUBLE_EQ(im->model.moe.capacity_factor, 1.25);
  EXPECT_EQ(im->layout.expert_tp(), 1);
  EXPECT_EQ(im->model.moe.router, spec::MoeRouter::kTopKRenorm);
}

// A profile that costs DeepEP's per-node dispatch (ep_dispatch_per_node) gets Megatron's flex
// dispatcher with the DeepEP backend, flags its parser has; without it, the all-to-all; the
// engines with no such dispatcher refuse rather than launch what was not costed.
TEST(LaunchEmit, PerNodeDispatchIsWhatWasCosted) {
  auto model = spec::LoadModel("mixtral-8x7b");
  ASSERT_TRUE(model.ok());
  const char* layout = "dp=8 tp=2 pp=4 ep=8 ep_placement=folded zero=1 recompute=full";
  auto cluster = spec::LoadCluster("h100-sxm", 64);
  auto t = spec::LoadTrain("pretrain-4k");
  auto l = spec::ParseLayout(layout);
  ASSERT_TRUE(cluster.ok() && t.ok() && l.ok());
  EmitInput in{.model = *model,
               .cluster = *cluster,
               .train = *t,
               .layout = *l,
               .estimate = {},
               .command = "pentamesh test",
               .ep_dispatch_per_node = true};
  auto files = Emit(Engine::kMegatron, in);
  ASSERT_TRUE(files.ok()) << files.status().message();
  const auto flags = ExpectParserAccepts(Engine::kMegatron, files->front().text, layout);
  EXPECT_EQ(flags.at("--moe-token-dispatcher-type").values.front(), "flex");
  EXPECT_EQ(flags.at("--moe-flex-dispatcher-backend").values.front(), "deepep");
  // import-config reads the dispatcher back, and costs it whatever the profile says.
  ImportOptions o;
  o.gpus = 64;
  auto im = ImportText("train.sh", files->front().text, ".", o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  ASSERT_TRUE(im->ep_dispatch_per_node.has_value());
  EXPECT_TRUE(*im->ep_dispatch_per_node);
  cost::CostParams params;
  CostAsImported(*im, params);
  EXPECT_TRUE(params.ep_dispatch_per_node);
  in.ep_dispatch_per_node = false;
  files = Emit(Engine::kMegatron, in);
  ASSERT_TRUE(files.ok());
  const auto plain = ExpectParserAccepts(Engine::kMegatron, files->front().text, layout);
  EXPECT_EQ(plain.at("--moe-token-dispatcher-type").values.front(), "alltoall");
  EXPECT_FALSE(plain.count("--moe-flex-dispatcher-backend"));
  auto plain_im = ImportText("train.sh", files->front().text, ".", o);
  ASSERT_TRUE(plain_im.ok());
  CostAsImported(*plain_im, params);
  EXPECT_FALSE(params.ep_dispatch_per_node);
  in.ep_dispatch_per_node = true;
  for (Engine engine : {Engine::kTorchtitan, Engine::kDeepSpeed}) {
    auto refused = Emit(engine, in);
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(Contains(refused.status().message(), "ep_dispatch_per_node"));
  }
}

// A profile that costs Megatron-Core's EP all-to-all overlap (ep_a2a_overlap: CostParams::
// ep_overlap > 0) gets --overlap-moe-expert-parallel-comm and --delay-wgrad-compute with 8 CUDA
// connections, where the layout lets it run (spec::EpOverlapRuns: no full recomputation, virtual
// stages under pp), which is also where the estimate hides the share; elsewhere, and without the
// profile's fact, neither; the engines with no such overlap refuse.
TEST(LaunchEmit, EpOverlapIsWhatWasCosted) {
  auto model = spec::LoadModel("mixtral-8x7b");
  ASSERT_TRUE(model.ok());
  const char* layout =
      "dp=8 tp=2 pp=4 ep=8 ep_placement=folded zero=1 recompute=selective schedule=interleaved:2";
  auto cluster = spec::LoadCluster("h100-sxm", 64);
  auto t = spec::LoadTrain("pretrain-4k");
  auto l = spec::ParseLayout(layout);
  ASSERT_TRUE(cluster.ok() && t.ok() && l.ok());
  ASSERT_TRUE(spec::EpOverlapRuns(*l));
  EmitInput in{.model = *model,
               .cluster = *cluster,
               .train = *t,
               .layout = *l,
               .estimate = {},
               .command = "pentamesh test",
               .ep_overlap = true};
  auto files = Emit(Engine::kMegatron, in);
  ASSERT_TRUE(files.ok()) << files.status().message();
  const auto flags = ExpectParserAccepts(Engine::kMegatron, files->front().text, layout);
  EXPECT_TRUE(flags.count("--overlap-moe-expert-parallel-comm"));
  EXPECT_TRUE(flags.count("--delay-wgrad-compute"));
  EXPECT_TRUE(Contains(files->front().text, "export CUDA_DEVICE_MAX_CONNECTIONS=8\n"));
  for (const char* off : {"dp=8 tp=2 pp=4 ep=8 ep_placement=folded zero=1 recompute=full "
                          "schedule=interleaved:2",
                          "dp=8 tp=2 pp=4 ep=8 ep_placement=folded zero=1 recompute=selective"}) {
    auto lo = spec::ParseLayout(off);
    ASSERT_TRUE(lo.ok());
    EXPECT_FALSE(spec::EpOverlapRuns(*lo)) << off;
    in.layout = *lo;
    files = Emit(Engine::kMegatron, in);
    ASSERT_TRUE(files.ok()) << files.status().message();
    EXPECT_FALSE(Contains(files->front().text, "--overlap-moe-expert-parallel-comm")) << off;
    EXPECT_TRUE(Contains(files->front().text, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n")) << off;
  }
  in.layout = *l;
  in.ep_overlap = false;
  files = Emit(Engine::kMegatron, in);
  ASSERT_TRUE(files.ok());
  EXPECT_FALSE(Contains(files->front().text, "--overlap-moe-expert-parallel-comm"));
  in.ep_overlap = true;
  for (Engine engine : {Engine::kTorchtitan, Engine::kDeepSpeed}) {
    auto refused = Emit(engine, in);
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(Contains(refused.status().message(), "ep_a2a_overlap"));
  }
}

// An interleaved Megatron pipeline overlaps its sends unless the file says
// --no-overlap-p2p-communication (cost::CostParams::pp_p2p_overlap): import-config costs what the
// file runs; a plain 1F1B pipeline states nothing.
TEST(LaunchImport, InterleavedSendOverlapIsWhatTheFileRuns) {
  auto model = spec::LoadModel("llama3-8b");
  ASSERT_TRUE(model.ok());
  const char* layout = "dp=8 tp=2 pp=4 zero=1 schedule=interleaved:2";
  Emitted e = EmitOrDie(Engine::kMegatron, *model, 64, "pretrain-4k", layout);
  std::string sh = e.files.at("train.sh");
  ExpectParserAccepts(Engine::kMegatron, sh, layout);
  ImportOptions o;
  o.gpus = 64;
  auto im = ImportText("train.sh", sh, ".", o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  ASSERT_TRUE(im->pp_p2p_overlap.has_value());
  EXPECT_TRUE(*im->pp_p2p_overlap);
  cost::CostParams params;
  CostAsImported(*im, params);
  EXPECT_TRUE(params.pp_p2p_overlap);
  // The same script with the flag that turns it off.
  const size_t at = sh.find("--num-virtual-stages-per-pipeline-rank");
  ASSERT_NE(at, std::string::npos);
  sh.insert(at, "--no-overlap-p2p-communication ");
  auto off = ImportText("train.sh", sh, ".", o);
  ASSERT_TRUE(off.ok()) << off.status().message();
  ASSERT_TRUE(off->pp_p2p_overlap.has_value());
  EXPECT_FALSE(*off->pp_p2p_overlap);
  CostAsImported(*off, params);
  EXPECT_FALSE(params.pp_p2p_overlap);
  Emitted plain = EmitOrDie(Engine::kMegatron, *model, 64, "pretrain-4k", "dp=8 tp=2 pp=4 zero=1");
  auto plain_im = ImportText("train.sh", plain.files.at("train.sh"), ".", o);
  ASSERT_TRUE(plain_im.ok());
  EXPECT_FALSE(plain_im->pp_p2p_overlap.has_value());
}

// Module-level selective recomputation: Megatron gets --recompute-modules with the layout's words
// (each its own argument, as its nargs '+' parser takes them), import reads the list back; the
// engines without a module list refuse by rule.
TEST(LaunchEmit, RecomputeModulesAreWhatWasCosted) {
  auto model = spec::LoadModel("mixtral-8x7b");
  ASSERT_TRUE(model.ok());
  const char* layout =
      "dp=16 tp=1 pp=4 ep=8 ep_placement=folded zero=1 recompute=selective "
      "recompute_modules=moe_act+layernorm";
  Emitted e = EmitOrDie(Engine::kMegatron, *model, 64, "pretrain-4k", layout);
  const std::string& sh = e.files.at("train.sh");
  const auto flags = ExpectParserAccepts(Engine::kMegatron, sh, layout);
  EXPECT_EQ(flags.at("--recompute-granularity").values.front(), "selective");
  EXPECT_EQ(flags.at("--recompute-modules").values,
            (std::vector<std::string>{"layernorm", "moe_act"}));
  ImportOptions o;
  o.gpus = 64;
  auto im = ImportText("train.sh", sh, ".", o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->layout.recompute_modules, spec::kRecomputeLayerNorm | spec::kRecomputeMoeAct);
  // Words pentamesh does not cost are noted; a list of only those recomputes nothing it costs.
  std::string moe_only = sh;
  const std::string words = "--recompute-modules layernorm\n  moe_act\n";
  ASSERT_NE(moe_only.find(words), std::string::npos) << sh;
  moe_only.replace(moe_only.find(words), words.size(),
                   "--recompute-modules moe\n  shared_experts\n");
  auto other = ImportText("train.sh", moe_only, ".", o);
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_EQ(other->layout.recompute, spec::Recompute::kNone);
  EXPECT_TRUE(std::any_of(other->notes.begin(), other->notes.end(), [](const std::string& n) {
    return Contains(n, "--recompute-modules moe is not costed");
  }));
  auto l = spec::ParseLayout(layout);
  ASSERT_TRUE(l.ok());
  for (auto [engine, rule] : {std::pair{Engine::kTorchtitan, "tt-no-recompute-modules"},
                              std::pair{Engine::kDeepSpeed, "ds-no-recompute-modules"}}) {
    bool named = false;
    for (const CapabilityRule* r : Violations(engine, *model, *l))
      named |= r->id == std::string(rule);
    EXPECT_TRUE(named) << rule;
  }
  l->recompute_modules = spec::kRecomputeMlaUpProj;
  bool named = false;
  for (const CapabilityRule* r : Violations(Engine::kMegatron, *model, *l))
    named |= r->id == std::string("mg-mla-up-proj-needs-mla");
  EXPECT_TRUE(named);
}

// Megatron-FSDP (zero 2/3) with every flag the core_v0.16.1 user guide lists as required, and
// CUDA_DEVICE_MAX_CONNECTIONS unset (validate_args asserts it is not 1).
TEST(LaunchEmit, MegatronFsdpRequiredFlags) {
  auto model = spec::LoadModel("llama3-70b");
  ASSERT_TRUE(model.ok());
  for (const char* layout : {"dp=64 tp=8 zero=3", "dp=64 tp=8 zero=2"}) {
    Emitted e = EmitOrDie(Engine::kMegatron, *model, 512, "pretrain-4k", layout);
    const std::string& sh = e.files["train.sh"];
    const auto flags = ExpectParserAccepts(Engine::kMegatron, sh, layout);
    for (const char* f :
         {"--use-megatron-fsdp", "--data-parallel-sharding-strategy",
          "--no-gradient-accumulation-fusion", "--use-distributed-optimizer", "--ckpt-format"}) {
      EXPECT_TRUE(flags.count(f)) << layout << ": " << f;
    }
    EXPECT_EQ(flags.at("--ckpt-format").values.front(), "fsdp_dtensor");
    EXPECT_TRUE(Contains(sh, "\nunset CUDA_DEVICE_MAX_CONNECTIONS\n")) << layout;
    EXPECT_FALSE(Contains(sh, "CUDA_DEVICE_MAX_CONNECTIONS=1")) << layout;
    ImportOptions o;
    o.gpus = 512;
    auto im = ImportText("train.sh", sh, ".", o);
    ASSERT_TRUE(im.ok()) << im.status().message();
    EXPECT_EQ(im->layout.zero, layout[std::string(layout).size() - 1] - '0');
  }
}

// torchtitan's sbatch.sh starts one torchrun per node: the allocation asks for one task per node
// (with all its GPUs), and srun names the task count itself; the node rank is the task's own.
// The MoE flavour note says the shared experts (MoEArgs' default is one).
TEST(LaunchEmit, TorchtitanOneTorchrunPerNodeAndMoeNote) {
  auto model = spec::LoadModel("mixtral-8x7b");
  ASSERT_TRUE(model.ok());
  Emitted e = EmitOrDie(Engine::kTorchtitan, *model, 256, "pretrain-4k",
                        "dp=32 tp=8 ep=8 ep_placement=folded zero=3");
  const std::string& sb = e.files["sbatch.sh"];
  EXPECT_TRUE(Contains(sb,
                       "#SBATCH --nodes=32\n#SBATCH --ntasks-per-node=1\n"
                       "#SBATCH --gpus-per-node=8\n"))
      << sb;
  size_t sruns = 0;
  std::istringstream lines(sb);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("srun ", 0) != 0) continue;
    ++sruns;
    EXPECT_TRUE(Contains(line, "srun --ntasks=\"$SLURM_NNODES\" --ntasks-per-node=1 ")) << line;
    EXPECT_TRUE(Contains(line,
                         "bash -c 'exec torchrun --nnodes=\"$SLURM_NNODES\" "
                         "--nproc_per_node=8 --node_rank=\"$SLURM_NODEID\""))
        << line;
  }
  EXPECT_EQ(sruns, 1u);
  EXPECT_TRUE(Contains(e.files["job.toml"], "num_shared_experts=0, top_k=2"))
      << e.files["job.toml"];
}

// The engine rules part 2 of issue 28 added, each refusing naming itself.
TEST(LaunchCapability, EngineSemanticsRefusedNamingTheRule) {
  auto mixtral = spec::LoadModel("mixtral-8x7b");
  auto llama = spec::LoadModel("llama3-70b");
  ASSERT_TRUE(mixtral.ok() && llama.ok());
  spec::ModelSpec softmax = *mixtral;
  softmax.moe.router = spec::MoeRouter::kSoftmaxTopK;
  spec::ModelSpec global = *mixtral;
  global.moe.aux_loss_scope = spec::AuxLossScope::kGlobal;
  spec::ModelSpec odd_theta = *llama;
  odd_theta.rope_theta = 500000.5;
  spec::ModelSpec odd_layers = *mixtral;
  odd_layers.moe.moe_layer_freq = 3;  // 32 layers: Megatron-DeepSpeed places 10, pentamesh 11
  spec::ModelSpec first_dense = *mixtral;
  first_dense.moe.first_dense_layers = 1;  // MeridianFin-72B's shape: layer 0 dense
  spec::ModelSpec capacity = *mixtral;
  capacity.moe.capacity_factor = 1.0;
  struct Refusal {
    Engine engine;
    const spec::ModelSpec* model;
    const char* layout;
    const char* rule;
  };
  for (const Refusal& r : {
           Refusal{Engine::kDeepSpeed, &*mixtral, "dp=32 tp=8 ep=8 ep_placement=folded zero=3",
                   "ds-moe-no-zero3"},
           Refusal{Engine::kDeepSpeed, &softmax, "dp=32 tp=8 ep=8 ep_placement=folded zero=2",
                   "ds-moe-router"},
           Refusal{Engine::kDeepSpeed, &global, "dp=32 tp=8 ep=8 ep_placement=folded zero=2",
                   "ds-moe-router"},
           Refusal{Engine::kDeepSpeed, &odd_theta, "dp=32 tp=8 zero=1", "ds-rope-theta-int"},
           Refusal{Engine::kDeepSpeed, &odd_layers, "dp=32 tp=8 ep=8 ep_placement=folded zero=2",
                   "ds-moe-shape"},
           Refusal{Engine::kTorchtitan, &first_dense, "dp=32 tp=8 ep=8 zero=3",
                   "tt-moe-every-layer"},
           Refusal{Engine::kTorchtitan, &odd_layers, "dp=32 tp=8 ep=8 zero=3",
                   "tt-moe-every-layer"},
           Refusal{Engine::kTorchtitan, &capacity, "dp=32 tp=8 ep=8 zero=3", "tt-moe-dropless"},
           Refusal{Engine::kTorchtitan, &*llama, "dp=1 tp=8 pp=32 zero=3", "tt-bf16-needs-fsdp"},
           Refusal{Engine::kTorchtitan, &*llama, "dp=1 tp=8 pp=32 zero=0", "tt-bf16-needs-fsdp"},
       }) {
    auto layout = spec::ParseLayout(r.layout);
    ASSERT_TRUE(layout.ok()) << r.layout;
    std::set<std::string> ids;
    for (const CapabilityRule* rule : Violations(r.engine, *r.model, *layout)) ids.insert(rule->id);
    EXPECT_TRUE(ids.count(r.rule)) << r.rule << " for " << r.layout;
  }
  // What the rules leave: ZeRO-2 MoE on DeepSpeed, FSDP or cp with tp/pp on torchtitan.
  auto ok_ds = spec::ParseLayout("dp=32 tp=8 ep=8 ep_placement=folded zero=2");
  auto ok_tt = spec::ParseLayout("dp=2 tp=8 pp=16 zero=3");
  auto ok_cp = spec::ParseLayout("dp=1 tp=8 pp=16 cp=2 zero=3");
  ASSERT_TRUE(ok_ds.ok() && ok_tt.ok() && ok_cp.ok());
  EXPECT_TRUE(Violations(Engine::kDeepSpeed, *mixtral, *ok_ds).empty());
  EXPECT_TRUE(Violations(Engine::kTorchtitan, *llama, *ok_tt).empty());
  EXPECT_TRUE(Violations(Engine::kTorchtitan, *llama, *ok_cp).empty());
}

}  // namespace
}  // namespace pentamesh::launch

namespace pentamesh::launch {
namespace {

bool Noted(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

// The published Megatron-LM examples (examples/llama/train_llama3_8b_h100_fp8.sh,
// examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh) say their world size only in torchrun's
// flags, from variables, through an unquoted array expansion: the idiom, in a script written here.
// An elastic node range says no one size and still asks for --gpus.
TEST(LaunchImport, WorldSizeFromTorchrunFlags) {
  const std::string script =
      "#!/bin/bash\nGPUS_PER_NODE=4\nNUM_NODES=${NUM_NODES:-2}\nTP_SIZE=2\n"
      "DISTRIBUTED_ARGS=(\n    --nproc_per_node $GPUS_PER_NODE\n    --nnodes $NUM_NODES\n)\n"
      "MODEL_ARGS=(--num-layers 4 --hidden-size 256 --num-attention-heads 8 --ffn-hidden-size 512 "
      "--vocab-size 1024 --seq-length 1024)\n"
      "torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${MODEL_ARGS[@]} --micro-batch-size 1 "
      "--global-batch-size 16 --tensor-model-parallel-size $TP_SIZE\n";
  auto im = ImportText("train.sh", script, ".", ImportOptions{});
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->gpus, 8);
  EXPECT_EQ(im->layout.tp, 2);
  EXPECT_EQ(im->layout.dp, 4);
  EXPECT_EQ(im->gpus_per_node, std::optional<int64_t>(4));
  std::string elastic = script;
  elastic.replace(elastic.find("--nnodes $NUM_NODES"), 19, "--nnodes 1:2");
  auto range = ImportText("train.sh", elastic, ".", ImportOptions{});
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("pass --gpus"), std::string::npos)
      << range.status().message();
  // The allocation's node count (known only at run time) is not guessed from its default.
  std::string slurm = script;
  slurm.replace(slurm.find("${NUM_NODES:-2}"), 15, "${SLURM_NNODES:-2}");
  auto allocation = ImportText("train.sh", slurm, ".", ImportOptions{});
  ASSERT_FALSE(allocation.ok());
  EXPECT_NE(allocation.status().message().find("pass --gpus"), std::string::npos)
      << allocation.status().message();
}

// A flag the engine's parser lacks is named (with the closest one), not silently imported as the
// default; --allow-unknown turns that into a warning. Launcher flags before pretrain_gpt.py are
// torchrun's, not Megatron's.
TEST(LaunchImport, UnknownFlagsAreNamed) {
  const std::string head =
      "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --num-layers 4 --hidden-size 256 "
      "\\\n --num-attention-heads 8 --ffn-hidden-size 512 --vocab-size 1024 --seq-length 1024 \\\n"
      " --micro-batch-size 1 --global-batch-size 16 \\\n";
  ImportOptions o;
  o.gpus = 16;
  auto ok = ImportText("train.sh", head + " --tensor-model-parallel-size 8\n", ".", o);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->layout.tp, 8);
  EXPECT_TRUE(ok->warnings.empty());
  const std::string misspelt = head + " --tensor-model-paralel-size 8\n";
  auto bad = ImportText("train.sh", misspelt, ".", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 4: --tensor-model-paralel-size (did you mean "
                                        "--tensor-model-parallel-size?)"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("Megatron-LM's parser (core_v0.16.1)"), std::string::npos);
  o.allow_unknown = true;
  auto warned = ImportText("train.sh", misspelt, ".", o);
  ASSERT_TRUE(warned.ok()) << warned.status().message();
  EXPECT_EQ(warned->layout.tp, 1);
  ASSERT_EQ(warned->warnings.size(), 1u);
  EXPECT_NE(warned->warnings[0].find("--tensor-model-paralel-size"), std::string::npos);
  // Megatron-DeepSpeed's parser: --rope-theta is not one of its flags.
  ImportOptions ds;
  ds.engine = Engine::kDeepSpeed;
  ds.gpus = 16;
  auto ds_bad = ImportText("launch.sh",
                           "deepspeed pretrain_gpt.py --num-layers 4 --hidden-size 256 "
                           "--num-attention-heads 8 --seq-length 1024 --micro-batch-size 1 "
                           "--rope-theta 10000 --deepspeed_config ds.json\n",
                           ".", ds);
  ASSERT_FALSE(ds_bad.ok());
  EXPECT_NE(ds_bad.status().message().find("--rope-theta"), std::string::npos);
  EXPECT_NE(ds_bad.status().message().find("Megatron-DeepSpeed's parser"), std::string::npos);
}

// torchtitan's ConfigManager refuses keys its JobConfig lacks: named with their lines (the
// misspelt section would otherwise leave tp at 1); --allow-unknown warns instead.
TEST(LaunchImport, UnknownTorchtitanKeysAreNamed) {
  const std::string toml =
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_sise = 4\n"
      "[paralelism]\ntensor_parallel_degree = 2\n[parallelism]\ndata_parallel_shard_degree = 8\n";
  ImportOptions o;
  auto bad = ImportText("job.toml", toml, ".", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 6: paralelism; line 5: training.local_batch_sise"),
            std::string::npos)
      << bad.status().message();
  o.allow_unknown = true;
  auto warned = ImportText("job.toml", toml, ".", o);
  ASSERT_TRUE(warned.ok()) << warned.status().message();
  EXPECT_EQ(warned->layout.tp, 1);
  ASSERT_EQ(warned->warnings.size(), 1u);
  EXPECT_NE(warned->warnings[0].find("training.local_batch_sise"), std::string::npos);
}

// ds_config keys DeepSpeed 0.19.8 does not read are named (src/launch/data/deepspeed_config_keys
// _v0.19.8.txt): a misspelt top-level section (DeepSpeed ignores it, so ZeRO would silently stay
// at stage 0) and a misspelt field inside a section DeepSpeed's pydantic model checks (DeepSpeed
// refuses it); --allow-unknown warns instead. The contents of optimizer/scheduler are not checked,
// and the emitted config's own "_pentamesh" key is accepted.
TEST(LaunchImport, UnknownDsConfigKeysAreNamed) {
  ImportOptions o;
  o.engine = Engine::kDeepSpeed;
  o.model = "llama3-8b";
  o.seq_len = 4096;
  o.gpus = 8;
  const std::string good =
      R"({"_pentamesh": "header", "train_micro_batch_size_per_gpu": 1, "zero_optimization": )"
      R"({"stage": 2, "offload_optimizer": {"device": "cpu"}}, "optimizer": {"type": "AdamW", )"
      R"("params": {"lr": 1e-4, "anything": 1}}, "bf16": {"enabled": true}})";
  auto ok = ImportText("ds_config.json", good, ".", o);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->layout.zero, 2);
  EXPECT_TRUE(ok->warnings.empty());
  const std::string bad_text =
      R"({"train_micro_batch_size_per_gpu": 1, "zero_optimisation": {"stage": 3}, )"
      R"("bf16": {"enabled": true, "enabeld": true}})";
  auto bad = ImportText("ds_config.json", bad_text, ".", o);
  ASSERT_FALSE(bad.ok());
  const std::string& msg = bad.status().message();
  EXPECT_NE(msg.find("not DeepSpeed 0.19.8 ds_config keys: zero_optimisation (DeepSpeed ignores "
                     "it"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("bf16.enabeld (DeepSpeed's config check refuses it)"), std::string::npos)
      << msg;
  o.allow_unknown = true;
  auto warned = ImportText("ds_config.json", bad_text, ".", o);
  ASSERT_TRUE(warned.ok()) << warned.status().message();
  EXPECT_EQ(warned->layout.zero, 0);  // what DeepSpeed runs: the misspelt section is ignored
  ASSERT_EQ(warned->warnings.size(), 1u);
  EXPECT_NE(warned->warnings[0].find("zero_optimisation"), std::string::npos);
}

// The engines' own defaults where a flag is absent, and the flags pentamesh does not carry listed
// as notes.
TEST(LaunchImport, EngineDefaultsAndDroppedFlags) {
  ImportOptions o;
  o.gpus = 16;
  const std::string mg =
      "python pretrain_gpt.py --num-layers 4 --hidden-size 4096 --num-attention-heads 32 "
      "--swiglu --group-query-attention \\\n --vocab-size 50257 --seq-length 1024 "
      "--micro-batch-size 1 --tensor-model-parallel-size 2 \\\n --recompute-granularity "
      "selective --recompute-modules core_attn mlp --fp8-param-gather --mtp-num-layers 1\n";
  auto im = ImportText("train.sh", mg, ".", o);
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(im->model.ffn_hidden, (4 * 4096 * 2 / 3) / 64 * 64);  // 10880: Megatron's SwiGLU size
  EXPECT_EQ(im->model.kv_heads, 32);  // --group-query-attention without --num-query-groups
  EXPECT_EQ(im->model.vocab, 50432);  // padded to 128 x tp 2
  EXPECT_TRUE(Noted(im->notes, "vocabulary 50257 padded to 50432"));
  for (const char* f : {"--fp8-param-gather", "--mtp-num-layers"}) {
    EXPECT_TRUE(Noted(im->notes, std::string("dropped ") + f)) << f;
  }
  // --recompute-modules is read: the list replaces the default core_attn.
  EXPECT_EQ(im->layout.recompute, spec::Recompute::kSelective);
  EXPECT_EQ(im->layout.recompute_modules, spec::kRecomputeCoreAttn | spec::kRecomputeMlp);
  EXPECT_FALSE(Noted(im->notes, "dropped --recompute-modules"));
  // Megatron-DeepSpeed: MoE every 2nd layer, top-1, capacity 1.0 with dropping, by default.
  const fs::path dir = TempDir("ds_defaults");
  {
    std::ofstream(dir / "ds.json") << "{\"train_batch_size\": 16, "
                                      "\"train_micro_batch_size_per_gpu\": 1, "
                                      "\"gradient_accumulation_steps\": 1}";
    std::ofstream(dir / "launch.sh")
        << "deepspeed pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
           "--seq-length 1024 --max-position-embeddings 1024 --vocab-size 1024 "
           "--micro-batch-size 1 --num-experts 8 --deepspeed --deepspeed_config ds.json\n";
  }
  auto ds = ImportConfig((dir / "launch.sh").string(), ImportOptions{});
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->model.moe.moe_layer_freq, 2);
  EXPECT_EQ(ds->model.moe.top_k, 1);
  EXPECT_DOUBLE_EQ(ds->model.moe.capacity_factor, 1.0);
  EXPECT_EQ(ds->model.moe.router, spec::MoeRouter::kSoftmaxTopK);
}

// torchtitan 0.2.2's registered qwen3 and deepseek_v3 flavors import as their shapes: the
// parameter totals against the published model cards (Qwen3-32B 32.8B, Qwen3-30B-A3B 30.5B / 3.3B
// active, Qwen3-235B-A22B 235B / 22B, DeepSeek-V2-Lite = torchtitan's "16B" 15.7B / 2.4B,
// DeepSeek-V3 671B / 37B without its MTP module, Llama 4 Scout 109B / 17B and Maverick 400B /
// 17B), within 1.5%.
TEST(LaunchImport, TorchtitanFlavorsOfThePinnedVersion) {
  struct Card {
    const char* name;
    const char* flavor;
    double total, active;  // parameters, billions
  };
  const Card cards[] = {{"qwen3", "32B", 32.8, 32.8},     {"qwen3", "30B-A3B", 30.5, 3.3},
                        {"qwen3", "235B-A22B", 235, 22},  {"deepseek_v3", "16B", 15.7, 2.4},
                        {"deepseek_v3", "671B", 671, 37}, {"llama4", "17bx16e", 109, 17},
                        {"llama4", "17bx128e", 400, 17}};
  for (const Card& c : cards) {
    const std::string toml = fmt::format(
        "[model]\nname = \"{}\"\nflavor = \"{}\"\n[training]\nseq_len = 4096\n"
        "local_batch_size = 1\n[parallelism]\ndata_parallel_shard_degree = 8\n",
        c.name, c.flavor);
    auto im = ImportText("job.toml", toml, ".", ImportOptions{});
    ASSERT_TRUE(im.ok()) << c.flavor << ": " << im.status().message();
    EXPECT_EQ(im->model.max_seq_len, 4096);
    const cost::ParamCounts p = cost::CountParams(im->model);
    EXPECT_NEAR(p.total / 1e9, c.total, 0.015 * c.total) << c.name << " " << c.flavor;
    // DeepSeek-V2-Lite's card counts the activated parameters without the output layer (2.66B
    // with it, 2.45B without).
    const double active = p.active - (std::string(c.flavor) == "16B" ? p.lm_head : 0);
    EXPECT_NEAR(active / 1e9, c.active, 0.015 * c.active + 0.05) << c.name << " " << c.flavor;
    EXPECT_TRUE(Noted(im->notes, "torchtitan 0.2.2's registered shape")) << c.flavor;
    // torchtitan runs its own flavors: the rules about the models pentamesh writes do not apply.
    for (const CapabilityRule* r : ImportViolations(*im)) {
      ADD_FAILURE() << c.name << " " << c.flavor << ": " << r->id;
    }
  }
  auto unknown = ImportText("job.toml", "[model]\nname = \"llama4\"\nflavor = \"17bx16e_irope\"\n",
                            ".", ImportOptions{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("flavor '17bx16e_irope'"), std::string::npos);
}

}  // namespace
}  // namespace pentamesh::launch

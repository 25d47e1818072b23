#include "spec/load_toml.h"

#include <gtest/gtest.h>

#include <utility>

namespace pentamesh::spec {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Presets, EveryPresetLoads) {
  for (const auto& name : PresetNames("models")) {
    auto m = LoadModel(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().message();
    EXPECT_EQ(m->name, name);
  }
  for (const auto& name : PresetNames("clusters")) {
    auto c = LoadCluster(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().message();
  }
  for (const auto& name : PresetNames("train")) {
    auto t = LoadTrain(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().message();
  }
  for (const char* required :
       {"meridianfin-72b", "llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b", "mixtral-8x7b"}) {
    EXPECT_TRUE(PresetText("models", required).has_value()) << required;
  }
  for (const char* required : {"a100-80gb", "h100-sxm", "h200"}) {
    EXPECT_TRUE(PresetText("clusters", required).has_value()) << required;
  }
}

TEST(Presets, PresetFilesInTheRepoAreTheEmbeddedOnes) {
  auto from_file = LoadModel(std::string(PM_SOURCE_DIR) + "/configs/presets/models/llama3-8b.toml");
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  auto preset = LoadModel("llama3-8b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(from_file->hidden, preset->hidden);
  EXPECT_EQ(from_file->ffn_hidden, preset->ffn_hidden);
}

TEST(LoadCluster, GpusSetsNodes) {
  auto c = LoadCluster("h100-sxm", 1024);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->nodes, 128);
  EXPECT_EQ(c->gpus(), 1024);
  auto small = LoadCluster("h100-sxm", 4);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->gpus(), 4);
  EXPECT_EQ(small->gpus_per_node, 4);
  EXPECT_FALSE(LoadCluster("h100-sxm", 0).ok());
  EXPECT_FALSE(LoadCluster("h100-sxm", 12).ok());
  EXPECT_FALSE(LoadCluster("h100-sxm", 3).ok());
}

TEST(LoadModel, OneFileHoldsAllTables) {
  const std::string text = R"(
[model]
layers = 2
hidden = 64
heads = 4
ffn_hidden = 128
vocab = 100
max_seq_len = 32
[model.moe]
experts = 4
top_k = 2
expert_ffn_hidden = 32
[cluster]
peak_tflops = 100
hbm_gb = 16
hbm_gbps = 1000
gpus_per_node = 4
nodes = 2
intra_node_gbps = 100
nics_per_node = 1
inter_node_gbps = 10
[train]
seq_len = 32
global_batch_seqs = 8
total_tokens = 1e6
)";
  auto m = ModelFromTomlText(text, "t.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->kv_heads, 4);   // defaults to heads
  EXPECT_EQ(m->head_dim, 16);  // defaults to hidden / heads
  EXPECT_TRUE(m->is_moe());
  EXPECT_EQ(m->MoeLayerCount(), 2);
  auto c = ClusterFromTomlText(text, "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->gpus(), 8);
  auto t = TrainFromTomlText(text, "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->global_batch_tokens, 256);
}

TEST(LoadModel, ReportsEveryBadFieldAtOnce) {
  auto m = ModelFromTomlText(R"(
[model]
layers = 0
hidden = "big"
heads = 4
vocab = 100
max_seq_len = 32
activation = "relu"
hiden = 3
)",
                             "bad.toml");
  ASSERT_FALSE(m.ok());
  const std::string& msg = m.status().message();
  EXPECT_TRUE(Contains(msg, "bad.toml")) << msg;
  EXPECT_TRUE(Contains(msg, "model.layers: must be >= 1 (got 0)")) << msg;
  EXPECT_TRUE(Contains(msg, "model.hidden: must be an integer")) << msg;
  EXPECT_TRUE(Contains(msg, "model.ffn_hidden: missing (required)")) << msg;
  EXPECT_TRUE(Contains(msg, "model.activation: 'relu'")) << msg;
  EXPECT_TRUE(Contains(msg, "model.hiden: unknown key")) << msg;
}

TEST(LoadToml, WholeNumbersBeyondInt64AreErrors) {
  for (const char* value : {"8E92", "9.3e18", "-9.3e18", "inf", "nan", "1.5"}) {
    auto t = TrainFromTomlText(
        std::string("[train]\nname = \"x\"\nglobal_batch_tokens = 1024\nseq_len = ") + value,
        "t.toml");
    ASSERT_FALSE(t.ok()) << value;
    EXPECT_TRUE(Contains(t.status().message(), "train.seq_len: must be an integer"))
        << value << ": " << t.status().message();
  }
  auto big = TrainFromTomlText(
      "[train]\nname = \"x\"\nglobal_batch_seqs = 9e18\nseq_len = 9e18\ntotal_tokens = 1e9",
      "t.toml");
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(Contains(big.status().message(), "train.seq_len: must be <= 2147483647"))
      << big.status().message();
  EXPECT_TRUE(Contains(big.status().message(), "train.global_batch_seqs: must be <= 2147483647"))
      << big.status().message();
  auto many = TrainFromTomlText(
      "[train]\nname = \"x\"\nglobal_batch_tokens = 1000\nseq_len = 1e3\ntotal_tokens = 1e300",
      "t.toml");
  ASSERT_FALSE(many.ok());
  EXPECT_TRUE(Contains(many.status().message(), "train.total_tokens: must be <= 1e+18"))
      << many.status().message();
  auto t = TrainFromTomlText(
      "[train]\nname = \"x\"\nglobal_batch_tokens = 1000\nseq_len = 1e3\ntotal_tokens = 1e9",
      "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->seq_len, 1000);
}

TEST(LoadModel, MalformedTomlNamesLine) {
  auto m = ModelFromTomlText("[model]\nlayers = = 3\n", "x.toml");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "x.toml:2:")) << m.status().message();
  EXPECT_TRUE(Contains(m.status().message(), "malformed TOML")) << m.status().message();
}

TEST(LoadModel, MissingTableAndUnknownPreset) {
  auto m = ModelFromTomlText("[cluster]\nnodes = 1\n", "c.toml");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.status().message(), "has no [model] table"));
  auto p = LoadModel("llama9");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(Contains(p.status().message(), "unknown model preset 'llama9'"))
      << p.status().message();
  EXPECT_TRUE(Contains(p.status().message(), "llama3-8b"));
  auto f = LoadModel("/nonexistent/x.toml");
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(Contains(f.status().message(), "/nonexistent/x.toml: cannot open"));
}

TEST(LoadTrain, BatchMustBeWholeSequences) {
  auto t = TrainFromTomlText(
      "[train]\nseq_len = 100\nglobal_batch_tokens = 150\ntotal_tokens = 1e9\n", "t");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Contains(t.status().message(), "not a multiple of seq_len=100"));
  auto both = TrainFromTomlText(
      "[train]\nseq_len = 100\nglobal_batch_tokens = 200\nglobal_batch_seqs = 2\n"
      "total_tokens = 1e9\n",
      "t");
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(Contains(both.status().message(), "exactly one of"));
}

}  // namespace
}  // namespace pentamesh::spec

namespace pentamesh::spec {
namespace {

// fuzz/toml_fuzz.cc found that toml++ 3.3 reaches __builtin_unreachable on a non-ASCII character
// in a bare key; such input must be an error naming the line, and non-ASCII text inside strings
// and comments must still load.
TEST(LoadModel, NonAsciiOutsideStringsIsAnErrorNotACrash) {
  auto bad = ModelFromTomlText("[model]\nlayers = 2\nrope_theta\xd1\xa0 499999.0\n", "u.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "u.toml:3: malformed TOML: a non-ASCII character"))
      << bad.status().message();
  auto good = ModelFromTomlText(
      "# mod\xc3\xa8le\n[model]\nname = \"caf\xc3\xa9 \\\" \xe2\x82\xac\"\nlayers = 2\nhidden = "
      "64\n"
      "heads = 4\nffn_hidden = 128\nvocab = 100\nmax_seq_len = 32  # \xe2\x82\xac\n"
      "activation = '''swiglu'''\n",
      "u8.toml");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->name, "caf\xc3\xa9 \" \xe2\x82\xac");
}

// The fuzzer then found the same toml++ path inside multi-line basic strings: a non-ASCII character
// right after a backslash, or first after a line-ending backslash. Both are errors naming the
// line; a line-ending backslash followed by ASCII text, and non-ASCII text elsewhere in a
// multi-line string, still load.
TEST(LoadModel, NonAsciiAfterBackslashInMultiLineStringIsAnError) {
  const std::string head = "[model]\nlayers = 2\nname = \"\"\"";
  const std::pair<std::string, std::string> cases[] = {
      {"y\\\xef\xb9\xbf\"\"\"\n", "m.toml:3: malformed TOML: a non-ASCII character after a"},
      {"a \\\n\n  \xc3\xa9\"\"\"\n",
       "m.toml:5: malformed TOML: a non-ASCII character first after"}};
  for (const auto& [body, want] : cases) {
    auto bad = ModelFromTomlText(head + body, "m.toml");
    ASSERT_FALSE(bad.ok());
    EXPECT_TRUE(Contains(bad.status().message(), want)) << bad.status().message();
  }
  auto good = ModelFromTomlText(head +
                                    "caf\xc3\xa9 \\\n  ok\"\"\"\nhidden = 64\nheads = 4\n"
                                    "ffn_hidden = 128\nvocab = 100\nmax_seq_len = 32\n",
                                "m.toml");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->name, "caf\xc3\xa9 ok");
}

}  // namespace
}  // namespace pentamesh::spec

#include "spec/validate.h"

#include <gtest/gtest.h>

#include "spec/load_toml.h"

namespace pentamesh::spec {
namespace {

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model = *LoadModel("meridianfin-72b");
    cluster = *LoadCluster("h100-sxm", 1024);
    train = *LoadTrain("meridian-128k");
  }
  // Exactly one violation containing `part`, or none when part is empty.
  void ExpectOnly(const Layout& l, const std::string& part) {
    auto v = Validate(model, cluster, train, l);
    if (part.empty()) {
      EXPECT_TRUE(v.empty()) << (v.empty() ? "" : v[0]);
      return;
    }
    ASSERT_EQ(v.size(), 1u) << (v.empty() ? "none" : v[0] + (v.size() > 1 ? " | " + v[1] : ""));
    EXPECT_NE(v[0].find(part), std::string::npos) << v[0];
  }
  ModelSpec model;
  ClusterSpec cluster;
  TrainSpec train;
};

TEST_F(ValidateTest, AcceptsA5DLayout) {
  ExpectOnly(Layout{.dp = 2, .tp = 8, .pp = 4, .cp = 4, .ep = 4}, "");
  ExpectOnly(Layout{.dp = 8, .tp = 8, .pp = 4, .cp = 4, .ep = 8,
                    .ep_placement = EpPlacement::kFolded},
             "");
}

TEST_F(ValidateTest, EachRuleInIsolation) {
  ExpectOnly(Layout{.dp = 4, .tp = 8, .pp = 4, .cp = 4, .ep = 4}, "must equal the cluster's 1024");
  ExpectOnly(Layout{.dp = 1, .tp = 16, .pp = 4, .cp = 4, .ep = 4}, "TP must stay inside a node");
  ExpectOnly(Layout{.dp = 4, .tp = 8, .pp = 4, .cp = 2, .ep = 4, .virtual_stages = 1},
             "");
  ExpectOnly(Layout{.dp = 16, .tp = 8, .pp = 8, .cp = 1, .ep = 1, .schedule =
                    Schedule::kInterleaved, .virtual_stages = 2},
             "");
  ExpectOnly(Layout{.dp = 16, .tp = 8, .pp = 8, .cp = 1, .ep = 1, .schedule =
                    Schedule::kInterleaved, .virtual_stages = 3},
             "layers=80 must be divisible by pp*virtual_stages=24");
  ExpectOnly(Layout{.dp = 32, .tp = 8, .pp = 4, .cp = 1, .ep = 1, .mbs = 2, .schedule =
                    Schedule::kInterleaved, .virtual_stages = 2},
             "interleaved schedule needs micro-batches=2 divisible by pp=4");
  ExpectOnly(Layout{.dp = 1, .tp = 8, .pp = 1, .cp = 1, .ep = 128, .mbs = 1}, "");
  ExpectOnly(Layout{.dp = 4, .tp = 8, .pp = 8, .cp = 4, .ep = 1, .mbs = 64},
             "must be divisible by dp*mbs=256");
  ExpectOnly(Layout{.dp = 16, .tp = 8, .pp = 2, .cp = 2, .ep = 2,
                    .ep_placement = EpPlacement::kFolded},
             "must equal the cluster's 1024");
}

TEST_F(ValidateTest, DivisibilityRules) {
  ModelSpec odd = model;
  odd.layers = 81;
  auto v = Validate(odd, cluster, train, Layout{.dp = 2, .tp = 8, .pp = 4, .cp = 4, .ep = 4});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("layers=81"), std::string::npos);
  odd = model;
  odd.moe.experts = 100;
  v = Validate(odd, cluster, train, Layout{.dp = 1, .tp = 8, .pp = 4, .cp = 4, .ep = 8});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("experts=100 must be divisible by ep=8")  , std::string::npos) << v[0];
  TrainSpec short_seq = train;
  short_seq.seq_len = 4000;
  short_seq.global_batch_tokens = 4000 * 128;
  v = Validate(model, cluster, short_seq, Layout{.dp = 2, .tp = 8, .pp = 4, .cp = 4, .ep = 4});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("seq_len=4000 must be divisible by 2*cp*tp=64"), std::string::npos) << v[0];
}

TEST_F(ValidateTest, ReportsEveryViolation) {
  auto v = Validate(model, cluster, train,
                    Layout{.dp = 3, .tp = 16, .pp = 7, .cp = 1, .ep = 3, .mbs = 1});
  EXPECT_GE(v.size(), 5u);
}

TEST_F(ValidateTest, DenseModelRejectsEp) {
  ModelSpec dense = *LoadModel("llama3-70b");
  auto v = Validate(dense, cluster, train, Layout{.dp = 4, .tp = 8, .pp = 4, .cp = 2, .ep = 4});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].find("needs a MoE model"), std::string::npos);
}

}  // namespace
}  // namespace pentamesh::spec

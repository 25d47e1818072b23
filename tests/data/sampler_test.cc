// Sampler: packing, determinism, dp/cp slicing equal to one process, state save/restore/reshard.
#include "data/sampler.h"

#include <gtest/gtest.h>

#include <set>

#include "fixtures.h"

namespace pentamesh::data {
namespace {

using testing::SyntheticDataset;
using testing::WriteSynthetic;

struct Opened {
  SyntheticDataset synthetic;
  Dataset dataset;
};

// ~2,600 tokens over several shards.
const Opened& Data() {
  static Opened* opened = [] {
    SyntheticDataset s = WriteSynthetic(500, 70, 700);
    auto ds = Dataset::Open(s.dir);
    PM_CHECK(ds.ok()) << ds.status().message();
    return new Opened{std::move(s), std::move(ds).value()};
  }();
  return *opened;
}

Sampler Make(SamplerOptions o) {
  auto s = Sampler::Create(Data().dataset, o);
  PM_CHECK(s.ok()) << s.status().message();
  return std::move(s).value();
}

const SamplerOptions kBase{.seq_len = 16, .global_batch_seqs = 8, .seed = 42};

TEST(Sampler, RowsAreStreamWindowsWithShiftedTargets) {
  Sampler s = Make(kBase);
  const auto& stream = Data().synthetic.train_stream;
  EXPECT_EQ(s.windows_per_epoch(), (stream.size() - 1) / 16);
  for (int step = 0; step < 3; ++step) {
    const Batch b = s.Next();
    ASSERT_EQ(b.local_batch_seqs, 8);
    ASSERT_EQ(b.local_seq_len, 16);
    for (int64_t row = 0; row < 8; ++row) {
      const uint64_t w = GlobalWindow(42, true, s.windows_per_epoch(), b.first_sequence + row);
      for (int64_t t = 0; t < 16; ++t) {
        EXPECT_EQ(b.tokens[row * 16 + t], static_cast<int32_t>(stream[w * 16 + t]));
        EXPECT_EQ(b.targets[row * 16 + t], static_cast<int32_t>(stream[w * 16 + t + 1]));
      }
    }
    for (int t = 0; t < 16; ++t) EXPECT_EQ(b.positions[t], t);
  }
}

TEST(Sampler, EachEpochIsAPermutationOfAllWindows) {
  for (uint64_t n : {1ULL, 2ULL, 3ULL, 17ULL, 64ULL, 65ULL, 1000ULL}) {
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::set<uint64_t> seen;
      for (uint64_t p = 0; p < n; ++p) seen.insert(GlobalWindow(9, true, n, epoch * n + p));
      EXPECT_EQ(seen.size(), n);
      EXPECT_LT(*seen.rbegin(), n);
    }
  }
  // Shuffled orders differ between epochs and seeds; unshuffled is the identity.
  auto order = [](uint64_t seed, uint64_t epoch, bool shuffle) {
    std::vector<uint64_t> v;
    for (uint64_t p = 0; p < 100; ++p)
      v.push_back(GlobalWindow(seed, shuffle, 100, epoch * 100 + p));
    return v;
  };
  EXPECT_NE(order(1, 0, true), order(1, 1, true));
  EXPECT_NE(order(1, 0, true), order(2, 0, true));
  EXPECT_EQ(order(1, 0, true), order(1, 0, true));
  for (uint64_t p = 0; p < 100; ++p) EXPECT_EQ(order(5, 2, false)[p], p);
}

TEST(Sampler, DeterministicAcrossInstances) {
  Sampler a = Make(kBase), b = Make(kBase);
  SamplerOptions other = kBase;
  other.seed = 43;
  Sampler c = Make(other);
  bool any_differs = false;
  for (int step = 0; step < 20; ++step) {  // crosses several epochs
    const Batch ba = a.Next(), bb = b.Next(), bc = c.Next();
    EXPECT_EQ(ba.tokens, bb.tokens);
    EXPECT_EQ(ba.targets, bb.targets);
    any_differs = any_differs || ba.tokens != bc.tokens;
  }
  EXPECT_TRUE(any_differs);
}

// The heart of DP equivalence: concatenating ranks' slices gives the dp = 1 batch.
TEST(Sampler, DpSlicesConcatenateToSingleProcessBatch) {
  for (int dp : {2, 4, 8}) {
    Sampler single = Make(kBase);
    std::vector<Sampler> ranks;
    for (int r = 0; r < dp; ++r) {
      SamplerOptions o = kBase;
      o.dp_rank = r;
      o.dp_size = dp;
      ranks.push_back(Make(o));
    }
    for (int step = 0; step < 12; ++step) {
      const Batch full = single.Next();
      std::vector<int32_t> tokens, targets;
      for (int r = 0; r < dp; ++r) {
        const Batch part = ranks[r].Next();
        EXPECT_EQ(part.local_batch_seqs, 8 / dp);
        EXPECT_EQ(part.global_batch_index, full.global_batch_index);
        tokens.insert(tokens.end(), part.tokens.begin(), part.tokens.end());
        targets.insert(targets.end(), part.targets.begin(), part.targets.end());
      }
      EXPECT_EQ(tokens, full.tokens) << "dp=" << dp << " step " << step;
      EXPECT_EQ(targets, full.targets) << "dp=" << dp << " step " << step;
    }
  }
}

TEST(Sampler, CpChunksReassembleTheSequence) {
  const int cp = 2;
  Sampler full = Make(kBase);
  std::vector<Sampler> ranks;
  for (int r = 0; r < cp; ++r) {
    SamplerOptions o = kBase;
    o.cp_rank = r;
    o.cp_size = cp;
    ranks.push_back(Make(o));
  }
  // rank 0 holds chunks 0 and 3 (positions 0-3, 12-15); rank 1 chunks 1 and 2.
  const std::vector<int32_t> want0 = {0, 1, 2, 3, 12, 13, 14, 15};
  for (int step = 0; step < 4; ++step) {
    const Batch f = full.Next();
    std::vector<int32_t> tokens(f.tokens.size(), -1), targets(f.targets.size(), -1);
    for (int r = 0; r < cp; ++r) {
      const Batch p = ranks[r].Next();
      ASSERT_EQ(p.local_seq_len, 8);
      if (r == 0) {
        EXPECT_EQ(p.positions, want0);
      }
      for (int64_t row = 0; row < p.local_batch_seqs; ++row) {
        for (int64_t t = 0; t < p.local_seq_len; ++t) {
          tokens[row * 16 + p.positions[t]] = p.tokens[row * 8 + t];
          targets[row * 16 + p.positions[t]] = p.targets[row * 8 + t];
        }
      }
    }
    EXPECT_EQ(tokens, f.tokens);
    EXPECT_EQ(targets, f.targets);
  }
}

TEST(Sampler, SaveRestoreResumesExactly) {
  Sampler a = Make(kBase);
  for (int i = 0; i < 5; ++i) a.Next();
  const std::string saved = SamplerStateToJson(a.state());
  std::vector<Batch> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(a.Next());

  auto state = SamplerStateFromJson(saved);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->next_sequence, 40u);
  Sampler b = Make(kBase);
  ASSERT_TRUE(b.Restore(*state).ok());
  for (int i = 0; i < 10; ++i) {
    const Batch got = b.Next();
    EXPECT_EQ(got.tokens, expected[i].tokens);
    EXPECT_EQ(got.first_sequence, expected[i].first_sequence);
  }
}

// Checkpoint at dp = 2, resume at dp = 4: the union continues at the next unseen sequence.
TEST(Sampler, ReshardDp2ToDp4ContinuesAtNextUnseenSequence) {
  std::vector<Sampler> dp2;
  for (int r = 0; r < 2; ++r) {
    SamplerOptions o = kBase;
    o.dp_rank = r;
    o.dp_size = 2;
    dp2.push_back(Make(o));
  }
  for (int step = 0; step < 7; ++step) {
    for (auto& s : dp2) s.Next();
  }
  const std::string saved = SamplerStateToJson(dp2[0].state());
  EXPECT_EQ(saved, SamplerStateToJson(dp2[1].state()));  // the state is rank-independent

  Sampler reference = Make(kBase);  // dp = 1, uninterrupted
  for (int step = 0; step < 7; ++step) reference.Next();
  std::vector<Sampler> dp4;
  for (int r = 0; r < 4; ++r) {
    SamplerOptions o = kBase;
    o.dp_rank = r;
    o.dp_size = 4;
    dp4.push_back(Make(o));
    ASSERT_TRUE(dp4.back().Restore(*SamplerStateFromJson(saved)).ok());
  }
  for (int step = 0; step < 5; ++step) {
    const Batch full = reference.Next();
    std::vector<int32_t> tokens;
    for (auto& s : dp4) {
      const Batch part = s.Next();
      tokens.insert(tokens.end(), part.tokens.begin(), part.tokens.end());
    }
    EXPECT_EQ(tokens, full.tokens) << "step " << step;
    EXPECT_EQ(full.first_sequence, (7 + step) * 8);
  }
}

TEST(Sampler, RestoreRejectsADifferentOrder) {
  Sampler a = Make(kBase);
  a.Next();
  SamplerOptions other = kBase;
  other.seed = 1;
  Sampler b = Make(other);
  core::Status st = b.Restore(a.state());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("seed"), std::string::npos) << st.message();
  other = kBase;
  other.seq_len = 8;
  Sampler c = Make(other);
  st = c.Restore(a.state());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("seq_len"), std::string::npos) << st.message();
  SamplerState changed = a.state();
  changed.windows_per_epoch += 1;
  st = Make(kBase).Restore(changed);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("windows_per_epoch"), std::string::npos) << st.message();
  changed = a.state();
  changed.data_fingerprint ^= 1;
  st = Make(kBase).Restore(changed);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("data_fingerprint"), std::string::npos) << st.message();
  // The same windows over other tokens: a dataset with equal length but different content.
  const testing::SyntheticDataset other_data = testing::WriteSynthetic(499, 70, 700);
  auto other_ds = Dataset::Open(other_data.dir);
  ASSERT_TRUE(other_ds.ok());
  auto d = Sampler::Create(*other_ds, kBase);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->windows_per_epoch(), a.windows_per_epoch());
  st = d->Restore(a.state());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("data_fingerprint"), std::string::npos) << st.message();
  EXPECT_FALSE(SamplerStateFromJson("{\"version\":1}").ok());
  EXPECT_FALSE(SamplerStateFromJson("not json").ok());
}

TEST(Sampler, BadOptionsNameTheField) {
  auto expect = [](SamplerOptions o, const std::string& field) {
    auto s = Sampler::Create(Data().dataset, o);
    ASSERT_FALSE(s.ok()) << field;
    EXPECT_NE(s.status().message().find(field), std::string::npos) << s.status().message();
  };
  SamplerOptions o = kBase;
  o.seq_len = 0;
  expect(o, "seq_len");
  o = kBase;
  o.global_batch_seqs = 0;
  expect(o, "global_batch_seqs");
  o = kBase;
  o.dp_size = 3;
  expect(o, "divisible by dp_size");
  o = kBase;
  o.dp_rank = 2;
  o.dp_size = 2;
  expect(o, "dp_rank");
  o = kBase;
  o.cp_size = 3;
  expect(o, "2*cp_size");
  o = kBase;
  o.seq_len = 1 << 20;
  expect(o, "too few");
  o = kBase;
  o.split = Split::kHeldout;  // the synthetic dataset has no heldout tokens
  expect(o, "heldout");
}

}  // namespace
}  // namespace pentamesh::data

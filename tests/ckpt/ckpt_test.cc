// Checkpoint format and fault tests without a model: CRC32C's check value, safetensors round trip
// and rejection of damaged files, a 2-rank save (two threads with a real barrier) resharded into
// 1 and 4 ranks and a different sharded dim, atomic publish with retention, disk-full injection
// that leaves the previous checkpoint whole, and damaged files found by checksum on resume.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ckpt/checkpoint.h"
#include "ckpt/crc32c.h"
#include "ckpt/owner.h"
#include "ckpt/safetensors.h"
#include "core/rng.h"
#include "data/fixtures.h"

namespace pentamesh::ckpt {
namespace {
namespace fs = std::filesystem;
using model::MeshAxis;
using model::ParamSet;
using model::Sharding;

TEST(Crc32c, CheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cExtend(Crc32c("1234", 4), "56789", 5), 0xE3069283u);
}

TEST(Safetensors, RoundTripAndRejects) {
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const int32_t b[2] = {7, -8};
  const std::string file = EncodeSafetensors(
      {{"a", "F32", {2, 3}, std::string_view(reinterpret_cast<const char*>(a), sizeof(a))},
       {"b", "I32", {2}, std::string_view(reinterpret_cast<const char*>(b), sizeof(b))}},
      {{"format", "pt"}});
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  auto parsed = ParseSafetensors(file, "x");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_NE(parsed->Find("a"), nullptr);
  EXPECT_EQ(parsed->Find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(parsed->Find("a")->data.data(), a, sizeof(a)), 0);
  EXPECT_EQ(parsed->metadata.at("format"), "pt");
  // Truncated data, truncated header, garbage header.
  EXPECT_NE(
      ParseSafetensors(file.substr(0, file.size() - 1), "x").status().message().find("truncated"),
      std::string::npos);
  EXPECT_FALSE(ParseSafetensors(file.substr(0, 12), "x").ok());
  EXPECT_FALSE(ParseSafetensors(std::string(16, '\xff'), "x").ok());
  std::string bad = file;
  bad[9] = '[';
  EXPECT_FALSE(ParseSafetensors(bad, "x").ok());
}

// Fills a ParamSet's master/m/v from the global index so any shard's expected value is known.
float Expected(const std::string& name, int which, int64_t global_index) {
  return static_cast<float>(
      core::CounterRng::Normal(which, core::HashName(name), static_cast<uint64_t>(global_index)));
}

// Params of a toy model: w1 [8, 6] sharded on dim 0, w2 [6, 8] on dim 1, e [4, 3, 2] on dim 0
// (expert axis), norm [6] replicated.
std::unique_ptr<ParamSet> MakeParams(core::Allocator& alloc, int64_t tp, int64_t tp_rank,
                                     int w1_dim = 0) {
  auto p = std::make_unique<ParamSet>(alloc, core::Dtype::kF32);
  p->Add("w1", {8, 6}, Sharding{w1_dim, MeshAxis::kTp, tp, tp_rank}, {}, true);
  p->Add("w2", {6, 8}, Sharding{1, MeshAxis::kTp, tp, tp_rank}, {}, true);
  p->Add("e", {4, 3, 2}, Sharding{0, MeshAxis::kEp, tp, tp_rank}, {}, true);
  p->Add("norm", {6}, Sharding{}, {}, false);
  p->Finalize();
  p->ForEach([](const model::ParamInfo& info, core::Tensor master, core::Tensor, core::Tensor m,
                core::Tensor v) {
    for (int64_t i = 0; i < info.numel(); ++i) {
      const int64_t g = model::GlobalIndex(info, i);
      master.f32()[i] = Expected(info.name, 0, g);
      m.f32()[i] = Expected(info.name, 1, g);
      v.f32()[i] = Expected(info.name, 2, g);
    }
  });
  return p;
}

void ExpectMatchesGlobal(ParamSet& p) {
  int64_t checked = 0;
  p.ForEach([&](const model::ParamInfo& info, core::Tensor master, core::Tensor, core::Tensor m,
                core::Tensor v) {
    for (int64_t i = 0; i < info.numel(); ++i) {
      const int64_t g = model::GlobalIndex(info, i);
      ASSERT_EQ(master.f32()[i], Expected(info.name, 0, g)) << info.name << " " << i;
      ASSERT_EQ(m.f32()[i], Expected(info.name, 1, g)) << info.name;
      ASSERT_EQ(v.f32()[i], Expected(info.name, 2, g)) << info.name;
      ++checked;
    }
  });
  EXPECT_EQ(checked, p.numel());
}

// Saves `world` ranks' shards concurrently (one thread per rank, a barrier as the collective).
core::Status SaveRanks(const std::string& root, int64_t step, int world, int keep = 3,
                       Env* env = nullptr) {
  std::barrier sync(world);
  std::atomic<bool> all{true};
  std::vector<core::Status> status(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      core::Allocator alloc;
      auto p = MakeParams(alloc, world, r);
      Snapshot s{.step = step,
                 .rank = r,
                 .world = world,
                 .state = {{"step", step}},
                 .tensors = SnapshotParams(*p)};
      SaveOptions o{.root = root, .keep = keep, .env = env, .all_ok = [&](bool ok) {
                      if (!ok) all = false;
                      sync.arrive_and_wait();
                      const bool result = all.load();
                      sync.arrive_and_wait();
                      return result;
                    }};
      status[static_cast<size_t>(r)] = SaveCheckpoint(o, s);
    });
  }
  for (auto& t : threads) t.join();
  return status[0];
}

TEST(Checkpoint, ReshardTwoRanksToOneFourAndAnotherDim) {
  const std::string root = data::testing::MakeTempDir("ckpt_reshard");
  ASSERT_TRUE(SaveRanks(root, 10, 2).ok());
  auto c = Checkpoint::Open(root + "/step-00000010");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->manifest()["tensors"]["w1"]["slices"].size(), 2u);
  EXPECT_EQ(c->manifest()["tensors"]["norm"]["slices"].size(), 2u);  // replicas, deduplicated
  for (int64_t tp : {1, 4, 2}) {
    for (int64_t r = 0; r < tp; ++r) {
      core::Allocator alloc;
      auto p = MakeParams(alloc, tp, r, /*w1_dim=*/tp == 2 ? 1 : 0);
      p->Init(99);  // overwritten by the restore
      ASSERT_TRUE(RestoreParams(*c, *p).ok());
      ExpectMatchesGlobal(*p);
    }
  }
  core::Allocator alloc;
  ParamSet other(alloc, core::Dtype::kF32);
  other.Add("w1", {8, 7}, Sharding{}, {}, true);
  other.Finalize();
  const core::Status st = RestoreParams(*c, other);
  EXPECT_NE(st.message().find("tensor 'w1'"), std::string::npos) << st.message();
}

// Every flat range of small tensors: the boxes tile it in order, each box's row-major elements
// are the flat elements [flat_begin, flat_begin + numel), and there are at most 2 * rank - 1.
TEST(FlatRangeBoxes, TileEveryRange) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{7}, {3, 4}, {2, 3, 4}, {3, 1, 2, 2}}) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    for (int64_t b = 0; b <= numel; ++b) {
      for (int64_t e = b; e <= numel; ++e) {
        const std::vector<Box> boxes = FlatRangeBoxes(shape, b, e);
        EXPECT_LE(boxes.size(), 2 * shape.size() - 1);
        int64_t next = b;
        for (const Box& box : boxes) {
          ASSERT_EQ(box.flat_begin, next);
          // Walk the box row-major; each element's flat index must be the next one.
          std::vector<int64_t> idx(box.start);
          for (bool more = true; more;) {
            int64_t flat = 0;
            for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
            ASSERT_EQ(flat, next) << "range [" << b << ", " << e << ")";
            ++next;
            int d = static_cast<int>(shape.size()) - 1;
            while (d >= 0 &&
                   ++idx[static_cast<size_t>(d)] ==
                       box.start[static_cast<size_t>(d)] + box.shape[static_cast<size_t>(d)]) {
              idx[static_cast<size_t>(d)] = box.start[static_cast<size_t>(d)];
              --d;
            }
            more = d >= 0;
          }
        }
        EXPECT_EQ(next, e) << "range [" << b << ", " << e << ")";
      }
    }
  }
}

// ZeRO-style shards: a [5, 7] tensor cut into flat ranges, each stored as boxes under keys
// w#0, w#1, ... in one file; reading any box back gathers across them.
TEST(Checkpoint, FlatRangeSlicesUnderKeysReadBack) {
  const std::string root = data::testing::MakeTempDir("ckpt_keys");
  std::vector<float> w(35);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f;
  Snapshot s{.step = 3, .rank = 0, .world = 1, .state = {{"step", 3}}, .tensors = {}};
  int key = 0;
  for (auto [b, e] : {std::pair{0, 9}, {9, 23}, {23, 35}}) {
    for (const Box& box : FlatRangeBoxes({5, 7}, b, e)) {
      int64_t n = 1;
      for (int64_t d : box.shape) n *= d;
      s.tensors.push_back({.name = "w",
                           .key = fmt::format("w#{}", key++),
                           .dtype = "F32",
                           .global_shape = {5, 7},
                           .start = box.start,
                           .shape = box.shape,
                           .bytes = std::string(reinterpret_cast<const char*>(
                                                    &w[static_cast<size_t>(box.flat_begin)]),
                                                static_cast<size_t>(n) * sizeof(float))});
    }
  }
  ASSERT_TRUE(SaveCheckpoint({.root = root, .keep = 1, .env = nullptr, .all_ok = {}}, s).ok());
  auto c = Checkpoint::Open(root + "/step-00000003");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::vector<float> all(35), box(6);
  ASSERT_TRUE(c->ReadRegion("w", {5, 7}, {0, 0}, {5, 7}, all.data()).ok());
  EXPECT_EQ(all, w);
  ASSERT_TRUE(c->ReadRegion("w", {5, 7}, {1, 2}, {3, 2}, box.data()).ok());
  EXPECT_EQ(box, (std::vector<float>{w[9], w[10], w[16], w[17], w[23], w[24]}));
}

TEST(Checkpoint, AtomicPublishAndRetention) {
  const std::string root = data::testing::MakeTempDir("ckpt_keep");
  for (int64_t step : {1, 2, 3, 4}) ASSERT_TRUE(SaveRanks(root, step, 1, /*keep=*/2).ok());
  const std::vector<std::string> dirs = ListCheckpoints(root);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(fs::path(dirs[0]).filename(), "step-00000004");
  EXPECT_EQ(fs::path(dirs[1]).filename(), "step-00000003");
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(Checkpoint, RetentionKeepsTheFreshCheckpointOfAResumedRun) {
  const std::string root = data::testing::MakeTempDir("ckpt_keep_resumed");
  ASSERT_TRUE(SaveRanks(root, 4, 1, /*keep=*/2).ok());
  ASSERT_TRUE(SaveRanks(root, 6, 1, /*keep=*/2).ok());
  ASSERT_TRUE(SaveRanks(root, 2, 1, /*keep=*/1).ok());  // a run resumed from an older state
  const std::vector<std::string> dirs = ListCheckpoints(root);
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(fs::path(dirs[0]).filename(), "step-00000002");
}

TEST(Checkpoint, DiskFullLeavesPreviousWhole) {
  const std::string root = data::testing::MakeTempDir("ckpt_full");
  ASSERT_TRUE(SaveRanks(root, 5, 2).ok());
  for (int64_t capacity : {0, 100, 3000}) {
    FaultEnv full(capacity);
    const core::Status st = SaveRanks(root, 6, 2, 3, &full);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("No space left on device"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("step-00000005 is intact"), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(root + "/step-00000006"));
    EXPECT_FALSE(fs::exists(root + "/step-00000006.tmp"));
    auto r = ResolveResume("auto", root, [](const std::string& m) { ADD_FAILURE() << m; });
    ASSERT_TRUE(r.ok() && r->has_value());
    EXPECT_EQ((*r)->step(), 5);
  }
}

void Damage(const std::string& path, bool truncate) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (truncate) {
    bytes.resize(bytes.size() / 2);
  } else {
    bytes[bytes.size() - 5] ^= 0x40;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Checkpoint, DamagedFileFoundByChecksumFallsBack) {
  for (bool truncate : {false, true}) {
    const std::string root = data::testing::MakeTempDir("ckpt_damage");
    ASSERT_TRUE(SaveRanks(root, 7, 2).ok());
    ASSERT_TRUE(SaveRanks(root, 8, 2).ok());
    const std::string victim = root + "/step-00000008/rank-00001.safetensors";
    Damage(victim, truncate);
    std::vector<std::string> logs;
    auto r = ResolveResume("auto", root, [&](const std::string& m) { logs.push_back(m); });
    ASSERT_TRUE(r.ok() && r->has_value());
    EXPECT_EQ((*r)->step(), 7);
    ASSERT_EQ(logs.size(), 1u);
    EXPECT_NE(logs[0].find(victim), std::string::npos) << logs[0];
    EXPECT_NE(logs[0].find(truncate ? "truncated" : "CRC32C"), std::string::npos) << logs[0];
    // An explicit path to the damaged checkpoint is an error, not a fallback.
    EXPECT_FALSE(ResolveResume(root + "/step-00000008", root, {}).ok());
  }
}

// Every checkpoint damaged (a flipped byte, a truncated file, a step directory without its
// manifest): --resume auto is an error naming each, not a restart from step 0, and nothing is
// removed or renamed.
TEST(Checkpoint, EveryCheckpointDamagedIsAnErrorAndNothingIsRemoved) {
  const std::string root = data::testing::MakeTempDir("ckpt_all_damaged");
  ASSERT_TRUE(SaveRanks(root, 2, 1).ok());
  ASSERT_TRUE(SaveRanks(root, 4, 1).ok());
  ASSERT_TRUE(SaveRanks(root, 6, 1).ok());
  Damage(root + "/step-00000006/rank-00000.safetensors", false);
  Damage(root + "/step-00000004/rank-00000.safetensors", true);
  fs::remove(root + "/step-00000002/manifest.json");
  std::vector<std::string> logs, damaged;
  auto r = ResolveResume(
      "auto", root, [&](const std::string& m) { logs.push_back(m); }, &damaged);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("every checkpoint under " + root + " is damaged"),
            std::string::npos)
      << r.status().message();
  for (const char* step : {"step-00000006", "step-00000004", "step-00000002"}) {
    EXPECT_NE(r.status().message().find(root + "/" + step), std::string::npos) << step;
    EXPECT_TRUE(fs::exists(root + "/" + step)) << step;
  }
  EXPECT_EQ(logs.size(), 3u);
  // An empty root is still a fresh start.
  auto empty = ResolveResume("auto", data::testing::MakeTempDir("ckpt_none"), {});
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

// Recovery passes over the damaged newest checkpoint and sets it aside: the resumed run's saves
// (the same step number again, then pruning with keep=1) never remove it.
TEST(Checkpoint, DamagedCheckpointSetAsideIsNeverPruned) {
  const std::string root = data::testing::MakeTempDir("ckpt_set_aside");
  ASSERT_TRUE(SaveRanks(root, 4, 1).ok());
  ASSERT_TRUE(SaveRanks(root, 6, 1).ok());
  const std::string victim = root + "/step-00000006/rank-00000.safetensors";
  Damage(victim, false);
  std::string damaged_bytes;
  {
    std::ifstream in(victim, std::ios::binary);
    damaged_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<std::string> damaged;
  auto r = ResolveResume(
      "auto", root, [](const std::string&) {}, &damaged);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->step(), 4);
  ASSERT_EQ(damaged, std::vector<std::string>{root + "/step-00000006"});
  const auto moved = SetAsideDamaged(damaged);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, std::vector<std::string>{root + "/step-00000006.damaged"});
  for (int64_t step : {5, 6, 7, 8}) ASSERT_TRUE(SaveRanks(root, step, 1, /*keep=*/1).ok());
  EXPECT_EQ(ListCheckpoints(root), std::vector<std::string>{root + "/step-00000008"});
  std::ifstream in(root + "/step-00000006.damaged/rank-00000.safetensors", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), damaged_bytes);
}

// A run owns its checkpoint root: the owner file holds its id; a fresh run in an occupied root
// is refused naming the owner; a resume continues the id; --overwrite replaces the old run.
TEST(CheckpointOwner, FreshRunRefusedResumeContinuesOverwriteReplaces) {
  const std::string root = data::testing::MakeTempDir("ckpt_owner") + "/ckpt";
  auto first = ClaimRoot(root, {});
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->size(), 16u);
  std::ifstream owner(root + "/" + kOwnerFile);
  std::string line;
  std::getline(owner, line);
  EXPECT_EQ(line, *first);
  ASSERT_TRUE(SaveRanks(root, 4, 1).ok());
  auto again = ClaimRoot(root, {});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("holds the checkpoints of run " + *first),
            std::string::npos)
      << again.status().message();
  EXPECT_NE(again.status().message().find("newest " + root + "/step-00000004"), std::string::npos)
      << again.status().message();
  EXPECT_TRUE(fs::exists(root + "/step-00000004/manifest.json"));
  auto resumed = ClaimRoot(root, {.resume = true, .overwrite = false, .env = nullptr});
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(*resumed, *first);
  auto replaced = ClaimRoot(root, {.resume = false, .overwrite = true, .env = nullptr});
  ASSERT_TRUE(replaced.ok());
  EXPECT_NE(*replaced, *first);
  EXPECT_TRUE(ListStepDirs(root).empty());
  EXPECT_FALSE(fs::exists(root + "/latest"));
}

TEST(CheckpointOwner, LegacyRootAdoptedOnResumeRefusedWhenFresh) {
  const std::string root = data::testing::MakeTempDir("ckpt_owner_legacy");
  ASSERT_TRUE(SaveRanks(root, 2, 1).ok());  // saved before run ids: no owner file
  auto fresh = ClaimRoot(root, {});
  ASSERT_FALSE(fresh.ok());
  EXPECT_NE(fresh.status().message().find("no owner file"), std::string::npos)
      << fresh.status().message();
  auto resumed = ClaimRoot(root, {.resume = true, .overwrite = false, .env = nullptr});
  ASSERT_TRUE(resumed.ok());
  EXPECT_TRUE(fs::exists(root + "/" + kOwnerFile));
}

TEST(CheckpointOwner, BadRootsNamed) {
  const std::string dir = data::testing::MakeTempDir("ckpt_owner_bad");
  std::ofstream(dir + "/file") << "x";
  auto file = ClaimRoot(dir + "/file", {});
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find(dir + "/file exists and is not a directory"),
            std::string::npos)
      << file.status().message();
  fs::create_directories(dir + "/root");
  std::ofstream(dir + "/root/" + kOwnerFile) << "not an id\n";
  auto bad = ClaimRoot(dir + "/root", {.resume = true, .overwrite = false, .env = nullptr});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("should hold a run id"), std::string::npos)
      << bad.status().message();
}

TEST(Checkpoint, AsyncSaverWritesTheSnapshotNotLaterValues) {
  const std::string root = data::testing::MakeTempDir("ckpt_async");
  core::Allocator alloc;
  auto p = MakeParams(alloc, 1, 0);
  AsyncSaver saver({.root = root, .keep = 2, .env = nullptr, .all_ok = {}}, /*async=*/true);
  ASSERT_TRUE(saver.Save({.step = 1, .tensors = SnapshotParams(*p)}).ok());
  p->master(0).f32()[0] = 1234.5f;  // training continues while the save runs
  ASSERT_TRUE(saver.Wait().ok());
  auto c = Checkpoint::Open(root + "/step-00000001");
  ASSERT_TRUE(c.ok());
  core::Allocator alloc2;
  auto q = MakeParams(alloc2, 1, 0);
  ASSERT_TRUE(RestoreParams(*c, *q).ok());
  ExpectMatchesGlobal(*q);
}

}  // namespace
}  // namespace pentamesh::ckpt

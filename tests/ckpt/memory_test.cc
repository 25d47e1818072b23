// In-memory checkpoint copies on one process (ckpt/memory_copy.h, train/memory_checkpoint.h),
// with a temp directory standing in for /dev/shm: the files round-trip, only the newest complete
// step is kept, a fresh trainer restored from the copy continues bitwise like the straight run,
// a copy with a flipped byte (or none) falls back to the durable checkpoint, a durable checkpoint
// newer than the copy wins, a clean finish removes the copies; the partner rule, the ranks-per-node
// variables and the config keys.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint.h"
#include "ckpt/memory_copy.h"
#include "ckpt/owner.h"
#include "data/fixtures.h"
#include "testing/run_toml.h"
#include "train/checkpoint_state.h"
#include "train/memory_checkpoint.h"
#include "train/run_config.h"
#include "train/run_loop.h"

namespace pentamesh::ckpt {
namespace {
namespace fs = std::filesystem;
using train::MemoryCheckpointer;

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(MemoryCopy, FilesRoundTripAndOnlyTheKeptStepStays) {
  const std::string root = data::testing::MakeTempDir("memcopy_files") + "/job/rank-00000";
  const Files files = {{"a.bin", std::string("\0\1\2", 3)}, {"manifest.json", "{}"}};
  ASSERT_TRUE(PublishFiles(root, 3, files).ok());
  ASSERT_TRUE(PublishFiles(root, 4, files).ok());
  EXPECT_EQ(Entries(root), (std::vector<std::string>{"latest", "step-00000003", "step-00000004"}));
  auto back = ReadDirFiles(root + "/step-00000004");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, files);
  ASSERT_TRUE(KeepOnly(root, 4).ok());
  EXPECT_EQ(Entries(root), (std::vector<std::string>{"latest", "step-00000004"}));
  auto unpacked = UnpackFiles(PackFiles(files), "test");
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
  EXPECT_EQ(*unpacked, files);
}

TEST(MemoryCopy, UnpackRefusesDamage) {
  const std::string packed = PackFiles({{"x", "12345"}});
  auto cut = UnpackFiles(packed.substr(0, packed.size() - 1), "rank 2's copy");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("rank 2's copy: truncated"), std::string::npos)
      << cut.status().message();
  auto bad = UnpackFiles(PackFiles({{"../x", "1"}}), "rank 2's copy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad file name '../x'"), std::string::npos);
  EXPECT_FALSE(UnpackFiles(packed + "z", "t").ok());
}

TEST(MemoryCopy, JobKeyFollowsTheCheckpointRoot) {
  EXPECT_EQ(MemoryJobKey("/a/b/ckpt"), MemoryJobKey("/a/b/../b/./ckpt"));
  EXPECT_NE(MemoryJobKey("/a/b/ckpt"), MemoryJobKey("/a/c/ckpt"));
  EXPECT_EQ(MemoryJobKey("/a/b/ckpt").size(), 8u);
  EXPECT_EQ(MemoryKeyProblem("job-7.a_b"), "");
  EXPECT_NE(MemoryKeyProblem("a/b"), "");
  EXPECT_NE(MemoryKeyProblem(".hidden"), "");
  EXPECT_NE(MemoryKeyProblem(""), "");
  EXPECT_EQ(OwnCopyRoot(MemoryJobDir("/dev/shm", "k"), 3), "/dev/shm/pentamesh-k/rank-00003");
  EXPECT_EQ(HeldCopyRoot(MemoryJobDir("/dev/shm", "k"), 1),
            "/dev/shm/pentamesh-k/partner-of-00001");
}

// 4 ranks on 2 nodes: 0 <-> 2, 1 <-> 3; 6 ranks on 3 nodes: a ring of nodes; one node: none.
TEST(MemoryCopy, PartnerRule) {
  EXPECT_EQ(train::MemoryPartner(0, 2, 4), 2);
  EXPECT_EQ(train::MemoryPartner(3, 2, 4), 1);
  EXPECT_EQ(train::MemoryHeldFor(1, 2, 4), 3);
  EXPECT_EQ(train::MemoryPartner(5, 2, 6), 1);
  EXPECT_EQ(train::MemoryHeldFor(1, 2, 6), 5);
  EXPECT_EQ(train::MemoryHeldFor(0, 2, 6), 4);
  for (int r = 0; r < 6; ++r)
    EXPECT_EQ(train::MemoryHeldFor(train::MemoryPartner(r, 2, 6), 2, 6), r);
  EXPECT_EQ(train::MemoryPartner(0, 4, 4), -1);
  EXPECT_EQ(train::MemoryHeldFor(0, 8, 4), -1);
}

TEST(MemoryCopy, RanksPerNodeFromTheLauncher) {
  // This test's process was not started by mpirun: only the variables set here count.
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::unsetenv("SLURM_NTASKS_PER_NODE");
  ::unsetenv("PENTAMESH_RANKS_PER_NODE");
  EXPECT_EQ(*train::RanksPerNode(8), 8);
  ::setenv("SLURM_NTASKS_PER_NODE", "4", 1);
  EXPECT_EQ(*train::RanksPerNode(8), 4);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_EQ(*train::RanksPerNode(8), 2);
  ::setenv("PENTAMESH_RANKS_PER_NODE", "x2", 1);
  auto bad = train::RanksPerNode(8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PENTAMESH_RANKS_PER_NODE=x2: ranks per node must be"),
            std::string::npos);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::unsetenv("SLURM_NTASKS_PER_NODE");
  ::unsetenv("PENTAMESH_RANKS_PER_NODE");
}

TEST(MemoryCopy, ConfigKeysChecked) {
  const std::string toml = testing::RunTomlText({.dataset = data::testing::Corpus().dataset});
  auto no_dir = train::RunConfigFromToml(toml, "t.toml", {"ckpt.memory_interval=2"});
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find("ckpt.memory_interval: in-memory copies need ckpt.dir"),
            std::string::npos)
      << no_dir.status().message();
  auto bad_key = train::RunConfigFromToml(toml, "t.toml", {"ckpt.memory_key=\"a b\""});
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find("ckpt.memory_key: 'a b' character ' '"),
            std::string::npos)
      << bad_key.status().message();
  EXPECT_FALSE(train::RunConfigFromToml(toml, "t.toml", {"ckpt.memory_interval=-1"}).ok());
}

// --- the trainer side, one process ---

struct Recorder final : train::RunObserver {
  std::vector<double> losses;
  std::vector<std::string> infos, warnings;
  void OnInfo(const std::string& m) override { infos.push_back(m); }
  void OnWarning(const std::string& m) override { warnings.push_back(m); }
  void OnStep(const train::StepStats& s, int64_t, double, bool) override {
    losses.push_back(s.loss);
  }
  bool Said(const std::string& part) const {
    for (const auto& v : {infos, warnings})
      for (const std::string& m : v)
        if (m.find(part) != std::string::npos) return true;
    return false;
  }
};

class MemoryCkpt : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = data::testing::MakeTempDir("memckpt");
    shm_ = dir_ + "/shm";
    fs::create_directories(shm_);
    sets_ = {"run.steps=8",      "run.eval_every=0",       "ckpt.dir=\"" + dir_ + "/ckpt\"",
             "ckpt.async=false", "ckpt.memory_interval=1", "ckpt.memory_key=\"unit\""};
    toml_ = testing::RunTomlText({.dataset = data::testing::Corpus().dataset});
    // The run that saves the copies owns ckpt.dir; a --resume auto continues its id.
    auto claimed = ClaimRoot(dir_ + "/ckpt", {.resume = false, .overwrite = false, .env = nullptr});
    ASSERT_TRUE(claimed.ok()) << claimed.status().message();
    run_id_ = *claimed;
    auto straight = Make({"ckpt.memory_interval=0", "ckpt.dir=\"\""});
    for (int i = 0; i < 8; ++i) want_.push_back(straight->Step().loss);
  }
  std::unique_ptr<train::Trainer> Make(const std::vector<std::string>& more = {}) {
    std::vector<std::string> sets = sets_;
    sets.insert(sets.end(), more.begin(), more.end());
    auto c = train::RunConfigFromToml(toml_, "test.toml", sets);
    EXPECT_TRUE(c.ok()) << c.status().message();
    auto t = train::Trainer::Create(*c);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return std::move(*t);
  }
  MemoryCheckpointer Memory(const train::Trainer& t) {
    auto m = MemoryCheckpointer::Create(t, nullptr, shm_, run_id_, [](const std::string&) {});
    EXPECT_TRUE(m.ok()) << m.status().message();
    return std::move(*m);
  }
  // Trains `steps` steps with an in-memory copy after each, and a durable checkpoint at
  // `durable_step` (0: none).
  void TrainWithCopies(int steps, int durable_step) {
    auto t = Make();
    MemoryCheckpointer m = Memory(*t);
    for (int i = 1; i <= steps; ++i) {
      t->Step();
      ASSERT_TRUE(m.Save(*t).ok());
      if (i == durable_step) {
        ASSERT_TRUE(
            SaveCheckpoint({.root = dir_ + "/ckpt", .keep = 3, .env = nullptr, .all_ok = {}},
                           train::TrainerSnapshot(*t))
                .ok());
      }
    }
  }
  // RunTraining with --resume auto on a fresh trainer; returns its observer.
  Recorder ResumeAuto() {
    Recorder rec;
    auto t = Make();
    auto run = train::RunTraining(
        *t, {.resume = "auto", .trace = "", .world = nullptr, .shm_root = shm_}, &rec);
    EXPECT_TRUE(run.ok()) << run.status().message();
    return rec;
  }
  std::string Job() const { return MemoryJobDir(shm_, "unit") + "/run-" + run_id_; }

  std::string dir_, shm_, toml_, run_id_;
  std::vector<std::string> sets_;
  std::vector<double> want_;
};

// Only the newest step is kept; a fresh trainer restored from it continues bitwise; on one node
// nothing is held for a partner; a clean finish removes the job directory.
TEST_F(MemoryCkpt, RestoresNewestCopyBitwise) {
  ASSERT_NO_FATAL_FAILURE(TrainWithCopies(5, 0));
  EXPECT_EQ(Entries(Job()), std::vector<std::string>{"rank-00000"});
  EXPECT_EQ(Entries(OwnCopyRoot(Job(), 0)), (std::vector<std::string>{"latest", "step-00000005"}));
  // The copy is a verified one-rank checkpoint holding the whole state of this rank.
  auto copy = Checkpoint::Open(OwnCopyRoot(Job(), 0) + "/step-00000005");
  ASSERT_TRUE(copy.ok()) << copy.status().message();
  EXPECT_EQ(copy->manifest()["world"], 1);
  EXPECT_EQ(copy->state()["memory"]["rank"], 0);
  const Recorder rec = ResumeAuto();
  EXPECT_TRUE(
      rec.Said("resumed from memory (" + Job() + ") at step 5: every rank from its own copy"))
      << (rec.infos.empty() ? "" : rec.infos.back());
  ASSERT_EQ(rec.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rec.losses[i], want_[i + 5]) << "step " << i + 6;
  EXPECT_FALSE(fs::exists(Job())) << "a clean finish leaves no copies";
}

// A flipped byte in the copy: reported by file (CRC32C), and the durable checkpoint is used.
TEST_F(MemoryCkpt, CorruptCopyFallsBackToDurable) {
  ASSERT_NO_FATAL_FAILURE(TrainWithCopies(5, 4));
  const std::string victim = OwnCopyRoot(Job(), 0) + "/step-00000005/rank-00000.safetensors";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x5a');
  }
  const Recorder rec = ResumeAuto();
  EXPECT_TRUE(rec.Said(victim + ": CRC32C")) << fmt::format("{}", fmt::join(rec.warnings, "\n"));
  EXPECT_TRUE(rec.Said("resumed from " + dir_ + "/ckpt/step-00000004 at step 4 (durable"));
  ASSERT_EQ(rec.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(rec.losses[i], want_[i + 4]) << "step " << i + 5;
}

// A durable checkpoint newer than the copy wins (the copy is from an earlier run's crash).
TEST_F(MemoryCkpt, NewerDurableCheckpointWins) {
  ASSERT_NO_FATAL_FAILURE(TrainWithCopies(3, 0));
  {
    auto t = Make();
    for (int i = 0; i < 6; ++i) t->Step();
    ASSERT_TRUE(SaveCheckpoint({.root = dir_ + "/ckpt", .keep = 3, .env = nullptr, .all_ok = {}},
                               train::TrainerSnapshot(*t))
                    .ok());
  }
  const Recorder rec = ResumeAuto();
  EXPECT_TRUE(rec.Said("in-memory copies (step 3) are older than the durable checkpoint step 6"));
  EXPECT_TRUE(rec.Said("resumed from " + dir_ + "/ckpt/step-00000006 at step 6 (durable"));
  ASSERT_EQ(rec.losses.size(), 2u);
  EXPECT_EQ(rec.losses[0], want_[6]);
}

// A copy saved at another layout is passed over by name (it holds only that layout's shard).
TEST_F(MemoryCkpt, CopyOfAnotherLayoutNotUsed) {
  ASSERT_NO_FATAL_FAILURE(TrainWithCopies(2, 0));
  auto t = Make({"run.layout=\"mbs=1\""});
  MemoryCheckpointer m = Memory(*t);
  std::vector<std::string> warnings;
  auto r = m.Resume(*t, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->has_value());
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("not rank 0 of 1 at"), std::string::npos) << warnings[0];
  EXPECT_EQ(t->step(), 0);
}

// Copies are keyed by run id: another run under the same ckpt.memory_key (a different ckpt.dir,
// here of a different model width) never sees them, starts from step 0, finishes, and removes
// only its own run directory; the first run's copies stay for it.
TEST_F(MemoryCkpt, AnotherRunsCopiesUnderTheSameKeyNotSeen) {
  ASSERT_NO_FATAL_FAILURE(TrainWithCopies(3, 0));
  const std::string other_ckpt = dir_ + "/other-ckpt";
  Recorder rec;
  auto t = Make({"ckpt.dir=\"" + other_ckpt + "\"", "model.hidden=48"});
  ASSERT_NE(t, nullptr);
  auto run = train::RunTraining(
      *t, {.resume = "auto", .trace = "", .world = nullptr, .shm_root = shm_}, &rec);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(rec.losses.size(), 8u) << "started from step 0";
  EXPECT_TRUE(rec.Said("resume: no checkpoint under " + other_ckpt + "; starting from step 0"));
  EXPECT_TRUE(fs::exists(OwnCopyRoot(Job(), 0) + "/step-00000003/manifest.json"));
  EXPECT_EQ(Entries(MemoryJobDir(shm_, "unit")), std::vector<std::string>{"run-" + run_id_});
}

}  // namespace
}  // namespace pentamesh::ckpt

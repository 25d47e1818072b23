// In-memory replicated checkpoints on the real `pentamesh train` binary under mpirun: 4 ranks at
// dp=2 x tp=2 (ZeRO-1), "2 nodes" of 2 ranks (PENTAMESH_RANKS_PER_NODE=2, so rank r's copy is also
// kept by rank (r + 2) % 4), a copy every step and a durable checkpoint every 5. World rank 1 is
// SIGKILLed after step 5; its own copy is deleted before the relaunch. The relaunch with
// --resume auto restores from memory (rank 1 from the copy rank 3 holds, fetched over MPI) and
// every step's loss is bitwise the uninterrupted run's. The same state (step 5) resumed from the
// durable checkpoint gives the same losses, and both restore times are printed. With rank 1's
// copies gone from both places the ranks disagree and the durable checkpoint is used. At ZeRO-0 a
// dp replica (which writes nothing to a durable checkpoint) restores from its partner's copy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "ckpt/memory_copy.h"
#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "testing/run_toml.h"

namespace pentamesh::ckpt {
namespace {
namespace fs = std::filesystem;
using testing::CliRun;
using testing::Shell;

constexpr const char* kLayout = "dp=2 tp=2 zero=1 sp=off mbs=1";

// A run directory with run.toml: 8 steps, a synchronous durable checkpoint every 5 steps.
std::string WriteRun(const std::string& tag) {
  const std::string dir = data::testing::MakeTempDir(tag);
  std::ofstream(dir + "/run.toml") << testing::RunTomlText(
      {.dataset = data::testing::Corpus().dataset,
       .run_keys = fmt::format("eval_every = 0\neval_batches = 1\nout_dir = \"{}/out\"", dir),
       .tables =
           fmt::format("[ckpt]\ndir = \"{}/ckpt\"\ninterval = 5\nkeep = 2\nasync = false", dir)});
  return dir;
}

// `pentamesh train` on 4 ranks, 2 per "node".
CliRun Train4(const std::string& dir, const std::string& extra,
              const std::string& layout = kLayout) {
  return Shell(testing::Mpirun(
      4,
      fmt::format("{} train --config {}/run.toml --layout '{}' {}", PM_BINARY, dir, layout, extra),
      "PENTAMESH_COMM_TIMEOUT_S=60 PENTAMESH_RANKS_PER_NODE=2 "));
}

std::map<int64_t, double> Losses(const std::string& out_dir) {
  std::map<int64_t, double> losses;
  for (const nlohmann::json& j : testing::ReadMetrics(out_dir))
    losses[j["step"].get<int64_t>()] = j["loss"].get<double>();
  return losses;
}

// Seconds printed on the "resumed from ..." line ("restore took X s"); -1 when absent.
double RestoreSeconds(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(restore took ([0-9.]+) s)"))) return -1;
  return std::stod(m[1]);
}

// The line of `out` holding `part` ("" when none), for the log.
std::string LineWith(const std::string& out, const std::string& part) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.find(part) != std::string::npos) return line;
  return "";
}

// The run's in-memory directory: the key's, then run-<the id in ckpt.dir's owner file>.
std::string RunJobDir(const std::string& key_dir, const std::string& run_dir) {
  std::ifstream in(run_dir + "/ckpt/run-id");
  std::string id;
  std::getline(in, id);
  EXPECT_EQ(id.size(), 16u) << run_dir;
  return key_dir + "/run-" + id;
}

// A copy of the crashed run (checkpoints and the metrics of its first 5 steps) to resume again.
std::string CloneRun(const std::string& from, const std::string& tag) {
  const std::string dir = WriteRun(tag);
  fs::copy(from + "/ckpt", dir + "/ckpt", fs::copy_options::recursive);
  fs::create_directories(dir + "/out");
  fs::copy_file(from + "/out/metrics.jsonl", dir + "/out/metrics.jsonl");
  return dir;
}

TEST(MemoryCkptMpi, KilledRankResumesFromMemoryBitwise) {
  const std::string straight = WriteRun("memckpt_straight");
  const CliRun a = Train4(straight, "");
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const std::map<int64_t, double> want = Losses(straight + "/out");
  ASSERT_EQ(want.size(), 8u);

  const std::string key = fmt::format("memckpt-test-{}", ::getpid());
  const std::string key_dir = MemoryJobDir("/dev/shm", key);
  struct Cleanup {  // also when an ASSERT ends the test early
    std::string path;
    ~Cleanup() { fs::remove_all(path); }
  } cleanup{key_dir};
  const std::string mem = fmt::format("--set ckpt.memory_interval=1 --set ckpt.memory_key={}", key);
  const std::string dir = WriteRun("memckpt_crashed");
  const CliRun k =
      Train4(dir, mem + " --resume auto --set run.debug_kill_step=5 --set run.debug_kill_rank=1");
  ASSERT_NE(k.exit_code, 0) << k.out << k.err;
  EXPECT_NE(k.err.find("SIGKILL after step 5 (world rank 1)"), std::string::npos) << k.err;
  const std::string job = RunJobDir(key_dir, dir);
  EXPECT_NE(k.out.find("memory checkpoints: every 1 steps under " + job +
                       "; 2 ranks per node, each rank's copy also kept by rank (rank + 2) % 4"),
            std::string::npos)
      << k.out;
  // Step 5 complete everywhere: every rank's own copy and the copy it keeps for its partner.
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(fs::exists(OwnCopyRoot(job, r) + "/step-00000005/manifest.json")) << r;
    EXPECT_TRUE(fs::exists(HeldCopyRoot(job, r) + "/step-00000005/manifest.json")) << r;
    EXPECT_FALSE(fs::exists(OwnCopyRoot(job, r) + "/step-00000004")) << "older steps removed";
  }
  // The same bytes in both places.
  EXPECT_EQ(*ReadDirFiles(OwnCopyRoot(job, 1) + "/step-00000005"),
            *ReadDirFiles(HeldCopyRoot(job, 1) + "/step-00000005"));
  const std::string durable = CloneRun(dir, "memckpt_durable");
  const std::string disagree = CloneRun(dir, "memckpt_disagree");
  const std::string saved_job = data::testing::MakeTempDir("memckpt_job") + "/job";
  fs::copy(job, saved_job, fs::copy_options::recursive);

  // Rank 1's node "lost its memory": rank 1 restores from the copy rank 3 keeps.
  fs::remove_all(OwnCopyRoot(job, 1));
  const CliRun r = Train4(dir, mem + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resumed from memory (" + job +
                       ") at step 5: every rank from its own copy except rank 1 (held by its "
                       "partner), fetched over MPI; restore took"),
            std::string::npos)
      << r.out << r.err;
  const std::map<int64_t, double> got = Losses(dir + "/out");
  ASSERT_EQ(got.size(), 8u);
  for (const auto& [step, loss] : got) EXPECT_EQ(loss, want.at(step)) << "step " << step;
  EXPECT_FALSE(fs::exists(key_dir)) << "a clean finish removes the copies";

  // The same state from the durable checkpoint (memory copies off).
  const CliRun d = Train4(durable, "--resume auto");
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_NE(d.out.find("resumed from " + durable +
                       "/ckpt/step-00000005 at step 5 (durable checkpoint); restore took"),
            std::string::npos)
      << d.out;
  for (const auto& [step, loss] : Losses(durable + "/out"))
    EXPECT_EQ(loss, want.at(step)) << "durable, step " << step;
  const double memory_s = RestoreSeconds(r.out), durable_s = RestoreSeconds(d.out);
  EXPECT_GE(memory_s, 0);
  EXPECT_GE(durable_s, 0);
  std::cerr << LineWith(r.out, "resumed from") << "\n" << LineWith(d.out, "resumed from") << "\n";
  std::cerr << fmt::format(
      "resume of step 5 on 4 ranks: from memory {:.4f} s (rank 1 from its partner's copy over "
      "MPI), from the durable checkpoint {:.4f} s\n",
      memory_s, durable_s);

  // Rank 1's copies gone from both nodes: the ranks' newest steps differ, the durable path runs.
  fs::create_directories(key_dir);  // the clean finish removed it
  fs::copy(saved_job, job, fs::copy_options::recursive);
  fs::remove_all(OwnCopyRoot(job, 1));
  fs::remove_all(HeldCopyRoot(job, 1));
  const CliRun f = Train4(disagree, mem + " --resume auto");
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.err.find("in-memory copies not used: the ranks' newest steps differ (-1 to 5; rank "
                       "1 has none)"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.out.find("resumed from " + disagree + "/ckpt/step-00000005 at step 5 (durable"),
            std::string::npos)
      << f.out;
  for (const auto& [step, loss] : Losses(disagree + "/out"))
    EXPECT_EQ(loss, want.at(step)) << "fallback, step " << step;
  EXPECT_FALSE(fs::exists(key_dir));
}

// ZeRO-0: a durable checkpoint has only the first rank of each gradient group write, but every
// in-memory copy holds its rank's whole shard, so a dp replica restores alone. World rank 2
// (dp rank 1) killed after step 3 (no durable checkpoint yet), its own copy deleted: it restores
// from the copy rank 0 keeps, and the losses are bitwise the uninterrupted run's.
TEST(MemoryCkptMpi, Zero0ReplicaRestoresFromPartnerBitwise) {
  const std::string layout = "dp=2 tp=2 zero=0 sp=off mbs=1";
  const std::string straight = WriteRun("memckpt_z0_straight");
  const CliRun a = Train4(straight, "", layout);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const std::map<int64_t, double> want = Losses(straight + "/out");
  const std::string key = fmt::format("memckpt-z0-{}", ::getpid());
  const std::string key_dir = MemoryJobDir("/dev/shm", key);
  struct Cleanup {
    std::string path;
    ~Cleanup() { fs::remove_all(path); }
  } cleanup{key_dir};
  const std::string mem = fmt::format("--set ckpt.memory_interval=1 --set ckpt.memory_key={}", key);
  const std::string dir = WriteRun("memckpt_z0_crashed");
  const CliRun k = Train4(
      dir, mem + " --resume auto --set run.debug_kill_step=3 --set run.debug_kill_rank=2", layout);
  ASSERT_NE(k.exit_code, 0) << k.out << k.err;
  EXPECT_FALSE(fs::exists(dir + "/ckpt/step-00000003"));
  const std::string job = RunJobDir(key_dir, dir);
  fs::remove_all(OwnCopyRoot(job, 2));
  const CliRun r = Train4(dir, mem + " --resume auto", layout);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resumed from memory (" + job +
                       ") at step 3: every rank from its own copy except rank 2 (held by its "
                       "partner)"),
            std::string::npos)
      << r.out << r.err;
  const std::map<int64_t, double> got = Losses(dir + "/out");
  ASSERT_EQ(got.size(), 8u);
  for (const auto& [step, loss] : got) EXPECT_EQ(loss, want.at(step)) << "step " << step;
}

}  // namespace
}  // namespace pentamesh::ckpt

#include "train/memory_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/memory_copy.h"
#include "spec/layout.h"
#include "train/checkpoint_state.h"

namespace pentamesh::train {
namespace fs = std::filesystem;
namespace {

// Chunk of one send_recv (MPI counts are int).
constexpr int64_t kChunkBytes = int64_t{1} << 30;

// The newest durable checkpoint's step under root by name (it may still fail verification, which
// the durable path then reports); -1 when there is none.
int64_t NewestDurableStep(const std::string& root) {
  int64_t newest = -1;
  for (const std::string& dir : ckpt::ListCheckpoints(root))
    if (const std::optional<int64_t> step = ckpt::StepOfDir(dir)) newest = std::max(newest, *step);
  return newest;
}

}  // namespace

core::Result<int> RanksPerNode(int world_size) {
  for (const char* var :
       {"PENTAMESH_RANKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    const char* text = std::getenv(var);
    if (text == nullptr || *text == '\0') continue;
    int value = 0;
    const char* end = text + std::strlen(text);
    const auto [ptr, ec] = std::from_chars(text, end, value);
    if (ec != std::errc() || ptr != end || value < 1)
      return core::Status::Error(
          fmt::format("{}={}: ranks per node must be a positive integer", var, text));
    return value;
  }
  return world_size;
}

int MemoryPartner(int rank, int ranks_per_node, int world) {
  if (ranks_per_node >= world) return -1;
  return (rank + ranks_per_node) % world;
}

int MemoryHeldFor(int rank, int ranks_per_node, int world) {
  if (ranks_per_node >= world) return -1;
  return ((rank - ranks_per_node) % world + world) % world;
}

core::Result<MemoryCheckpointer> MemoryCheckpointer::Create(const Trainer& trainer,
                                                            comm::Communicator* world,
                                                            const std::string& shm_root,
                                                            const std::string& run_id,
                                                            const Log& info) {
  MemoryCheckpointer m;
  const RunConfig& c = trainer.config();
  m.world_ = world != nullptr && world->size() > 1 ? world : nullptr;
  m.rank_ = trainer.rank();
  m.world_size_ = m.world_ ? m.world_->size() : 1;
  PM_ASSIGN_OR_RETURN(const int per_node, RanksPerNode(m.world_size_));
  m.partner_ = MemoryPartner(m.rank_, per_node, m.world_size_);
  m.held_for_ = MemoryHeldFor(m.rank_, per_node, m.world_size_);
  const std::string key =
      c.ckpt.memory_key.empty() ? ckpt::MemoryJobKey(c.ckpt.dir) : c.ckpt.memory_key;
  m.job_dir_ = ckpt::MemoryJobDir(shm_root, key) + "/run-" + run_id;
  m.own_root_ = ckpt::OwnCopyRoot(m.job_dir_, m.rank_);
  if (m.held_for_ >= 0) m.held_root_ = ckpt::HeldCopyRoot(m.job_dir_, m.held_for_);
  m.layout_ = spec::ShortLayout(c.run.layout);
  if (m.partner_ >= 0) {
    info(fmt::format(
        "memory checkpoints: every {} steps under {}; {} ranks per node, each rank's copy also "
        "kept by rank (rank + {}) % {} on the next node",
        c.ckpt.memory_interval, m.job_dir_, per_node, per_node, m.world_size_));
  } else {
    info(fmt::format(
        "memory checkpoints: every {} steps under {}; one node ({} ranks per node, world {}): no "
        "partner copies",
        c.ckpt.memory_interval, m.job_dir_, per_node, m.world_size_));
  }
  return m;
}

bool MemoryCheckpointer::AllOk(bool ok) const {
  if (world_ == nullptr) return ok;
  int32_t failed = ok ? 0 : 1;
  world_->all_reduce(&failed, 1, core::Dtype::kI32);
  return failed == 0;
}

std::string MemoryCheckpointer::Exchange(const std::string& blob, int dst, int src) {
  if (world_ == nullptr || dst < 0) return "";
  const int64_t mine = static_cast<int64_t>(blob.size());
  std::vector<int64_t> sizes(static_cast<size_t>(world_size_));
  world_->all_gather(sizes.data(), &mine, 1, core::Dtype::kI64);
  const int64_t incoming = sizes[static_cast<size_t>(src)];
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  std::string got(static_cast<size_t>(incoming), '\0');
  // Every rank runs the same number of rounds (the largest blob's), so each send meets its recv.
  for (int64_t off = 0; off < largest; off += kChunkBytes) {
    const int64_t send_n = std::clamp<int64_t>(mine - off, 0, kChunkBytes);
    const int64_t recv_n = std::clamp<int64_t>(incoming - off, 0, kChunkBytes);
    world_->send_recv(recv_n > 0 ? got.data() + off : nullptr, recv_n, src,
                      send_n > 0 ? blob.data() + off : nullptr, send_n, dst, core::Dtype::kU8);
  }
  return got;
}

core::Status MemoryCheckpointer::Save(Trainer& trainer) {
  const int64_t step = trainer.step();
  ckpt::Snapshot s = TrainerSnapshot(trainer, 0, 1, SnapshotScope::kOwnRank);
  s.state["memory"] = {{"rank", rank_}, {"world", world_size_}};
  core::Status own = ckpt::Env::Default()->CreateDir(fs::path(job_dir_).parent_path().string());
  if (own.ok()) own = ckpt::Env::Default()->CreateDir(job_dir_);
  if (own.ok())
    own =
        ckpt::SaveCheckpoint({.root = own_root_, .keep = INT_MAX, .env = nullptr, .all_ok = {}}, s);
  core::Status held = core::Status::Ok();
  if (partner_ >= 0) {
    std::string blob;
    if (own.ok()) {
      auto files = ckpt::ReadDirFiles(own_root_ + "/" + ckpt::StepDirName(step));
      if (files.ok()) {
        blob = ckpt::PackFiles(*files);
      } else {
        own = files.status();
      }
    }
    const std::string got = Exchange(blob, partner_, held_for_);
    auto files = ckpt::UnpackFiles(got, fmt::format("the copy rank {} sent", held_for_));
    if (got.empty()) {
      held = core::Status::Error(fmt::format("rank {} sent no copy", held_for_));
    } else if (!files.ok()) {
      held = files.status();
    } else {
      held = ckpt::PublishFiles(held_root_, step, *files);
    }
  }
  if (!AllOk(own.ok() && held.ok())) {
    const core::Status& bad = !own.ok() ? own : held;
    return core::Status::Error(fmt::format(
        "in-memory copy of step {} NOT complete ({}); the previous complete one is kept", step,
        bad.ok() ? "another rank failed" : bad.message()));
  }
  PM_RETURN_IF_ERROR(ckpt::KeepOnly(own_root_, step));
  if (!held_root_.empty()) PM_RETURN_IF_ERROR(ckpt::KeepOnly(held_root_, step));
  return core::Status::Ok();
}

std::optional<ckpt::Checkpoint> MemoryCheckpointer::OpenNewest(const std::string& root, int of_rank,
                                                               const Log& warn) const {
  if (root.empty()) return std::nullopt;
  auto found = ckpt::ResolveResume("auto", root, [&](const std::string& m) {
    warn(fmt::format("rank {}: in-memory {}", rank_, m));
  });
  if (!found.ok()) {
    warn(fmt::format("rank {}: {}", rank_, found.status().message()));
    return std::nullopt;
  }
  if (!*found) return std::nullopt;
  const nlohmann::json& st = (*found)->state();
  const std::string layout = st.value("layout", "");
  const int saved_rank = st.value("/memory/rank"_json_pointer, -1);
  const int saved_world = st.value("/memory/world"_json_pointer, -1);
  if (layout != layout_ || saved_rank != of_rank || saved_world != world_size_) {
    warn(fmt::format(
        "rank {}: in-memory copy {} is rank {} of {} at layout '{}', not rank {} of {} at '{}'; "
        "not used",
        rank_, (*found)->dir(), saved_rank, saved_world, layout, of_rank, world_size_, layout_));
    return std::nullopt;
  }
  return std::move(**found);
}

core::Result<std::optional<MemoryRestore>> MemoryCheckpointer::Resume(Trainer& trainer,
                                                                      const Log& warn) {
  std::optional<ckpt::Checkpoint> own = OpenNewest(own_root_, rank_, warn);
  std::optional<ckpt::Checkpoint> held = OpenNewest(held_root_, held_for_, warn);
  const int64_t own_step = own ? own->step() : -1, held_step = held ? held->step() : -1;
  // The step of this rank's copy that its partner holds.
  int64_t partner_has = -1;
  if (world_ != nullptr && partner_ >= 0)
    world_->send_recv(&partner_has, 1, partner_, &held_step, 1, held_for_, core::Dtype::kI64);
  const int64_t best = std::max(own_step, partner_has);
  std::vector<int64_t> bests(static_cast<size_t>(world_size_), best);
  if (world_ != nullptr) world_->all_gather(bests.data(), &best, 1, core::Dtype::kI64);
  const auto [lo, hi] = std::minmax_element(bests.begin(), bests.end());
  if (*hi < 0) return std::optional<MemoryRestore>();  // no copies anywhere: a fresh start
  if (*lo != *hi) {
    if (rank_ != 0) return std::optional<MemoryRestore>();  // rank 0 says why, once
    const size_t short_rank = static_cast<size_t>(lo - bests.begin());
    warn(fmt::format(
        "in-memory copies not used: the ranks' newest steps differ ({} to {}; rank {} has {}); "
        "falling back to the durable checkpoints",
        *lo, *hi, short_rank, *lo < 0 ? std::string("none") : fmt::format("step {}", *lo)));
    return std::optional<MemoryRestore>();
  }
  const int64_t step = *lo;
  const int64_t durable = NewestDurableStep(trainer.config().ckpt.dir);
  if (durable > step) {
    if (rank_ == 0)
      warn(fmt::format(
          "in-memory copies (step {}) are older than the durable checkpoint step {}; using it",
          step, durable));
    return std::optional<MemoryRestore>();
  }
  // Which ranks restore from the copy their partner holds (their own is missing or older).
  const int32_t need = own_step != step ? 1 : 0;
  std::vector<int32_t> needs(static_cast<size_t>(world_size_), need);
  if (world_ != nullptr) world_->all_gather(needs.data(), &need, 1, core::Dtype::kI32);
  std::string blob;
  if (held_for_ >= 0 && needs[static_cast<size_t>(held_for_)] && held_step == step) {
    auto files = ckpt::ReadDirFiles(held->dir());
    if (files.ok()) blob = ckpt::PackFiles(*files);
  }
  const std::string got = Exchange(blob, held_for_, partner_);
  std::optional<ckpt::Checkpoint> chosen;
  if (!need) {
    chosen = std::move(own);
  } else if (got.empty()) {
    warn(fmt::format("rank {}: its partner (rank {}) sent no copy of step {}", rank_, partner_,
                     step));
  } else {
    // Stored again as this rank's own copy, then verified like any copy (sizes, CRC32C).
    auto files = ckpt::UnpackFiles(got, fmt::format("the copy rank {} sent", partner_));
    core::Status st = files.ok() ? ckpt::Env::Default()->CreateDir(job_dir_) : files.status();
    if (st.ok()) st = ckpt::PublishFiles(own_root_, step, *files);
    if (st.ok()) {
      chosen = OpenNewest(own_root_, rank_, warn);
      if (chosen && chosen->step() != step) chosen.reset();
    } else {
      warn(fmt::format("rank {}: partner's copy: {}", rank_, st.message()));
    }
  }
  if (!AllOk(chosen.has_value())) {
    if (rank_ == 0)
      warn(
          "in-memory copies not used: a rank has no valid copy of the agreed step; falling back to "
          "the durable checkpoints");
    return std::optional<MemoryRestore>();
  }
  const core::Status restored = RestoreTrainer(*chosen, trainer);
  if (!AllOk(restored.ok()))
    return core::Status::Error(
        restored.ok()
            ? std::string("restoring the in-memory copy failed on another rank")
            : fmt::format("restoring in-memory copy {}: {}", chosen->dir(), restored.message()));
  MemoryRestore out{.step = step, .dir = job_dir_, .from_partner = {}};
  for (int r = 0; r < world_size_; ++r)
    if (needs[static_cast<size_t>(r)]) out.from_partner.push_back(r);
  return std::optional<MemoryRestore>(std::move(out));
}

void MemoryCheckpointer::RemoveAll() {
  ckpt::Env* env = ckpt::Env::Default();
  (void)env->RemoveAll(own_root_);
  if (!held_root_.empty()) (void)env->RemoveAll(held_root_);
  (void)AllOk(true);  // every rank is done with its copies
  // Everything under run-<id> is this run's (ranks of one node share it; each removes what is
  // left, errors ignored: another rank may be removing the same entries).
  std::error_code ec;
  std::filesystem::remove_all(job_dir_, ec);
  (void)AllOk(true);
  std::filesystem::remove(fs::path(job_dir_).parent_path(), ec);  // only when empty
}

}  // namespace pentamesh::train

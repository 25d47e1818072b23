// Checkpoints: sharded safetensors files plus one manifest that maps every global tensor to the
// slices the files hold (layout in docs/checkpoint_format.md).
//
//   <root>/step-00000040/rank-00000.safetensors   this rank's slices (fp32 master, adam m and v)
//   <root>/step-00000040/rank-00000.json          this rank's part of the manifest
//   <root>/step-00000040/manifest.json            merged by rank 0: tensors, files + CRC32C, state
//   <root>/latest                                 "step-00000040\n", replaced by rename last
//
// Invariants:
//  - Atomic: everything is written under step-N.tmp, fsync'd, the directory renamed to step-N,
//    the root fsync'd, and only then `latest` is replaced (write latest.tmp, fsync, rename). A
//    crash or a failed write (disk full) at any moment leaves the previous checkpoint and `latest`
//    whole.
//  - Layout agnostic: a tensor is named by its global name and its slices by [start, start+shape)
//    boxes in the global tensor, so any reader layout gathers its own shard from any writer layout.
//  - A checkpoint is used only after every file's size and CRC32C match the manifest.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/env.h"
#include "ckpt/safetensors.h"
#include "core/status.h"
#include "model/param_set.h"

namespace pentamesh::ckpt {

// One rank's slice of one global tensor, copied to host memory.
struct Slice {
  std::string name;  // global tensor name
  std::string key;   // the tensor's name inside the rank file; empty = name (a rank holding
                     // several boxes of one tensor names them name#0, name#1, ...)
  std::string dtype = "F32";
  std::vector<int64_t> global_shape;
  std::vector<int64_t> start;  // first global index per dim
  std::vector<int64_t> shape;  // slice extent per dim
  std::string bytes;           // row-major slice data
};

// What one rank contributes to a checkpoint; `state` (step, sampler, rng, config...) is taken
// from rank 0 into the manifest.
struct Snapshot {
  int64_t step = 0;
  int rank = 0, world = 1;
  nlohmann::json state = nlohmann::json::object();
  std::vector<Slice> tensors;
};

// Global names of the optimizer tensors kept for parameter `name`: the fp32 master weight is
// saved under `name` itself.
inline std::string AdamMName(const std::string& name) { return name + ".adam_m"; }
inline std::string AdamVName(const std::string& name) { return name + ".adam_v"; }

// This rank's shard of every parameter: fp32 master weight, Adam m, Adam v.
std::vector<Slice> SnapshotParams(model::ParamSet& params);

// A box [start, start + shape) of a tensor whose row-major elements are the flat elements
// [flat_begin, flat_begin + numel) of that tensor.
struct Box {
  std::vector<int64_t> start, shape;
  int64_t flat_begin = 0;
};
// The flat range [begin, end) of a row-major tensor of `shape` as the fewest boxes of the kind
// above (at most 2 * rank - 1), in order. This is how a ZeRO shard (a range of the flat buffers)
// is described as slices of global tensors.
std::vector<Box> FlatRangeBoxes(const std::vector<int64_t>& shape, int64_t begin, int64_t end);

// The collective hook for multi-rank saves: returns true iff `ok` is true on every rank (an
// allreduce AND that is also a barrier). Single process: nullptr.
using AllOk = std::function<bool(bool ok)>;

std::string StepDirName(int64_t step);
// The step N of a directory named (or a path ending in) step-N; nullopt for any other name.
std::optional<int64_t> StepOfDir(const std::string& dir);

struct SaveOptions {
  std::string root;
  int keep = 3;        // complete checkpoints kept (older ones removed after a successful save)
  Env* env = nullptr;  // nullptr: Env::Default()
  AllOk all_ok;
};

// Writes the snapshot as checkpoint step-N under root (every rank calls it). On failure the
// partial step-N.tmp is removed and the message says that the previous checkpoint is intact.
// The three phases below in order; the collectives (all_ok) are only in Begin and Commit, so a
// background thread may run WriteRankFiles while the caller's thread keeps the communicator.
core::Status SaveCheckpoint(const SaveOptions& options, const Snapshot& snapshot);
// Rank 0 creates step-N.tmp; collective. Returns false (with *status set) when any rank failed.
bool BeginSave(const SaveOptions& options, int64_t step, int rank, core::Status* status);
// This rank's .safetensors and .json part, written and fsync'd. No collective.
core::Status WriteRankFiles(const SaveOptions& options, const Snapshot& snapshot);
// Collective: once every rank's files are durable, rank 0 merges the parts into manifest.json,
// renames step-N.tmp to step-N and moves `latest`; on any rank's failure step-N.tmp is removed.
core::Status CommitSave(const SaveOptions& options, const Snapshot& snapshot,
                        const core::Status& written);
// root/step-N.tmp: where a save of step N writes before it is published.
std::string StepTmpDir(const std::string& root, int64_t step);
// Publishes a fully written root/step-N.tmp: fsyncs it, renames it to step-N (replacing an older
// step-N), moves `latest` to it, then removes complete checkpoints beyond options.keep (newest
// first, step-N first). One process; CommitSave's last phase on rank 0.
core::Status PublishStep(const SaveOptions& options, int64_t step);

// A verified checkpoint in memory (files read and checksummed).
class Checkpoint {
 public:
  // Reads dir/manifest.json and every file it lists; any size/CRC/format mismatch is an error
  // naming the file.
  static core::Result<Checkpoint> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  int64_t step() const { return step_; }
  const nlohmann::json& state() const { return state_; }
  const nlohmann::json& manifest() const { return manifest_; }
  bool Has(const std::string& name) const { return manifest_["tensors"].contains(name); }
  // Gathers the box [start, start + shape) of F32 tensor `name` into out (row-major), from
  // whatever slices the files hold; errors if the global shape differs or the box is not covered.
  core::Status ReadRegion(const std::string& name, const std::vector<int64_t>& global_shape,
                          const std::vector<int64_t>& start, const std::vector<int64_t>& shape,
                          float* out) const;

 private:
  std::string dir_;
  int64_t step_ = 0;
  nlohmann::json manifest_, state_;
  std::map<std::string, std::string> file_bytes_;
  std::map<std::string, StFile> files_;
};

// Loads this rank's shard of every parameter (master, m, v) and refreshes the compute weights.
core::Status RestoreParams(const Checkpoint& ckpt, model::ParamSet& params);

// Every step-N directory under root (N a number: not step-N.tmp or step-N.damaged), complete or
// not, newest first; the one `latest` names comes first when it exists.
std::vector<std::string> ListStepDirs(const std::string& root);
// The complete ones among them (with a manifest), in the same order. Pruning removes only these.
std::vector<std::string> ListCheckpoints(const std::string& root);

// Resolves --resume: "auto" = the newest step-N directory under root that verifies (each damaged
// one is reported through `log` by file, skipped, and listed in *damaged); nullopt when root has
// no step-N directory; an error naming them all when every one is damaged (a run never restarts
// from step 0 over checkpoints it could not read). Otherwise `spec` is a checkpoint directory (or
// a root with `latest`) that must verify.
core::Result<std::optional<Checkpoint>> ResolveResume(
    const std::string& spec, const std::string& root,
    const std::function<void(const std::string&)>& log,
    std::vector<std::string>* damaged = nullptr);

// Recovery keeps what it could not read: renames each damaged step-N directory to step-N.damaged
// (step-N.damaged-2, ... when taken), which no listing, pruning or later save touches, so a
// resumed run's saves neither prune nor replace it. Called once (rank 0) after every rank resumed.
// Returns the new names.
core::Result<std::vector<std::string>> SetAsideDamaged(const std::vector<std::string>& dirs,
                                                       Env* env = nullptr);

// Background saves: Save() finishes the previous save, then writes the snapshot on a thread while
// the caller continues. Errors of a background save are returned by the next Save(), Poll() or
// Wait(). With an all_ok hook (several ranks) the thread only writes this rank's files; the
// commit (a collective, then rank 0's manifest and `latest`) runs on the caller's thread in the
// first Poll() at which every rank's thread is done, or in Wait(). Every rank calls Save, Poll
// and Wait at the same points (they are collective when the hook is set).
class AsyncSaver {
 public:
  AsyncSaver(SaveOptions options, bool async) : options_(std::move(options)), async_(async) {}
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;
  ~AsyncSaver() { (void)Wait(); }
  // Returns the previous save's status (or this save's, when not async).
  core::Status Save(Snapshot snapshot);
  // Commits a finished background save (between steps); OK when nothing was due.
  core::Status Poll();
  core::Status Wait();

 private:
  core::Status Finish();  // joins the thread and commits (multi-rank)
  SaveOptions options_;
  bool async_;
  std::thread thread_;
  std::atomic<bool> written_{false};
  bool pending_ = false;  // a multi-rank save whose commit is due
  Snapshot pending_snapshot_;
  core::Status status_;
};

}  // namespace pentamesh::ckpt

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

// The collective hook for multi-rank saves: returns true iff `ok` is true on every rank (an
// allreduce AND that is also a barrier). Single process: nullptr.
using AllOk = std::function<bool(bool ok)>;

std::string StepDirName(int64_t step);

struct SaveOptions {
  std::string root;
  int keep = 3;        // complete checkpoints kept (older ones removed after a successful save)
  Env* env = nullptr;  // nullptr: Env::Default()
  AllOk all_ok;
};

// Writes the snapshot as checkpoint step-N under root (every rank calls it). On failure the
// partial step-N.tmp is removed and the message says that the previous checkpoint is intact.
core::Status SaveCheckpoint(const SaveOptions& options, const Snapshot& snapshot);

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

// Complete checkpoint directories under root (step-N with a manifest), newest first; the one
// `latest` names comes first when it exists.
std::vector<std::string> ListCheckpoints(const std::string& root);

// Resolves --resume: "auto" = the newest checkpoint under root that verifies (each damaged one is
// reported through `log` by file and skipped); nullopt when root has none. Otherwise `spec` is a
// checkpoint directory (or a root with `latest`) that must verify.
core::Result<std::optional<Checkpoint>> ResolveResume(
    const std::string& spec, const std::string& root,
    const std::function<void(const std::string&)>& log);

// Background saves: Save() joins the previous write, then writes the snapshot on a thread while
// the caller continues. Errors of a background save are returned by the next Save() or Wait().
class AsyncSaver {
 public:
  AsyncSaver(SaveOptions options, bool async) : options_(std::move(options)), async_(async) {}
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;
  ~AsyncSaver() { (void)Wait(); }
  // Returns the previous save's status (or this save's, when not async).
  core::Status Save(Snapshot snapshot);
  core::Status Wait();

 private:
  SaveOptions options_;
  bool async_;
  std::thread thread_;
  core::Status status_;
};

}  // namespace pentamesh::ckpt

// Checkpoint-root ownership: a run owns its ckpt.dir. The first run that saves into a root writes
// the owner file root/run-id (one line: the run id, 16 hex digits, written to a temporary name,
// fsync'd and renamed); the id is also in every manifest's state.run_id and keys the run's
// in-memory copies (train/memory_checkpoint.h). A fresh run (no --resume) in a root that holds
// another run's checkpoints (or an owner file, or any step-N entry) is refused naming the owner,
// unless it was asked to overwrite: then the old run's step-N entries, `latest` and owner file are
// removed first. A resumed run continues the owner's id (a root without an owner file, saved
// before run ids, is adopted under a new id).
#pragma once

#include <string>

#include "ckpt/env.h"
#include "core/status.h"

namespace pentamesh::ckpt {

// The owner file's name inside a checkpoint root.
inline constexpr const char* kOwnerFile = "run-id";

// A new random run id: 16 lowercase hex digits.
std::string NewRunId();

// How a run starts in its checkpoint root.
struct ClaimOptions {
  bool resume = false;     // --resume auto|PATH: continue the owner's run
  bool overwrite = false;  // --overwrite: a fresh run replaces the checkpoints it finds
  Env* env = nullptr;      // nullptr: Env::Default()
};

// Creates `root` when absent and returns the run id that owns it from now on (see above). Errors:
// root is not a directory or cannot be created; a malformed owner file; a fresh run in an occupied
// root without `overwrite` (the message names the owner and the newest checkpoint and says how to
// continue or replace it). One process (rank 0) calls it.
core::Result<std::string> ClaimRoot(const std::string& root, const ClaimOptions& options);

}  // namespace pentamesh::ckpt

// In-memory checkpoint copies on node-local memory (/dev/shm, which outlives the process): the
// file side of the engine's in-memory replicated checkpoints (train/memory_checkpoint.h does the
// MPI side). A copy is an ordinary one-rank checkpoint (the same safetensors file, manifest and
// CRC32C as a durable checkpoint, written by SaveCheckpoint or PublishFiles), kept under
//
//   <shm>/pentamesh-<job key>/rank-00003/step-00000040/        rank 3's own copy
//   <shm>/pentamesh-<job key>/partner-of-00001/step-00000040/  rank 1's copy, held by its partner
//
// and read back with ResolveResume("auto", root, ...) (newest verified first). Layout and restore
// order: docs/checkpoint_format.md, "In-memory copies".
// Invariant: a step directory appears under its final name only once all its files are written
// (written under step-N.tmp, then renamed), so a reader sees whole copies or none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ckpt/env.h"
#include "core/status.h"

namespace pentamesh::ckpt {

// The files of one checkpoint directory: (file name, bytes), sorted by name.
using Files = std::vector<std::pair<std::string, std::string>>;

// "<shm>/pentamesh-<key>": one job's copies on this node.
std::string MemoryJobDir(const std::string& shm_root, const std::string& key);
// <job dir>/rank-NNNNN: this rank's own copies.
std::string OwnCopyRoot(const std::string& job_dir, int rank);
// <job dir>/partner-of-NNNNN: the copies of rank `of_rank` that this rank holds for it.
std::string HeldCopyRoot(const std::string& job_dir, int of_rank);

// The job key derived from the durable checkpoint root: 8 hex digits of the CRC32C of its absolute,
// normalised path (two jobs with different checkpoint roots never share copies; a relaunch of the
// same job finds its own).
std::string MemoryJobKey(const std::string& ckpt_dir);
// "" when `key` may name a directory (1-64 of [A-Za-z0-9._-], not starting with '.'); otherwise
// the reason it may not.
std::string MemoryKeyProblem(const std::string& key);

// Every regular file of checkpoint directory `dir` (a step-N directory), sorted by name.
core::Result<Files> ReadDirFiles(const std::string& dir);
// Writes `files` as root/step-N (through step-N.tmp and a rename, fsync'd as a durable save) and
// points root/latest at it. Other steps are left alone (KeepOnly removes them).
core::Status PublishFiles(const std::string& root, int64_t step, const Files& files,
                          Env* env = nullptr);
// Removes every step-* entry of root (complete or .tmp) other than step-N.
core::Status KeepOnly(const std::string& root, int64_t step, Env* env = nullptr);

// The files as one byte string for a transfer (per file: name length, name, size, bytes; all
// lengths uint64 little-endian), and back. Unpack refuses a truncated string or a file name with
// '/' (the names become paths), naming `what`.
std::string PackFiles(const Files& files);
core::Result<Files> UnpackFiles(std::string_view packed, const std::string& what);

}  // namespace pentamesh::ckpt

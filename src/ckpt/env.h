// Env: the file-system operations a checkpoint save uses, behind an interface (leveldb style) so a
// test can inject failures: FaultEnv fails every write once its byte budget is spent, exactly as
// a full disk (ENOSPC) would.
// Invariant: WriteFile either returns OK with the bytes durable (written and fsync'd) or an error
// naming the path and the reason; nothing here ever throws.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "core/status.h"

namespace pentamesh::ckpt {

class Env {
 public:
  virtual ~Env() = default;
  // Writes `data` as the whole of `path` through core::WriteFileAtomic (a temporary name, fsync,
  // rename; never through a symlink).
  virtual core::Status WriteFile(const std::string& path, std::string_view data);
  virtual core::Status CreateDir(const std::string& path);
  // rename(2): atomic replacement of `to` (a file, or an empty/absent directory).
  virtual core::Status Rename(const std::string& from, const std::string& to);
  // fsync of a directory, so a rename inside it is durable.
  virtual core::Status SyncDir(const std::string& path);
  virtual core::Status RemoveAll(const std::string& path);
  // The process-wide POSIX implementation.
  static Env* Default();
};

// Disk-full injection: writes beyond `capacity_bytes` (counted over all WriteFile calls) fail with
// "No space left on device" after leaving a partial file, as a real full disk does.
class FaultEnv : public Env {
 public:
  explicit FaultEnv(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  core::Status WriteFile(const std::string& path, std::string_view data) override;
  int64_t written_bytes() const;

 private:
  mutable std::mutex mu_;
  int64_t capacity_bytes_;
  int64_t written_bytes_ = 0;
};

}  // namespace pentamesh::ckpt

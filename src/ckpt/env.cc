#include "ckpt/env.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/output.h"

namespace pentamesh::ckpt {
namespace {

core::Status Errno(const std::string& what, const std::string& path, int err) {
  return core::Status::Error(fmt::format("{} {}: {}", what, path, std::strerror(err)));
}

}  // namespace

core::Status Env::WriteFile(const std::string& path, std::string_view data) {
  return core::WriteFileAtomic(path, data);  // the one output layer (core/output.h)
}

core::Status Env::CreateDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return Errno("cannot create directory", path, errno);
  return core::Status::Ok();
}

core::Status Env::Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    return Errno(fmt::format("cannot rename {} to", from), to, errno);
  return core::Status::Ok();
}

core::Status Env::SyncDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open directory", path, errno);
  const int err = ::fsync(fd) != 0 ? errno : 0;
  ::close(fd);
  return err == 0 ? core::Status::Ok() : Errno("cannot fsync directory", path, err);
}

core::Status Env::RemoveAll(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return core::Status::Error(fmt::format("cannot remove {}: {}", path, ec.message()));
  return core::Status::Ok();
}

Env* Env::Default() {
  static Env env;
  return &env;
}

core::Status FaultEnv::WriteFile(const std::string& path, std::string_view data) {
  size_t allowed = data.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t left = std::max<int64_t>(0, capacity_bytes_ - written_bytes_);
    allowed = std::min<size_t>(data.size(), static_cast<size_t>(left));
    written_bytes_ += static_cast<int64_t>(allowed);
  }
  PM_RETURN_IF_ERROR(Env::WriteFile(path, data.substr(0, allowed)));
  if (allowed < data.size()) return Errno("cannot write", path, ENOSPC);
  return core::Status::Ok();
}

int64_t FaultEnv::written_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_bytes_;
}

}  // namespace pentamesh::ckpt

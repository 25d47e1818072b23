#include "core/output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace pentamesh::core {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status Failed(const std::string& path, const std::string& why) {
  return Status::Error(fmt::format("cannot write {}: {} (nothing was written)", path, why));
}

// Writes all of `data` to fd; 0 or the errno.
int WriteAll(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// A device or fifo that exists: written in place (it cannot be renamed over).
Status WriteInPlace(const std::string& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Failed(path, std::strerror(errno));
  int err = WriteAll(fd, data);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err == 0 ? Status::Ok() : Failed(path, std::strerror(err));
}

}  // namespace

std::string OutputPathProblem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return "is a symbolic link (not followed: remove it or write to another path)";
    if (S_ISDIR(st.st_mode)) return "is a directory";
  } else if (errno != ENOENT) {
    return std::strerror(errno);
  }
  const std::string dir = DirOf(path);
  if (::stat(dir.c_str(), &st) != 0) return fmt::format("directory '{}' does not exist", dir);
  if (!S_ISDIR(st.st_mode)) return fmt::format("'{}' is not a directory", dir);
  return "";
}

Status WriteFileAtomic(const std::string& path, std::string_view data, bool executable) {
  if (const std::string problem = OutputPathProblem(path); !problem.empty())
    return Failed(path, problem);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return WriteInPlace(path, data);
  static std::atomic<uint64_t> counter{0};
  const std::string dir = DirOf(path);
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string tmp =
      fmt::format("{}/.{}.tmp-{}-{}", dir, base, ::getpid(), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                        executable ? 0777 : 0666);
  if (fd < 0) return Failed(path, fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  int err = WriteAll(fd, data);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (err == 0 && (::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(data.size())))
    err = EIO;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return Failed(path, std::strerror(err));
  }
  // The rename is durable once the directory is synced (some file systems refuse a directory
  // fsync with EINVAL; the data itself was synced).
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    const int r = ::fsync(dfd);
    const int derr = errno;
    ::close(dfd);
    if (r != 0 && derr != EINVAL)
      return Status::Error(
          fmt::format("cannot write {}: fsync of '{}': {}", path, dir, std::strerror(derr)));
  }
  return Status::Ok();
}

Status FinishStdout() {
  // std::cout is synced with stdio, so its flush is stdout's: the first failing flush has the
  // reason in errno (a second flush of the discarded buffer would succeed).
  errno = 0;
  std::cout.flush();
  int err = std::cout.bad() ? errno : 0;
  bool bad = std::cout.bad();
  if (std::fflush(stdout) != 0) {
    bad = true;
    if (err == 0) err = errno;
  }
  if (bad || std::ferror(stdout))
    return Status::Error(fmt::format("cannot write to standard output: {}",
                                     err != 0 ? std::strerror(err) : "write error"));
  return Status::Ok();
}

}  // namespace pentamesh::core

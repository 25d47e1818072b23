#include "core/input.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pentamesh::core {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return nullptr;
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Result<int> OpenInputFile(const std::string& path, int64_t max_bytes, std::string_view what) {
  // O_NONBLOCK: opening a FIFO without a writer returns at once (then refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return Status::Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Error(fmt::format("{}: cannot stat: {}", path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) {
      return Status::Error(fmt::format("{}: is a directory, not a {}", path, what));
    }
    return Status::Error(fmt::format("{}: is {}, not a regular file (a {} must be one)", path,
                                     KindOf(st.st_mode), what));
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return Status::Error(fmt::format("{}: {} bytes is over the limit of {} bytes for a {}", path,
                                     st.st_size, max_bytes, what));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

Result<std::string> ReadInputFile(const std::string& path, int64_t max_bytes,
                                  std::string_view what) {
  PM_ASSIGN_OR_RETURN(const int fd, OpenInputFile(path, max_bytes, what));
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Status::Error(fmt::format("{}: read error: {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    if (static_cast<int64_t>(out.size()) + n > max_bytes) {
      ::close(fd);
      return Status::Error(fmt::format("{}: grew over the limit of {} bytes for a {} while read",
                                       path, max_bytes, what));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status CheckInputFile(const std::string& path, int64_t max_bytes, std::string_view what) {
  PM_ASSIGN_OR_RETURN(const int fd, OpenInputFile(path, max_bytes, what));
  ::close(fd);
  return Status::Ok();
}

}  // namespace pentamesh::core

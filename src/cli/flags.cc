#include "cli/flags.h"

#include "core/output.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace pentamesh::cli {

CLI::Validator IntIn(int64_t min_value, int64_t max_value) {
  return CLI::Validator(
      [min_value, max_value](std::string& text) -> std::string {
        core::Result<int64_t> v = spec::ParseInt("", text, min_value, max_value);
        if (!v.ok()) return v.status().message();
        text = std::to_string(*v);  // CLI11 then converts the canonical form
        return "";
      },
      fmt::format("INT in [{}, {}]", min_value, max_value));
}

CLI::Validator NumberIn(double min_value, double max_value) {
  return CLI::Validator(
      [min_value, max_value](std::string& text) -> std::string {
        core::Result<double> v = spec::ParseNumber("", text, min_value, max_value);
        return v.ok() ? "" : v.status().message();
      },
      fmt::format("NUMBER in [{:g}, {:g}]", min_value, max_value));
}

core::Status CheckOutputFile(const std::string& what, const std::string& path) {
  auto fail = [&](const std::string& reason) {
    return core::Status::Error(
        fmt::format("{}cannot write '{}': {}", what.empty() ? "" : what + ": ", path, reason));
  };
  if (path.empty()) return fail("empty path");
  struct stat st {};
  // Files the program creates go through core::WriteFileAtomic, which never follows a symlink.
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return fail(core::OutputPathProblem(path));
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fail("is a directory");
    if (access(path.c_str(), W_OK) != 0) return fail(std::strerror(errno));
    return core::Status::Ok();
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (stat(dir.c_str(), &st) != 0) {
    return fail(fmt::format("directory '{}' does not exist", dir));
  }
  if (!S_ISDIR(st.st_mode)) return fail(fmt::format("'{}' is not a directory", dir));
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return fail(fmt::format("directory '{}': {}", dir, std::strerror(errno)));
  }
  return core::Status::Ok();
}

CLI::Validator OutputFile() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        core::Status st = CheckOutputFile("", path);  // CLI11 prefixes the flag
        return st.ok() ? "" : st.message();
      },
      "FILE (written)");
}

}  // namespace pentamesh::cli

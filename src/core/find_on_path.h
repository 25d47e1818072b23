// FindOnPath: the executable a command name resolves to, as a shell would find it: a name with a
// '/' is taken as it is, any other is looked up in the directories of $PATH (an empty entry is
// the working directory). Used before launching `mpirun` (calibrate --host --np, tune), so a
// missing launcher is a clear error rather than a failed spawn.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace pentamesh::core {

// The path of the executable `name` resolves to, or "" when there is none.
inline std::string FindOnPath(const std::string& name) {
  auto executable = [](const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return "";
}

}  // namespace pentamesh::core

// MakeTempDir: a fresh directory under $TMPDIR for one test, removed when the test binary exits
// (namespace pentamesh::testing; data/fixtures.h and testing/cli_run.h use it).
// Invariant: every directory it returns is new (mkdtemp) and is removed at exit, files and all.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/check.h"

namespace pentamesh::testing {

inline std::string MakeTempDir(const std::string& tag) {
  static std::vector<std::string>* dirs = [] {
    std::atexit([] {
      std::error_code ec;
      for (const auto& d : *dirs) std::filesystem::remove_all(d, ec);
    });
    return new std::vector<std::string>;
  }();
  std::string templ = (std::filesystem::temp_directory_path() / ("pm_" + tag + "_XXXXXX")).string();
  const char* dir = mkdtemp(templ.data());
  PM_CHECK(dir != nullptr) << "mkdtemp " << templ;
  dirs->push_back(dir);
  return dir;
}

}  // namespace pentamesh::testing

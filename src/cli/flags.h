// Command-line flags checked by the shared input rules (spec/limits.h) while CLI11 parses, so a bad
// value is a parse error (exit 2, the flag named) before any work starts:
//   IntIn(min, max)     a whole number in [min, max] ("1e6" is accepted and rewritten 1000000, so
//                       add it with ->transform(), not ->check(), which cannot rewrite);
//   NumberIn(min, max)  a finite number in [min, max];
//   OutputFile()        a file we will write: not a directory or a symbolic link, and its directory
//   exists and is
//                       writable (checked without creating or truncating anything).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "core/status.h"
#include "spec/limits.h"

namespace pentamesh::cli {

CLI::Validator IntIn(int64_t min_value, int64_t max_value = spec::kMaxField);
CLI::Validator NumberIn(double min_value, double max_value = std::numeric_limits<double>::max());
CLI::Validator OutputFile();

// The check behind OutputFile(), for paths that arrive some other way; errors name `what`.
core::Status CheckOutputFile(const std::string& what, const std::string& path);

}  // namespace pentamesh::cli

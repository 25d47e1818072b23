// The JSON side of the input rules (spec/limits.h) for every JSON file a user hands pentamesh (the
// published-runs JSON, a DeepSpeed ds_config, ...): one parse that never throws and one number
// policy, then typed accessors that name the key. A number that does not fit a double (1e400) or
// an int64 (a 20-digit integer), a value of the wrong type ("enabled": "yes") and a count beyond
// the documented limits are errors "<source>: <key path>: <reason>", exit 2 at the command line.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "spec/limits.h"

namespace pentamesh::spec {

// Parses `text`; errors name `source`, the line and column (or the number literal that
// overflowed and its line), and any integer beyond int64 by its key path (/a/b/0).
core::Result<nlohmann::json> ParseJson(std::string_view text, const std::string& source);

// Typed reads of obj[key]; `path` is the key as the error names it ("zero_optimization.stage").
// Absent or null: nullopt. Any other type, or a value out of range: an error naming source and
// path with the value's type or value.
core::Result<std::optional<bool>> JsonBool(const nlohmann::json& obj, const std::string& key,
                                           const std::string& path, const std::string& source);
// A whole number in [min_value, max_value] (2e3 is 2000; 1.5, "8" and true are errors).
core::Result<std::optional<int64_t>> JsonInt(const nlohmann::json& obj, const std::string& key,
                                             const std::string& path, const std::string& source,
                                             int64_t min_value = 0, int64_t max_value = kMaxField);

}  // namespace pentamesh::spec

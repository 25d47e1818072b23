#include "spec/json_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/numeric.h"

namespace pentamesh::spec {
namespace {

using json = nlohmann::json;

// 1-based line of byte offset `pos` in text.
size_t LineOf(std::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  return 1 +
         static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

// The first integer beyond int64 (stored as unsigned above 2^63 - 1): its key path ("/" for the
// whole document) and value; nullptr if none. The value is returned rather than looked up again
// by the path, which a key holding '/' or '~' would not resolve.
const json* HugeInteger(const json& j, const std::string& path, std::string& found_path) {
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    found_path = path.empty() ? "/" : path;
    return &j;
  }
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (const json* v = HugeInteger(value, path + "/" + key, found_path)) return v;
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      if (const json* v = HugeInteger(j[i], path + "/" + std::to_string(i), found_path)) return v;
    }
  }
  return nullptr;
}

core::Status Bad(const std::string& source, const std::string& path, const std::string& why) {
  return core::Status::Error(fmt::format("{}: \"{}\" {}", source, path, why));
}

}  // namespace

core::Result<json> ParseJson(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() names the line and column ("parse error at line 3, column 7: ...").
    return core::Status::Error(fmt::format("{}: not valid JSON: {}", source, e.what()));
  } catch (const json::out_of_range& e) {
    // A number that does not fit a double ("number overflow parsing '1e400'"): name its line.
    const std::string what = e.what();
    const size_t open = what.find('\''), close = what.rfind('\'');
    std::string where;
    if (open != std::string::npos && close > open + 1) {
      const std::string literal = what.substr(open + 1, close - open - 1);
      const size_t at = text.find(literal);
      where = fmt::format(" '{}'", literal);
      if (at != std::string_view::npos) where += fmt::format(" at line {}", LineOf(text, at));
    }
    return core::Status::Error(
        fmt::format("{}: number{} is out of range (not a finite double)", source, where));
  } catch (const json::exception& e) {
    return core::Status::Error(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  std::string path;
  if (const json* huge = HugeInteger(j, "", path))
    return core::Status::Error(fmt::format("{}: \"{}\": {} is out of range (integers stop at {})",
                                           source, path, huge->dump(),
                                           std::numeric_limits<int64_t>::max()));
  return j;
}

core::Result<std::optional<bool>> JsonBool(const json& obj, const std::string& key,
                                           const std::string& path, const std::string& source) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::optional<bool>();
  const json& v = obj[key];
  if (!v.is_boolean())
    return Bad(source, path,
               fmt::format("must be true or false, not {} {}", v.type_name(), v.dump()));
  return std::optional<bool>(v.get<bool>());
}

core::Result<std::optional<int64_t>> JsonInt(const json& obj, const std::string& key,
                                             const std::string& path, const std::string& source,
                                             int64_t min_value, int64_t max_value) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::optional<int64_t>();
  const json& v = obj[key];
  std::optional<int64_t> n;
  if (v.is_number_integer()) {
    n = v.is_number_unsigned() ? ExactInt64(static_cast<double>(v.get<uint64_t>()))
                               : std::optional<int64_t>(v.get<int64_t>());
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d != std::trunc(d))
      return Bad(source, path, fmt::format("must be a whole number, got {}", v.dump()));
    n = ExactInt64(d);
  } else {
    return Bad(source, path,
               fmt::format("must be a whole number, not {} {}", v.type_name(), v.dump()));
  }
  if (!n || *n < min_value || *n > max_value)
    return Bad(source, path,
               fmt::format("{} is out of range [{}, {}]", v.dump(), min_value, max_value));
  return n;
}

}  // namespace pentamesh::spec

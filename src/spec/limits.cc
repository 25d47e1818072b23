#include "spec/limits.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "core/numeric.h"

namespace pentamesh::spec {
namespace {

// "<field>: <reason>", or the reason alone for an unnamed value (CLI11 prefixes the flag itself).
core::Status Fail(std::string_view field, const std::string& reason) {
  return core::Status::Error(field.empty() ? reason : fmt::format("{}: {}", field, reason));
}

}  // namespace

core::Status CheckInt(std::string_view field, int64_t value, int64_t min_value, int64_t max_value) {
  if (value < min_value) {
    return Fail(field, fmt::format("must be >= {} (got {})", min_value, value));
  }
  if (value > max_value) {
    return Fail(field, fmt::format("must be <= {} (got {})", max_value, value));
  }
  return core::Status::Ok();
}

core::Status CheckNumber(std::string_view field, double value, double min_value, double max_value,
                         bool strictly_above) {
  if (!std::isfinite(value)) {
    return Fail(field, fmt::format("must be finite (got {})", value));
  }
  if (strictly_above ? value <= min_value : value < min_value) {
    return Fail(field, fmt::format("must be {} {:g} (got {:g})",
                                   strictly_above ? ">" : ">=", min_value, value));
  }
  if (value > max_value) {
    return Fail(field, fmt::format("must be <= {:g} (got {:g})", max_value, value));
  }
  return core::Status::Ok();
}

namespace {

// strtod over the whole text; nullopt when the text is empty or has trailing characters.
std::optional<double> WholeDouble(std::string_view text) {
  const std::string s(text);
  // Decimal only: strtod would also read hexadecimal ("0x10").
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())) ||
      s.find_first_of("xX") != std::string::npos) {
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

core::Result<int64_t> ParseInt(std::string_view field, std::string_view text, int64_t min_value,
                               int64_t max_value) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const long long direct = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
  std::optional<int64_t> v;
  if (!s.empty() && end == s.c_str() + s.size() && errno == 0 &&
      !std::isspace(static_cast<unsigned char>(s.front()))) {
    v = direct;
  } else if (std::optional<double> d = WholeDouble(text)) {
    v = ExactInt64(*d);  // "1e6"; fractions, NaN, infinities and out-of-range values stay nullopt
  }
  if (!v) {
    return Fail(field, fmt::format("'{}' is not an integer", text));
  }
  PM_RETURN_IF_ERROR(CheckInt(field, *v, min_value, max_value));
  return *v;
}

core::Result<double> ParseNumber(std::string_view field, std::string_view text, double min_value,
                                 double max_value, bool strictly_above) {
  std::optional<double> v = WholeDouble(text);
  if (!v) return Fail(field, fmt::format("'{}' is not a number", text));
  PM_RETURN_IF_ERROR(CheckNumber(field, *v, min_value, max_value, strictly_above));
  return *v;
}

core::Result<int64_t> GpuProduct(std::string_view what, std::initializer_list<int64_t> factors) {
  const std::optional<int64_t> product = CheckedProduct(factors);
  if (!product || *product > kMaxGpus) {
    std::string shown;
    for (int64_t f : factors) shown += (shown.empty() ? "" : " x ") + std::to_string(f);
    return core::Status::Error(
        fmt::format("{} = {} exceeds the limit of {} GPUs", what, shown, kMaxGpus));
  }
  return *product;
}

}  // namespace pentamesh::spec

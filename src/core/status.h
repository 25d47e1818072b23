// Status and Result<T>: expected, recoverable errors (bad spec, missing file, corrupt checkpoint).
// Invariant: a Result holds exactly one of a value or a non-OK Status.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace pentamesh::core {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !error_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : error_(true), message_(std::move(message)) {}
  bool error_ = false;
  std::string message_;
};

// g++ 12 has no std::expected; this is the small subset we need.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT: REQUIRES: !status.ok()

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace pentamesh::core

#define PM_STATUS_CONCAT_INNER(a, b) a##b
#define PM_STATUS_CONCAT(a, b) PM_STATUS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define PM_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    ::pentamesh::core::Status pm_status_ = (expr); \
    if (!pm_status_.ok()) return pm_status_;       \
  } while (false)

// PM_ASSIGN_OR_RETURN(auto x, MakeX()); declares/assigns lhs, or returns the error.
#define PM_ASSIGN_OR_RETURN(lhs, expr) \
  PM_ASSIGN_OR_RETURN_IMPL(PM_STATUS_CONCAT(pm_result_, __LINE__), lhs, expr)
#define PM_ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                             \
  if (!result.ok()) return result.status();         \
  lhs = std::move(result).value()

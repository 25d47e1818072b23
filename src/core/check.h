// Always-on invariant checks for programmer errors (never for user input: return a Status).
//   PM_CHECK(h % tp == 0) << "h=" << h << " tp=" << tp;
// On failure prints the expression, file:line and the streamed context, then aborts.
#pragma once

#include <sstream>

namespace pentamesh::core {

class CheckFailure {
 public:
  CheckFailure(const char* expr, const char* file, int line);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `PM_CHECK(c) << x;` compile as a void expression in both branches.
struct CheckVoidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace pentamesh::core

#define PM_CHECK(cond)                         \
  (cond) ? static_cast<void>(0)                \
         : ::pentamesh::core::CheckVoidify() & \
               ::pentamesh::core::CheckFailure(#cond, __FILE__, __LINE__)

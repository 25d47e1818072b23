// Test helpers: deterministic random fills and central finite-difference gradient checks.
// The loss is L = sum(r * y) accumulated in double for a fixed random r; the analytic gradient
// of L w.r.t. an input is compared with (L(x + eps) - L(x - eps)) / (2 eps) element by element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"

namespace pentamesh::testing {

inline std::vector<float> RandomVec(int64_t n, uint64_t stream, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = scale * static_cast<float>(core::CounterRng::Normal(
                                            1234, stream, static_cast<uint64_t>(i)));
  return v;
}

inline double Project(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

// Checks `analytic` = dL/dx for up to max_checks evenly spread elements of x.
inline void CheckGrad(const std::string& what, std::vector<float>& x,
                      const std::vector<float>& analytic, const std::function<double()>& loss,
                      double eps = 3e-3, double atol = 2e-3, double rtol = 2e-2,
                      int max_checks = 64) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const size_t n = x.size();
  const size_t stride = std::max<size_t>(1, n / static_cast<size_t>(max_checks));
  int failures = 0;
  for (size_t i = 0; i < n; i += stride) {
    const float saved = x[i];
    x[i] = static_cast<float>(saved + eps);
    const double up = loss();
    x[i] = static_cast<float>(saved - eps);
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double err = std::fabs(numeric - analytic[i]);
    if (err > atol + rtol * std::fabs(numeric) && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " numeric " << numeric;
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

// max |a - b| / (atol + rtol |b|) <= 1 elementwise.
inline void ExpectNear(const std::string& what, const std::vector<float>& a,
                       const std::vector<double>& b, double atol, double rtol) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > atol + rtol * std::fabs(b[i]) && ++failures <= 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << a[i] << " want " << b[i];
  }
  EXPECT_EQ(failures, 0) << what;
}

}  // namespace pentamesh::testing

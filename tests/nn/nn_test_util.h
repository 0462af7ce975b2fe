// Helpers of the nn tests: named shapes, and initialization statistics with bounds derived from
// the sample count (5 standard errors of the sample mean and variance).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "mixp/tensor.h"

namespace mixp::nn::test {

using NamedShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

inline void expect_named_shapes(const std::vector<std::pair<std::string, Tensor*>>& got,
                                const NamedShapes& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << "at " << i;
    EXPECT_EQ(got[i].second->shape(), Shape(want[i].second)) << got[i].first;
  }
}

struct Moments {
  double mean, var, min, max;
  double n;
};

inline Moments moments(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  Moments m{0, 0, INFINITY, -INFINITY, double(v.size())};
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= m.n;
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= m.n;
  return m;
}

/// U(-bound, bound): every value inside; mean 0 within 5 sigma / sqrt(n), variance bound^2 / 3
/// within 5 standard errors of the sample variance (fourth central moment bound^4 / 5).
inline void expect_uniform(const Tensor& t, double bound) {
  const Moments m = moments(t);
  EXPECT_GE(m.min, -bound);
  EXPECT_LT(m.max, bound);
  const double var = bound * bound / 3;
  EXPECT_NEAR(m.mean, 0.0, 5 * std::sqrt(var / m.n));
  const double mu4 = std::pow(bound, 4) / 5;
  EXPECT_NEAR(m.var, var, 5 * std::sqrt((mu4 - var * var) / m.n));
}

/// N(0, stddev^2): mean within 5 sigma / sqrt(n), variance within 5 sqrt(2 / n) sigma^2.
inline void expect_normal(const Tensor& t, double stddev) {
  const Moments m = moments(t);
  const double var = stddev * stddev;
  EXPECT_NEAR(m.mean, 0.0, 5 * stddev / std::sqrt(m.n));
  EXPECT_NEAR(m.var, var, 5 * var * std::sqrt(2 / m.n));
}

}  // namespace mixp::nn::test

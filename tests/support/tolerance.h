// The one tolerance function of the tests: |got - want| <= atol + rtol |want|, with rtol from
// the output dtype's epsilon (one rounding of the result, plus one of each low-precision
// intermediate the fast path may keep) and from fp32 accumulation over `reduction_length`
// terms, whose worst-case relative error grows as length * 2^-24.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "mixp/dtype.h"
#include "mixp/tensor.h"

namespace mixp::test {

struct Tolerance {
  double atol, rtol;
};

inline Tolerance tolerance(DType dtype, int64_t reduction_length = 1) {
  const double eps = traits(dtype).epsilon;
  const double accumulation = dtype == DType::f64 ? 0x1p-52 : 0x1p-24;
  const double rtol = 2.0 * eps + double(reduction_length) * accumulation;
  return {rtol, rtol};
}

/// Empty when every element is within tolerance, else a description of the worst one.
inline std::string compare(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (!(got.shape() == want.shape())) {
    return "shape " + got.shape().to_string() + " vs " + want.shape().to_string();
  }
  if (got.dtype() != want.dtype()) {
    return std::string("dtype ") + name_of(got.dtype()) + " vs " + name_of(want.dtype());
  }
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    const double excess = std::fabs(g[i] - w[i]) - (tol.atol + tol.rtol * std::fabs(w[i]));
    if (!(excess <= worst)) {
      worst = std::isnan(excess) ? INFINITY : excess;
      at = i;
    }
  }
  if (worst <= 0) return "";
  char text[200];
  std::snprintf(text, sizeof text, "element %zu: got %.17g, want %.17g (atol %.3g, rtol %.3g)", at,
                g[at], w[at], tol.atol, tol.rtol);
  return text;
}

}  // namespace mixp::test

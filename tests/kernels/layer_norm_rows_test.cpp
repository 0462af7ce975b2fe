// Layer norm's row kernels (kernels/layer_norm_rows.h): every ISA gives the scalar kernels'
// bits, forward and backward, at lengths around the 16-lane vectors, with and without the affine
// parameters; and the scalar kernels stay within tolerance(f32) of the formulas in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/layer_norm_rows.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"
#include "mixp/random.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using kernels::NormBackwardRow;
using kernels::NormStats;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// n values around `offset` (a large offset makes x - mean cancel), with a few signed zeros.
std::vector<float> values(int64_t n, double offset, Philox& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = float(offset + rng.normal());
  if (n > 3) v[2] = -0.0f;
  return v;
}

std::vector<uint16_t> bf16_values(int64_t n, Philox& rng) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& e : v) e = bfloat16(float(rng.normal())).bits;
  return v;
}

// Lengths from 1 up: a lone tail, exact vectors, a vector and a tail, gpt's 384, and longer.
constexpr int64_t kLengths[] = {1, 5, 15, 16, 17, 33, 384, 1000};

void expect_same_floats(const std::vector<float>& got, const std::vector<float>& want,
                        const char* what, Isa isa, int64_t n) {
  for (size_t j = 0; j < want.size(); ++j) {
    ASSERT_EQ(bits_of(got[j]), bits_of(want[j]))
        << what << "[" << j << "] on " << name_of(isa) << ", n " << n << ": got " << got[j]
        << ", want " << want[j];
  }
}

struct Forward {
  std::vector<float> y, v;
  std::vector<uint16_t> y16;
  NormStats s{}, s16{};
};

Forward forward(const std::vector<float>& x, const float* w, const float* b, bool scalar) {
  const int64_t n = int64_t(x.size());
  Forward f{std::vector<float>(x.size()), std::vector<float>(x.size()),
            std::vector<uint16_t>(x.size())};
  const float eps = 1e-5f;
  if (scalar) {
    f.s = kernels::ref::layer_norm_row_f32(x.data(), n, w, b, eps, f.v.data(), f.y.data());
    f.s16 = kernels::ref::layer_norm_row_bf16(x.data(), n, w, b, eps, f.v.data(), f.y16.data());
  } else {
    f.s = kernels::layer_norm_row_f32(x.data(), n, w, b, eps, f.v.data(), f.y.data());
    f.s16 = kernels::layer_norm_row_bf16(x.data(), n, w, b, eps, f.v.data(), f.y16.data());
  }
  return f;
}

TEST(LayerNormRows, ForwardGivesTheScalarBitsOnEveryIsa) {
  Philox rng(PhiloxState{21, 0, 0});
  for (int64_t n : kLengths) {
    for (double offset : {0.0, 300.0}) {
      const std::vector<float> x = values(n, offset, rng), w = values(n, 1.0, rng),
                               b = values(n, 0.0, rng);
      for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
        const float* wp = affine >= 1 ? w.data() : nullptr;
        const float* bp = affine == 2 ? b.data() : nullptr;
        const Forward want = forward(x, wp, bp, true);
        for (Isa isa : kAllIsas) {
          if (isa > best_isa()) continue;
          IsaLimit limit(isa);
          const Forward got = forward(x, wp, bp, false);
          EXPECT_EQ(bits_of(got.s.mean), bits_of(want.s.mean)) << name_of(isa) << ", n " << n;
          EXPECT_EQ(bits_of(got.s.rstd), bits_of(want.s.rstd)) << name_of(isa) << ", n " << n;
          EXPECT_EQ(bits_of(got.s16.rstd), bits_of(want.s.rstd)) << name_of(isa) << ", n " << n;
          expect_same_floats(got.y, want.y, "y", isa, n);
          for (size_t j = 0; j < x.size(); ++j) {
            ASSERT_EQ(got.y16[j], bfloat16(want.y[j]).bits)
                << "bf16 y[" << j << "] on " << name_of(isa) << ", n " << n;
          }
        }
      }
    }
  }
}

TEST(LayerNormRows, ScalarForwardIsWithinToleranceOfDouble) {
  Philox rng(PhiloxState{22, 0, 0});
  for (int64_t n : kLengths) {
    const std::vector<float> x = values(n, 3.0, rng), w = values(n, 1.0, rng),
                             b = values(n, 0.0, rng);
    const Forward got = forward(x, w.data(), b.data(), true);
    double mean = 0, var = 0;
    for (float e : x) mean += e;
    mean /= double(n);
    for (float e : x) var += (e - mean) * (e - mean);
    const double rstd = 1.0 / std::sqrt(var / double(n) + 1e-5);
    const test::Tolerance tol = test::tolerance(DType::f32, n);
    for (size_t j = 0; j < x.size(); ++j) {
      const double want = (x[j] - mean) * rstd * w[j] + b[j];
      // The error is relative to the terms' size, not the result's: x - mean cancels.
      const double terms =
          (std::fabs(x[j]) + std::fabs(mean)) * rstd * std::fabs(w[j]) + std::fabs(b[j]);
      EXPECT_LE(std::fabs(got.y[j] - want), tol.rtol * terms) << "n " << n << ", j " << j;
    }
    EXPECT_NEAR(got.s.rstd, rstd, tol.rtol * rstd) << "n " << n;
  }
}

struct Backward {
  std::vector<float> pw, pb, dx;
};

// Three rows' backward into one set of running sums (starting from nonzero values), the last
// row without dx; g in fp32 or bf16.
Backward backward(const std::vector<std::vector<float>>& xs, const std::vector<NormStats>& stats,
                  const std::vector<std::vector<uint16_t>>& gs, const float* w, bool bf16_grad,
                  bool scalar) {
  const size_t n = xs[0].size();
  Backward r{std::vector<float>(n, 0.25f), std::vector<float>(n, -0.5f), std::vector<float>(2 * n)};
  std::vector<float> xh(n), gw(n), g32(n);
  for (size_t row = 0; row < xs.size(); ++row) {
    for (size_t j = 0; j < n; ++j) g32[j] = float(bfloat16::from_bits(gs[row][j]));
    const NormBackwardRow out{.xhat = xh.data(),
                              .gw = gw.data(),
                              .pw = r.pw.data(),
                              .pb = r.pb.data(),
                              .dx = row < 2 ? r.dx.data() + row * n : nullptr};
    const float* x = xs[row].data();
    const int64_t len = int64_t(n);
    if (scalar && bf16_grad) {
      kernels::ref::layer_norm_backward_row_bf16(x, gs[row].data(), w, stats[row], len, out);
    } else if (scalar) {
      kernels::ref::layer_norm_backward_row_f32(x, g32.data(), w, stats[row], len, out);
    } else if (bf16_grad) {
      kernels::layer_norm_backward_row_bf16(x, gs[row].data(), w, stats[row], len, out);
    } else {
      kernels::layer_norm_backward_row_f32(x, g32.data(), w, stats[row], len, out);
    }
  }
  return r;
}

TEST(LayerNormRows, BackwardGivesTheScalarBitsOnEveryIsa) {
  Philox rng(PhiloxState{23, 0, 0});
  for (int64_t n : kLengths) {
    std::vector<std::vector<float>> xs;
    std::vector<std::vector<uint16_t>> gs;
    std::vector<NormStats> stats;
    for (int row = 0; row < 3; ++row) {
      xs.push_back(values(n, row == 1 ? 100.0 : 0.0, rng));
      gs.push_back(bf16_values(n, rng));
      std::vector<float> v(static_cast<size_t>(n)), y(static_cast<size_t>(n));
      stats.push_back(kernels::ref::layer_norm_row_f32(xs.back().data(), n, nullptr, nullptr, 1e-5f,
                                                       v.data(), y.data()));
    }
    const std::vector<float> w = values(n, 1.0, rng);
    for (const float* wp : {static_cast<const float*>(nullptr), w.data()}) {
      for (bool bf16_grad : {false, true}) {
        const Backward want = backward(xs, stats, gs, wp, bf16_grad, true);
        if (bf16_grad) {  // the widening is exact: the same bits as from fp32
          const Backward from_f32 = backward(xs, stats, gs, wp, false, true);
          expect_same_floats(want.dx, from_f32.dx, "scalar bf16-grad dx", Isa::scalar, n);
        }
        for (Isa isa : kAllIsas) {
          if (isa > best_isa()) continue;
          IsaLimit limit(isa);
          const Backward got = backward(xs, stats, gs, wp, bf16_grad, false);
          expect_same_floats(got.pw, want.pw, "pw", isa, n);
          expect_same_floats(got.pb, want.pb, "pb", isa, n);
          expect_same_floats(got.dx, want.dx, "dx", isa, n);
        }
      }
    }
  }
}

TEST(LayerNormRows, ScalarBackwardIsWithinToleranceOfDouble) {
  Philox rng(PhiloxState{24, 0, 0});
  for (int64_t n : kLengths) {
    const std::vector<float> x = values(n, 2.0, rng), w = values(n, 1.0, rng);
    const std::vector<uint16_t> g = bf16_values(n, rng);
    std::vector<float> v(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    const NormStats s =
        kernels::ref::layer_norm_row_f32(x.data(), n, nullptr, nullptr, 1e-5f, v.data(), y.data());
    const Backward got = backward({x}, {s}, {g}, w.data(), true, true);
    std::vector<double> xh(static_cast<size_t>(n)), gw(static_cast<size_t>(n));
    double mean_gw = 0, mean_gwx = 0;
    for (size_t j = 0; j < size_t(n); ++j) {
      xh[j] = (double(x[j]) - s.mean) * s.rstd;
      gw[j] = double(float(bfloat16::from_bits(g[j]))) * w[j];
      mean_gw += gw[j] / double(n);
      mean_gwx += gw[j] * xh[j] / double(n);
    }
    const test::Tolerance tol = test::tolerance(DType::f32, n);
    double scale = 0;  // the size of the terms dx cancels
    for (size_t j = 0; j < size_t(n); ++j) {
      scale = std::max(
          scale, s.rstd * (std::fabs(gw[j]) + std::fabs(mean_gw) + std::fabs(xh[j] * mean_gwx)));
    }
    for (size_t j = 0; j < size_t(n); ++j) {
      const double want = s.rstd * (gw[j] - mean_gw - xh[j] * mean_gwx);
      EXPECT_LE(std::fabs(got.dx[j] - want), tol.rtol * scale) << "n " << n << ", j " << j;
      const double g0 = double(float(bfloat16::from_bits(g[j])));
      EXPECT_NEAR(got.pw[j], 0.25 + g0 * xh[j], tol.rtol * (0.25 + std::fabs(g0 * xh[j])));
      EXPECT_EQ(got.pb[j], float(-0.5 + g0));  // one fp32 addition, correctly rounded
    }
  }
}

}  // namespace
}  // namespace mixp

// gemm_product's and linear_weight_grads' tiles_f16 candidates (kernels/f16_tiles.h): an f16 a
// with an f32 or f16 b, on every kind of tail (rows not a multiple of 6, columns not a multiple
// of 16 or 64, k not a multiple of 16), holds the bits of the chain of fused multiply-adds it
// promises, computed here with std::fma; is within the tolerance of the reference's double sums;
// reads an f32 b as its rounding to f16; and gives the same bits for any thread count. A weight
// gradient from f16 g and x into fp32 is that chain rounded to f16's value.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/gemm_product.h"
#include "kernels/linear_grads.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"
#include "mixp/random.h"
#include "mixp/runtime.h"
#include "support/tolerance.h"

namespace mixp::kernels {
namespace {

struct Case {
  GemmShape shape;
  DType b_dtype, out_dtype;
  bool bias;
};

// Rows 1, 5, 6, 7, 64, 100 and 128; columns 1, 10, 16, 63, 64, 80, 130 and 200; k 1, 15, 16,
// 17, 100, 400 and 784; B stored either way; each output dtype and b dtype; with a bias and
// without.
std::vector<Case> cases() {
  auto s = [](int64_t m, int64_t n, int64_t k, bool trans_b, bool trans_a = false) {
    return GemmShape{.m = m, .n = n, .k = k, .trans_a = trans_a, .trans_b = trans_b};
  };
  return {{s(64, 200, 784, true), DType::f32, DType::f16, true},   // an mlp-like first layer
          {s(64, 80, 100, false), DType::f32, DType::f16, false},  // an input gradient
          {s(7, 63, 17, true), DType::f32, DType::f32, true},
          {s(5, 10, 15, false), DType::f16, DType::f16, true},
          {s(6, 16, 16, true), DType::f16, DType::f32, false},
          {s(1, 1, 1, true), DType::f32, DType::f16, true},
          {s(1, 64, 100, false), DType::f32, DType::f32, false},
          {s(128, 64, 16, true), DType::f16, DType::f16, false},
          {s(128, 80, 1, false), DType::f32, DType::f16, true},
          {s(100, 130, 400, false), DType::f32, DType::f16, true},  // three panels, two threads
          // A transposed (a weight gradient: m outputs, k the batch's rows)
          {s(300, 80, 64, false, true), DType::f16, DType::f32, false},
          {s(1024, 130, 64, false, true), DType::f16, DType::f16, false},  // two threads
          {s(17, 10, 5, true, true), DType::f32, DType::f16, true}};
}

struct Operands {
  Tensor a, b, bias;
};

// a in [-1, 1) f16; b fp32 with a fifth of its values at ties between two f16 values (or b in
// f16); a bias of fp32 values.
Operands operands(const Case& c, Philox& rng) {
  const GemmShape& s = c.shape;
  Operands o;
  o.a =
      s.trans_a ? randn({s.k, s.m}, rng, 0.5, DType::f16) : randn({s.m, s.k}, rng, 0.5, DType::f16);
  Tensor b = randn({s.k * s.n}, rng, 0.5, DType::f32);
  float* bv = b.data<float>();
  for (int64_t i = 0; i < b.numel(); i += 5) {  // f16 keeps 13 bits fewer: a tie at bit 12
    bv[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(bv[i]) & ~0x1fffu) | 0x1000u);
  }
  o.b = c.b_dtype == DType::f32 ? b : b.to(DType::f16);
  if (c.bias) o.bias = randn({s.n}, rng, 0.5, DType::f32);
  return o;
}

Tensor product(const Case& c, const Operands& o) {
  Tensor out = empty({c.shape.m, c.shape.n}, c.out_dtype);
  gemm_product(c.shape, o.a, o.b, o.bias, out);
  return out;
}

// A's element (i, kk) of op(A).
double a_value(const GemmShape& s, const std::vector<double>& a, int64_t i, int64_t kk) {
  return a[size_t(s.trans_a ? kk * s.m + i : i * s.k + kk)];
}

// B's element (kk, j), as the product reads it: an f32 b rounded to f16's value.
float b_value(const Case& c, const std::vector<double>& b, int64_t kk, int64_t j) {
  const GemmShape& s = c.shape;
  const double v = b[size_t(s.trans_b ? j * s.k + kk : kk * s.n + j)];
  return float(float16(float(v)));
}

TEST(F16Tiles, EachSumIsTheChainOfFusedMultiplyAddsInTheOrderOfK) {
  if (best_isa() < Isa::avx512 || reference_mode()) GTEST_SKIP() << "no AVX-512 F candidate";
  Philox rng(PhiloxState{41, 0, 0});
  for (const Case& c : cases()) {
    const GemmShape& s = c.shape;
    const Operands o = operands(c, rng);
    Tensor out = empty({s.m, s.n}, c.out_dtype);
    ASSERT_STREQ(gemm_product.select(s, o.a, o.b, o.bias, out).name, "tiles_f16")
        << "m " << s.m << " n " << s.n << " k " << s.k;
    const std::vector<double> got = product(c, o).to_vector();
    const std::vector<double> a = o.a.to_vector(), b = o.b.to_vector();
    const std::vector<double> bias = c.bias ? o.bias.to_vector() : std::vector<double>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        float sum = 0.0f;
        for (int64_t kk = 0; kk < s.k; ++kk) {
          sum = std::fma(float(a_value(s, a, i, kk)), b_value(c, b, kk, j), sum);
        }
        if (c.bias) sum += float(bias[size_t(j)]);
        const double want = c.out_dtype == DType::f16 ? double(float(float16(sum))) : double(sum);
        if (got[size_t(i * s.n + j)] != want && ++wrong <= 3) {
          ADD_FAILURE() << "m " << s.m << " n " << s.n << " k " << s.k << " at (" << i << ", " << j
                        << "): " << got[size_t(i * s.n + j)] << ", want " << want;
        }
      }
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(F16Tiles, WithinToleranceOfTheReferencesDoubleSums) {
  Philox rng(PhiloxState{42, 0, 0});
  for (const Case& c : cases()) {
    const GemmShape& s = c.shape;
    const Operands o = operands(c, rng);
    const Tensor got = product(c, o);
    std::optional<ReferenceMode> reference(std::in_place);
    const Tensor want = product(c, o);
    reference.reset();
    // Relative to the sum of the terms' magnitudes (the sums may cancel), one rounding of the
    // output and fp32 accumulation over k terms and the bias.
    const test::Tolerance tol = test::tolerance(c.out_dtype, s.k + 1);
    const std::vector<double> a = o.a.to_vector(), b = o.b.to_vector();
    const std::vector<double> gv = got.to_vector(), wv = want.to_vector();
    const std::vector<double> bias = c.bias ? o.bias.to_vector() : std::vector<double>();
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double magnitude = c.bias ? std::fabs(bias[size_t(j)]) : 0.0;
        for (int64_t kk = 0; kk < s.k; ++kk) {
          magnitude += std::fabs(a_value(s, a, i, kk) * double(b_value(c, b, kk, j)));
        }
        const size_t e = size_t(i * s.n + j);
        ASSERT_LE(std::fabs(gv[e] - wv[e]), 2 * (tol.atol + tol.rtol * magnitude))
            << "m " << s.m << " n " << s.n << " k " << s.k << " at (" << i << ", " << j << ")";
      }
    }
  }
}

TEST(F16Tiles, AnFp32BGivesTheBitsOfItsF16RoundingForAnyThreadCount) {
  if (best_isa() < Isa::avx512 || reference_mode()) GTEST_SKIP() << "no AVX-512 F candidate";
  const int threads = num_threads();
  Philox rng(PhiloxState{43, 0, 0});
  for (const Case& c : cases()) {
    const Operands o = operands(c, rng);
    set_num_threads(2);
    const std::vector<double> two = product(c, o).to_vector();
    Operands rounded = o;
    rounded.b = o.b.to(DType::f16);
    const std::vector<double> from_f16 = product(c, rounded).to_vector();
    set_num_threads(1);
    const std::vector<double> one = product(c, o).to_vector();
    set_num_threads(threads);
    EXPECT_EQ(two, from_f16) << "m " << c.shape.m << " n " << c.shape.n << " k " << c.shape.k;
    EXPECT_EQ(two, one) << "m " << c.shape.m << " n " << c.shape.n << " k " << c.shape.k;
  }
}

// An autocast linear's fp32 weight gradient from f16 g and x: each element the chain of FMAs
// over the rows, rounded to f16's value and kept in fp32, with no pass after the product.
TEST(F16Tiles, AWeightGradientIntoFp32IsTheChainRoundedToF16sValue) {
  if (best_isa() < Isa::avx512 || reference_mode()) GTEST_SKIP() << "no AVX-512 F candidate";
  Philox rng(PhiloxState{44, 0, 0});
  const int64_t rows = 64, in = 200, out = 70;
  const Tensor g = randn({rows, out}, rng, 1.0, DType::f16),
               x = randn({rows, in}, rng, 1.0, DType::f16);
  Tensor dw = empty({out, in}, DType::f32), db;
  ASSERT_STREQ(linear_weight_grads.select(g, x, dw, db).name, "tiles_f16");
  EXPECT_FALSE(linear_weight_grads(g, x, dw, db));
  const std::vector<double> gv = g.to_vector(), xv = x.to_vector(), got = dw.to_vector();
  int64_t wrong = 0;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      float sum = 0.0f;
      for (int64_t r = 0; r < rows; ++r) {
        sum = std::fma(float(gv[size_t(r * out + o)]), float(xv[size_t(r * in + i)]), sum);
      }
      const double want = double(float(float16(sum)));
      if (got[size_t(o * in + i)] != want && ++wrong <= 3) {
        ADD_FAILURE() << "dw (" << o << ", " << i << "): " << got[size_t(o * in + i)] << ", want "
                      << want;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace mixp::kernels

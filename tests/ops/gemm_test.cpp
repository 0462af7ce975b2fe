// The rounding of bf16 products into bf16 results (ops/gemm_op.cpp). On CPUs with AVX-512 BF16,
// oneDNN rounds its fp32 sums to bf16 itself as it stores them; these tests hold that rounding
// against mixp's own rounding of the same sums (the fp32 result of the same product).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_product.h"
#include "mixp/amp/autocast.h"
#include "mixp/float_types.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"
#include "ops/gemm_op.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using kernels::GemmShape;

// Element i of t as bits: 16 or 32 of them by its dtype.
uint32_t bits_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f32 ? std::bit_cast<uint32_t>(t.data<float>()[i])
                                 : static_cast<const uint16_t*>(t.raw_data())[i];
}

std::string first_difference(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || !(got.shape() == want.shape())) {
    return "dtype or shape: " + got.shape().to_string() + " " + want.shape().to_string();
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (bits_at(got, i) != bits_at(want, i)) {
      return "element " + std::to_string(i) + ": " + std::to_string(bits_at(got, i)) + ", want " +
             std::to_string(bits_at(want, i));
    }
  }
  return "";
}

uint16_t bf16_bits(const Tensor& t, int64_t i) {
  return static_cast<const uint16_t*>(t.raw_data())[i];
}

bool is_subnormal(float x) { return x != 0.0f && std::fabs(x) < 0x1p-126f; }

// Whether the fast path lets oneDNN round: it then flushes fp32 subnormal sums to zero, as
// vdpbf16ps flushes the partial sums before them. Elsewhere mixp rounds, keeping them.
bool onednn_rounds() { return kernels::gemm_fast_has_bf16() && !reference_mode(); }

// The product of bf16 operands into bf16, and into fp32 rounded by mixp's conversion (exact
// round to nearest even, tested on the reference vectors): the same bits, element by element,
// except that an fp32 subnormal comes out as a zero of its sign where oneDNN rounds.
std::string compare_roundings(const GemmShape& s, const Tensor& a, const Tensor& b,
                              const Tensor& bias) {
  const Tensor direct = ops::detail::gemm(s, a, b, Shape{s.batch, s.m, s.n}, DType::bf16, bias);
  const Tensor sums = ops::detail::gemm(s, a, b, Shape{s.batch, s.m, s.n}, DType::f32, bias);
  const Tensor rounded = sums.to(DType::bf16);
  const float* f = sums.data<float>();
  for (int64_t i = 0; i < sums.numel(); ++i) {
    const uint16_t want = is_subnormal(f[i]) && onednn_rounds()
                              ? uint16_t(std::bit_cast<uint32_t>(f[i]) >> 16 & 0x8000)
                              : bf16_bits(rounded, i);
    if (bf16_bits(direct, i) != want) {
      return "element " + std::to_string(i) + ": fp32 sum " + std::to_string(f[i]) + ", bf16 " +
             std::to_string(bf16_bits(direct, i)) + ", want " + std::to_string(want);
    }
  }
  return "";
}

TEST(Gemm, Bf16ResultIsTheFp32SumRoundedToNearestEven) {
  struct Case {
    GemmShape shape;
    bool bias;
  };
  // A product large enough to run in row blocks (its fp32 result is above 8 MiB), one with A
  // transposed (as the weight gradient), batched ones, and B shared by every batch.
  const Case cases[] = {
      {{1, 2200, 1024, 40, false, true, 1, 1}, true},
      {{1, 300, 200, 500, true, false, 1, 1}, false},
      {{6, 65, 70, 33, false, true, 6, 6}, false},
      {{4, 17, 31, 40, false, false, 4, 1}, false},
  };
  Philox rng(PhiloxState{21, 0, 0});
  for (const Case& c : cases) {
    const GemmShape& s = c.shape;
    Tensor a = randn({s.batch_a * s.m * s.k}, rng, 1.0, DType::bf16);
    Tensor b = randn({s.batch_b * s.k * s.n}, rng, 1.0, DType::bf16);
    // Infinities and a NaN reach some sums; the NaN's rounding must match too.
    auto* a_bits = static_cast<uint16_t*>(a.raw_data());
    auto* b_bits = static_cast<uint16_t*>(b.raw_data());
    a_bits[3] = 0x7f80;   // +inf
    b_bits[5] = 0xff80;   // -inf
    a_bits[11] = 0x7fa1;  // a signalling NaN with a payload
    const Tensor bias = c.bias ? randn({s.n}, rng, 1.0, DType::bf16) : Tensor();
    EXPECT_EQ(compare_roundings(s, a, b, bias), "")
        << "batch " << s.batch << " m " << s.m << " n " << s.n << " k " << s.k;
    ReferenceMode reference;
    EXPECT_EQ(compare_roundings(s, a, b, bias), "") << "reference, m " << s.m;
  }
}

TEST(Gemm, Bf16ResultOfASubnormalSumIsZeroWhereOneDnnRounds) {
  // 1.5 * 2^-63 * 2^-63 = 1.5 * 2^-126 (a normal sum), plus a bias of -2^-126: 2^-127, an fp32
  // subnormal, which bf16 also represents (0x0040).
  const GemmShape s{1, 1, 1, 1, false, false, 1, 1};
  const Tensor a = from_values({1.5 * std::ldexp(1.0, -63)}, Shape{1, 1}, DType::bf16);
  const Tensor b = from_values({std::ldexp(1.0, -63)}, Shape{1, 1}, DType::bf16);
  const Tensor bias = from_values({-std::ldexp(1.0, -126)}, Shape{1}, DType::bf16);
  const Tensor sums = ops::detail::gemm(s, a, b, Shape{1, 1}, DType::f32, bias);
  EXPECT_EQ(sums.data<float>()[0], std::ldexp(1.0f, -127));
  const Tensor direct = ops::detail::gemm(s, a, b, Shape{1, 1}, DType::bf16, bias);
  EXPECT_EQ(bf16_bits(direct, 0), onednn_rounds() ? 0x0000 : 0x0040);
  EXPECT_EQ(compare_roundings(s, a, b, bias), "");
  ReferenceMode reference;
  EXPECT_EQ(bf16_bits(ops::detail::gemm(s, a, b, Shape{1, 1}, DType::bf16, bias), 0), 0x0040);
}

// An fp32 b with a bf16 a is read as b.to(bf16): the bits of the product of the rounded b, on
// every candidate (the pair tiles, which round b as they pack it; oneDNN and the reference, which
// take the rounded copy). The values of b lie between bf16 values, some of them at ties.
TEST(Gemm, Fp32BIsReadAsItsBf16Rounding) {
  struct Case {
    GemmShape shape;
    bool bias;
  };
  const Case cases[] = {
      {{1, 64, 1024, 784, false, true, 1, 1}, true},   // the mlp's first layer
      {{1, 64, 1024, 1024, false, false, 1, 1}, false},  // its second layer's input gradient
      {{1, 600, 96, 130, false, true, 1, 1}, false},    // rows for both threads
      {{1, 64, 10, 1024, false, true, 1, 1}, true},     // n not a multiple of 16: oneDNN
  };
  Philox rng(PhiloxState{31, 0, 0});
  for (const Case& c : cases) {
    const GemmShape& s = c.shape;
    const Tensor a = randn({s.m, s.k}, rng, 1.0, DType::bf16);
    Tensor b = randn({s.k * s.n}, rng, 1.0, DType::f32);
    float* bv = b.data<float>();
    for (int64_t i = 0; i < b.numel(); i += 5) {  // a tie between two bf16 values
      bv[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(bv[i]) & 0xffff0000u) | 0x8000u);
    }
    const Tensor bias = c.bias ? randn({s.n}, rng, 1.0, DType::bf16) : Tensor();
    const Tensor rounded_b = b.to(DType::bf16);
    Tensor out = empty({s.m, s.n}, DType::bf16);
    if (kernels::gemm_fast_has_bf16() && !reference_mode() && s.n % 16 == 0) {
      EXPECT_STREQ(kernels::gemm_product.select(s, a, b, bias, out).name, "pairs_bf16")
          << "m " << s.m << " n " << s.n;
    }
    for (bool reference : {false, true}) {
      std::optional<ReferenceMode> mode;
      if (reference) mode.emplace();
      const Tensor got = ops::detail::gemm(s, a, b, Shape{s.m, s.n}, DType::bf16, bias);
      const Tensor want = ops::detail::gemm(s, a, rounded_b, Shape{s.m, s.n}, DType::bf16, bias);
      if (kernels::gemm_product.select(s, a, b, bias, out).name ==
          std::string(kernels::gemm_product.select(s, a, rounded_b, bias, out).name)) {
        EXPECT_EQ(first_difference(got, want), "") << "m " << s.m << " n " << s.n;
      } else {  // another candidate for the bf16 b: the same sums in another order
        // Both within the tolerance of the exact sum, relative to the sum of the terms'
        // magnitudes (B stored [n][k]), so within twice of each other.
        const test::Tolerance tol = test::tolerance(DType::bf16, s.k + 1);
        const std::vector<double> av = a.to_vector(), bw = rounded_b.to_vector();
        const std::vector<double> gv = got.to_vector(), wv = want.to_vector();
        const std::vector<double> biases = c.bias ? bias.to_vector() : std::vector<double>();
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < s.n; ++j) {
            double magnitude = c.bias ? std::fabs(biases[size_t(j)]) : 0.0;
            for (int64_t k = 0; k < s.k; ++k) {
              magnitude += std::fabs(av[size_t(i * s.k + k)] * bw[size_t(j * s.k + k)]);
            }
            const size_t e = size_t(i * s.n + j);
            ASSERT_LE(std::fabs(gv[e] - wv[e]), 2 * (tol.atol + tol.rtol * magnitude))
                << "m " << s.m << " row " << i << " column " << j;
          }
        }
      }
    }
  }
}

// Under bf16 autocast an fp32 parameter goes to the linear's products as it is; the output and
// the gradients have the bits of the path through autocast's cast (the same candidates from
// 512 rows), and the weight's gradient is fp32.
TEST(Gemm, AutocastLinearWithAnFp32WeightHasTheBitsOfTheCastWeight) {
  Philox rng(PhiloxState{32, 0, 0});
  for (int64_t rows : {600, 1}) {
    const int64_t in = 96, out = 48;
    const Tensor x = randn({rows, in}, rng, 1.0, DType::f32);
    const Tensor w0 = randn({out, in}, rng, 0.1, DType::f32), b0 = randn({out}, rng, 0.1, DType::f32);
    const Tensor g = randn({rows, out}, rng, 1.0, DType::bf16);
    Tensor w = w0.clone().set_requires_grad(true), b = b0.clone().set_requires_grad(true);
    Tensor y;
    {
      amp::Autocast autocast(DType::bf16);
      y = ops::linear(x, w, b);
    }
    y.backward(g);
    Tensor w2 = w0.clone().set_requires_grad(true), b2 = b0.clone().set_requires_grad(true);
    const Tensor y2 = ops::linear(x.to(DType::bf16), w2.to(DType::bf16), b2.to(DType::bf16));
    y2.backward(g);
    ASSERT_EQ(y.dtype(), DType::bf16);
    ASSERT_EQ(w.grad().dtype(), DType::f32);
    if (rows >= 512) {
      EXPECT_EQ(first_difference(y, y2), "") << "rows " << rows;
      EXPECT_EQ(first_difference(w.grad(), w2.grad()), "") << "rows " << rows;
      EXPECT_EQ(first_difference(b.grad(), b2.grad()), "") << "rows " << rows;
    } else {
      // Another candidate below 512 rows for the bf16 weight: both within the tolerance of the
      // exact sum, relative to the sum of the terms' magnitudes.
      const test::Tolerance tol = test::tolerance(DType::bf16, in + 1);
      const std::vector<double> got = y.to_vector(), want = y2.to_vector();
      const std::vector<double> xv = x.to(DType::bf16).to_vector(),
                                wv = w0.to(DType::bf16).to_vector(),
                                bv = b0.to(DType::bf16).to_vector();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < out; ++o) {
          double magnitude = std::fabs(bv[size_t(o)]);
          for (int64_t i = 0; i < in; ++i)
            magnitude += std::fabs(xv[size_t(r * in + i)] * wv[size_t(o * in + i)]);
          const size_t e = size_t(r * out + o);
          ASSERT_LE(std::fabs(got[e] - want[e]), 2 * (tol.atol + tol.rtol * magnitude))
              << "row " << r << " column " << o;
        }
      }
      EXPECT_EQ(first_difference(w.grad(), w2.grad()), "");
    }
  }
}

// Under f16 autocast too an fp32 parameter goes to the linear's products as it is, rounded to
// f16's values in fp32 (this CPU has no fp16 arithmetic): the output and every gradient have
// the bits of the path through autocast's cast, the weight's gradient in fp32, at any rows.
TEST(Gemm, AutocastF16LinearWithAnFp32WeightHasTheBitsOfTheCastWeight) {
  Philox rng(PhiloxState{33, 0, 0});
  for (int64_t rows : {64, 1, 7}) {
    const int64_t in = 96, out = 48;
    const Tensor x0 = randn({rows, in}, rng, 1.0, DType::f32);
    // Some weights past f16's largest finite value and some in its subnormals.
    Tensor w0 = randn({out, in}, rng, 0.1, DType::f32);
    w0.data<float>()[3] = 70000.0f;
    w0.data<float>()[5] = 3e-6f;
    const Tensor b0 = randn({out}, rng, 0.1, DType::f32);
    const Tensor g = randn({rows, out}, rng, 1.0, DType::f16);
    Tensor x = x0.clone().set_requires_grad(true);
    Tensor w = w0.clone().set_requires_grad(true), b = b0.clone().set_requires_grad(true);
    Tensor y;
    {
      amp::Autocast autocast(DType::f16);
      y = ops::linear(x, w, b);
    }
    y.backward(g);
    Tensor x2 = x0.clone().set_requires_grad(true);
    Tensor w2 = w0.clone().set_requires_grad(true), b2 = b0.clone().set_requires_grad(true);
    const Tensor y2 =
        ops::linear(x2.to(DType::f16), w2.to(DType::f16), b2.to(DType::f16));
    y2.backward(g);
    ASSERT_EQ(y.dtype(), DType::f16);
    ASSERT_EQ(w.grad().dtype(), DType::f32);
    EXPECT_EQ(first_difference(y, y2), "") << "rows " << rows;
    EXPECT_EQ(first_difference(x.grad(), x2.grad()), "") << "rows " << rows;
    EXPECT_EQ(first_difference(w.grad(), w2.grad()), "") << "rows " << rows;
    EXPECT_EQ(first_difference(b.grad(), b2.grad()), "") << "rows " << rows;
  }
}

}  // namespace
}  // namespace mixp

// Vectorized fp32 math (kernels/vmath.h): every ISA path gives the bits of the scalar kernels,
// and those stay within tolerance(f32) of the formulas computed in double.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <concepts>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/vmath.h"
#include "kernels/vmath_isa.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"
#include "mixp/random.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

// A dense sweep of [-20, 20], the edges of exp's range (overflow near 88.7, subnormal results
// below -87.3, zero below -103.9), signed zeros, infinities, NaN and random normals.
std::vector<float> inputs() {
  std::vector<float> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(float(i) * 1e-4f);
  for (float x = -110.f; x <= 95.f; x += 0.01f) xs.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f,
                  88.72283f, 88.72284f, -87.33654f, -103.97208f, -149.f, 127.9f, 1e30f, -1e30f})
    xs.push_back(x);
  Philox rng(PhiloxState{5, 0, 0});
  for (int i = 0; i < 4099; ++i) xs.push_back(float(3.0 * rng.normal()));
  return xs;
}

// A kernel of the registry (chosen per call, so IsaLimit picks the candidate) or a function.
template <typename F>
concept Kernel1 = std::invocable<const F&, const float*, float*, int64_t>;

// The kernel at every ISA, at awkward lengths and offsets, against the scalar kernel's bits.
template <Kernel1 K, Kernel1 S>
void expect_same_bits_on_every_isa(const K& kernel, const S& scalar) {
  const std::vector<float> x = inputs();
  std::vector<float> want(x.size());
  scalar(x.data(), want.data(), int64_t(x.size()));
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    for (const auto& [offset, n] : std::vector<std::pair<size_t, size_t>>{
             {0, x.size()}, {3, 1}, {5, 15}, {7, 17}, {1, 1000}}) {
      std::vector<float> got(n);
      kernel(x.data() + offset, got.data(), int64_t(n));
      ASSERT_EQ(std::memcmp(got.data(), want.data() + offset, n * sizeof(float)), 0)
          << name_of(isa) << ", offset " << offset << ", n " << n;
    }
  }
}

void gelu_backward_of_ones(const float* x, float* dx, int64_t n) {
  const std::vector<float> g(static_cast<size_t>(n), 1.0f);
  kernels::gelu_tanh_backward_f32(g.data(), x, dx, n);
}
void gelu_backward_of_ones_ref(const float* x, float* dx, int64_t n) {
  const std::vector<float> g(static_cast<size_t>(n), 1.0f);
  kernels::ref::gelu_tanh_backward_f32(g.data(), x, dx, n);
}

// Attention's row kernels with fixed scalars, in the shape of the others (y from x).
constexpr float kScale = 0.125f, kShift = 1.5f, kDivisor = 3.7f, kDot = 0.3f;
void scale_shift_exp(const float* x, float* y, int64_t n) {
  kernels::scale_shift_exp_f32(x, y, n, kScale, kShift);
}
void scale_shift_exp_ref(const float* x, float* y, int64_t n) {
  kernels::ref::scale_shift_exp_f32(x, y, n, kScale, kShift);
}
void divide(const float* x, float* y, int64_t n) {
  std::memcpy(y, x, size_t(n) * sizeof(float));
  kernels::divide_f32(y, n, kDivisor);
}
void divide_ref(const float* x, float* y, int64_t n) {
  std::memcpy(y, x, size_t(n) * sizeof(float));
  kernels::ref::divide_f32(y, n, kDivisor);
}
// p = x and dp = x - 1 (elementwise, so that any part of a sweep gives that part's result).
void score_grad(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - 1.0f;
  kernels::score_grad_f32(x, y, n, kDot, kScale);
}
void score_grad_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - 1.0f;
  kernels::ref::score_grad_f32(x, y, n, kDot, kScale);
}

TEST(Vmath, EveryIsaGivesTheScalarBits) {
  expect_same_bits_on_every_isa(scale_shift_exp, scale_shift_exp_ref);
  expect_same_bits_on_every_isa(divide, divide_ref);
  expect_same_bits_on_every_isa(score_grad, score_grad_ref);
  expect_same_bits_on_every_isa(kernels::exp_f32, kernels::ref::exp_f32);
  expect_same_bits_on_every_isa(kernels::gelu_tanh_f32, kernels::ref::gelu_tanh_f32);
  expect_same_bits_on_every_isa(gelu_backward_of_ones, gelu_backward_of_ones_ref);
}

// The bf16 gelu kernels on every 16-bit pattern as x (subnormals, infinities, NaNs), against the
// composition they replace: widen, the fp32 kernel, round with the conversion. Every ISA, tails
// included; the backward with g from a second sweep of patterns.
TEST(Vmath, Bf16GeluGivesTheBitsOfWideningTheFp32KernelAndRounding) {
  std::vector<uint16_t> x(65536 + 5), g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = uint16_t(i);
    g[i] = uint16_t((i * 40503u + 12345u) & 0xffff);
  }
  std::vector<float> wide_x(x.size()), wide_g(x.size()), y(x.size()), dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    wide_x[i] = float(bfloat16::from_bits(x[i]));
    wide_g[i] = float(bfloat16::from_bits(g[i]));
  }
  kernels::ref::gelu_tanh_f32(wide_x.data(), y.data(), int64_t(x.size()));
  kernels::ref::gelu_tanh_backward_f32(wide_g.data(), wide_x.data(), dx.data(), int64_t(x.size()));
  std::vector<uint16_t> want_y(x.size()), want_dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want_y[i] = bfloat16(y[i]).bits;
    want_dx[i] = bfloat16(dx[i]).bits;
  }
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    for (const auto& [offset, n] : std::vector<std::pair<size_t, size_t>>{
             {0, x.size()}, {3, 1}, {5, 15}, {7, 17}, {1, 1000}}) {
      std::vector<uint16_t> got(n), got_dx(n), scalar(n), scalar_dx(n);
      kernels::gelu_tanh_bf16(x.data() + offset, got.data(), int64_t(n));
      kernels::gelu_tanh_backward_bf16(g.data() + offset, x.data() + offset, got_dx.data(),
                                       int64_t(n));
      kernels::ref::gelu_tanh_bf16(x.data() + offset, scalar.data(), int64_t(n));
      kernels::ref::gelu_tanh_backward_bf16(g.data() + offset, x.data() + offset, scalar_dx.data(),
                                            int64_t(n));
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], want_y[offset + i]) << name_of(isa) << ", x bits " << x[offset + i];
        ASSERT_EQ(scalar[i], want_y[offset + i]) << "scalar, x bits " << x[offset + i];
        ASSERT_EQ(got_dx[i], want_dx[offset + i])
            << name_of(isa) << ", x bits " << x[offset + i] << ", g bits " << g[offset + i];
        ASSERT_EQ(scalar_dx[i], want_dx[offset + i]) << "scalar, x bits " << x[offset + i];
      }
    }
  }
}

// relu on bf16 bits against its definition on the widened values, for every x pattern (NaNs,
// infinities, zeros of both signs, subnormals) with g from a second sweep that includes
// signalling and quiet NaNs; every ISA, tails included.
TEST(Vmath, Bf16ReluGivesTheBitsOfWideningComparingAndRounding) {
  std::vector<uint16_t> x(65536 + 5), g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = uint16_t(i);
    g[i] = uint16_t((i * 40503u + 12345u) & 0xffff);
  }
  std::vector<uint16_t> want_y(x.size()), want_dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = float(bfloat16::from_bits(x[i])), grad = float(bfloat16::from_bits(g[i]));
    want_y[i] = bfloat16(v > 0.0f ? v : 0.0f).bits;
    want_dx[i] = bfloat16(v > 0.0f ? grad : 0.0f).bits;
  }
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    for (const auto& [offset, n] : std::vector<std::pair<size_t, size_t>>{
             {0, x.size()}, {3, 1}, {5, 31}, {7, 33}, {1, 1000}}) {
      std::vector<uint16_t> y(n), dx(n);
      kernels::relu_bf16(x.data() + offset, y.data(), int64_t(n));
      kernels::relu_backward_bf16(g.data() + offset, x.data() + offset, dx.data(), int64_t(n));
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[i], want_y[offset + i]) << name_of(isa) << ", x bits " << x[offset + i];
        ASSERT_EQ(dx[i], want_dx[offset + i])
            << name_of(isa) << ", x bits " << x[offset + i] << ", g bits " << g[offset + i];
      }
    }
  }
}

// The fused exponentials and sum: the output of scale_shift_exp_f32 and the sum sum_f32 gives
// of it, bit for bit, on every ISA and at every tail length.
TEST(Vmath, ExpAndSumInOnePassGiveTheTwoPassesBits) {
  const std::vector<float> x = inputs();
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    for (size_t n : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(100),
                     size_t(257), x.size()}) {
      std::vector<float> fused(n), apart(n);
      const float sum =
          kernels::scale_shift_exp_sum_f32(x.data(), fused.data(), int64_t(n), kScale, kShift);
      kernels::ref::scale_shift_exp_f32(x.data(), apart.data(), int64_t(n), kScale, kShift);
      const float want = kernels::ref::sum_f32(apart.data(), int64_t(n));
      ASSERT_TRUE(n == 0 || std::memcmp(fused.data(), apart.data(), n * sizeof(float)) == 0)
          << name_of(isa) << ", n " << n;
      ASSERT_EQ(std::bit_cast<uint32_t>(sum), std::bit_cast<uint32_t>(want))
          << name_of(isa) << ", n " << n;
    }
  }
}

// The row kernels are their formulas rounded after each operation: the two passes they replace.
TEST(Vmath, AttentionRowKernelsRoundAfterEachOperation) {
  const std::vector<float> x = inputs();
  const int64_t n = int64_t(x.size());
  std::vector<float> got(x.size()), want(x.size());
  std::vector<float> t(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float scaled = x[i] * kScale;
    t[i] = scaled - kShift;
  }
  kernels::ref::exp_f32(t.data(), want.data(), n);
  scale_shift_exp(x.data(), got.data(), n);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), x.size() * sizeof(float)), 0);
  divide(x.data(), got.data(), n);
  score_grad(x.data(), t.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    const float quotient = x[i] / kDivisor;
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(quotient)) << x[i];
    const float dp = x[i] - 1.0f, weighted = x[i] * (dp - kDot), grad = weighted * kScale;
    ASSERT_EQ(std::bit_cast<uint32_t>(t[i]), std::bit_cast<uint32_t>(grad)) << x[i];
  }
}

// |got - want| within tolerance(f32) for every input whose double result is finite; the
// others must match in class (inf with the same sign, NaN).
template <Kernel1 K, typename Want>
void expect_close(const K& kernel, Want want_of) {
  const std::vector<float> x = inputs();
  std::vector<float> got(x.size());
  kernel(x.data(), got.data(), int64_t(x.size()));
  const test::Tolerance tol = test::tolerance(DType::f32);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = want_of(double(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << "x = " << x[i];
    } else if (std::isinf(want) || std::fabs(want) > std::numeric_limits<float>::max()) {
      EXPECT_EQ(double(got[i]), want > 0 ? INFINITY : -INFINITY) << "x = " << x[i];
    } else {
      ASSERT_LE(std::fabs(double(got[i]) - want), tol.atol + tol.rtol * std::fabs(want))
          << "x = " << x[i] << ": got " << got[i] << ", want " << want;
    }
  }
}

double gelu_tanh_double(double x) {
  const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1 + std::tanh(u));  // NaN at -inf (-inf * 0), as the op's reference
}

double gelu_tanh_grad_double(double x) {
  const double k = std::sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

TEST(Vmath, ExpIsWithinToleranceOfDouble) {
  expect_close(kernels::exp_f32, [](double x) { return std::exp(x); });
}

TEST(Vmath, GeluTanhIsWithinToleranceOfDouble) {
  expect_close(kernels::gelu_tanh_f32, gelu_tanh_double);
}

TEST(Vmath, GeluTanhBackwardIsWithinToleranceOfDouble) {
  // Beyond 1e12 in magnitude x^2 overflows in fp32 (so does the formula in fp32): NaN.
  expect_close(gelu_backward_of_ones, [](double x) {
    return std::fabs(x) > 1e12 ? std::numeric_limits<double>::quiet_NaN()
                               : gelu_tanh_grad_double(x);
  });
}

template <typename F>
concept Reduction = std::invocable<const F&, const float*, int64_t>;

float dot_with_itself(const float* x, int64_t n) { return kernels::dot_f32(x, x, n); }
float dot_with_itself_ref(const float* x, int64_t n) { return kernels::ref::dot_f32(x, x, n); }

// Every length up to 100 (each tail), some long ones, and every offset in a vector, on the
// sweep above (signed zeros, infinities and NaN among them) and on runs of -0.
template <Reduction K, Reduction S>
void expect_same_reduction_bits_on_every_isa(const K& kernel, const S& scalar) {
  std::vector<float> x = inputs();
  for (int i = 0; i < 40; ++i) x.push_back(-0.0f);
  std::vector<std::pair<size_t, size_t>> cases;
  for (size_t n = 0; n <= 100; ++n) cases.push_back({(n * 7919) % 2000, n});
  for (size_t offset = 0; offset < 16; ++offset) cases.push_back({offset, 257});
  cases.push_back({x.size() - 40, 40});  // all -0
  cases.push_back({x.size() - 45, 45});  // inputs ending in NaN, 1e30..., then -0
  cases.push_back({0, 200001});          // [-20, 0]: no specials
  cases.push_back({0, x.size()});
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    for (const auto& [offset, n] : cases) {
      const float got = kernel(x.data() + offset, int64_t(n));
      const float want = scalar(x.data() + offset, int64_t(n));
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << name_of(isa) << ", offset " << offset << ", n " << n << ": " << got << " vs " << want;
    }
  }
}

TEST(Vmath, ReductionsGiveTheScalarBitsOnEveryIsa) {
  expect_same_reduction_bits_on_every_isa(kernels::sum_f32, kernels::ref::sum_f32);
  expect_same_reduction_bits_on_every_isa(dot_with_itself, dot_with_itself_ref);
  expect_same_reduction_bits_on_every_isa(kernels::max_f32, kernels::ref::max_f32);
  // The products of dot on distinct operands: a against the same values reversed.
  const std::vector<float> a = inputs();
  const std::vector<float> b(a.rbegin(), a.rend());
  for (int64_t n : {0, 1, 15, 16, 17, 255, 256, 1000}) {
    for (Isa isa : kAllIsas) {
      if (isa > best_isa()) continue;
      IsaLimit limit(isa);
      EXPECT_EQ(std::bit_cast<uint32_t>(kernels::dot_f32(a.data() + 9, b.data() + 3, n)),
                std::bit_cast<uint32_t>(kernels::ref::dot_f32(a.data() + 9, b.data() + 3, n)))
          << name_of(isa) << ", n " << n;
    }
  }
}

// The sums within fp32 accumulation's bound of the exact sums in double: |error| <= atol +
// rtol(n) sum |terms|, the tolerance of a reduction of length n.
TEST(Vmath, SumAndDotAreWithinToleranceOfDouble) {
  Philox rng(PhiloxState{9, 0, 0});
  for (int64_t n : {1, 7, 16, 33, 256, 384, 1536, 100000}) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = float(rng.normal());
      b[i] = float(rng.normal() * 1e-3);
    }
    double sum = 0, sum_abs = 0, dot = 0, dot_abs = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      sum += a[i];
      sum_abs += std::fabs(a[i]);
      dot += double(a[i]) * b[i];
      dot_abs += std::fabs(double(a[i]) * b[i]);
    }
    const test::Tolerance tol = test::tolerance(DType::f32, n);
    EXPECT_LE(std::fabs(kernels::sum_f32(a.data(), n) - sum), tol.atol + tol.rtol * sum_abs)
        << "n " << n;
    EXPECT_LE(std::fabs(kernels::dot_f32(a.data(), b.data(), n) - dot),
              tol.atol * 1e-3 + tol.rtol * dot_abs)
        << "n " << n;
  }
}

// accumulate(x, acc, n) at every ISA against scalar(x, acc, n), from accumulators holding `start`.
template <typename X, typename K>
void expect_same_accumulation_on_every_isa(const K& kernel,
                                           void (*scalar)(const X*, float*, int64_t), const X* x,
                                           const std::vector<float>& start, int64_t n) {
  std::vector<float> want(start.begin(), start.begin() + n);
  scalar(x, want.data(), n);
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    std::vector<float> got(start.begin(), start.begin() + n);
    kernel(x, got.data(), n);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), size_t(n) * sizeof(float)), 0)
        << name_of(isa) << ", n " << n;
  }
}

// Every 16-bit pattern (bf16 and f16: subnormals, infinities, NaNs), added to accumulators
// that hold the sweep's values, at lengths with every tail: the bits of the scalar kernels.
TEST(Vmath, AccumulateGivesTheScalarBitsOnEveryIsa) {
  std::vector<uint16_t> patterns(65536);
  for (size_t i = 0; i < patterns.size(); ++i) patterns[i] = uint16_t(i);
  const std::vector<float> start = inputs();
  for (int64_t n : {int64_t(65536), int64_t(1), int64_t(15), int64_t(17), int64_t(33)}) {
    const uint16_t* x = patterns.data() + 65536 - n;
    expect_same_accumulation_on_every_isa(kernels::accumulate_bf16, kernels::ref::accumulate_bf16,
                                          x, start, n);
    expect_same_accumulation_on_every_isa(kernels::accumulate_f16, kernels::ref::accumulate_f16, x,
                                          start, n);
  }
  const std::vector<float> x(start.rbegin(), start.rend());
  for (int64_t n : {int64_t(x.size()), int64_t(1), int64_t(16), int64_t(31)}) {
    expect_same_accumulation_on_every_isa(kernels::accumulate_f32, kernels::ref::accumulate_f32,
                                          x.data(), start, n);
  }
}

TEST(Vmath, MaxSkipsNanAndSumsStartAtPlusZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, -3.0f, 2.5f, nan, 2.5f, -1.0f};
  EXPECT_EQ(kernels::max_f32(x.data(), int64_t(x.size())), 2.5f);
  EXPECT_EQ(kernels::max_f32(x.data(), 1), -INFINITY);  // only NaN
  EXPECT_EQ(kernels::max_f32(x.data(), 0), -INFINITY);
  const std::vector<float> zeros = {-0.0f, 0.0f};
  EXPECT_TRUE(std::signbit(kernels::max_f32(zeros.data(), 2)));  // the tie keeps the one held
  EXPECT_EQ(kernels::sum_f32(x.data() + 1, 0), 0.0f);
  EXPECT_FALSE(std::signbit(kernels::sum_f32(zeros.data(), 1)));  // lanes start at +0
}

}  // namespace
}  // namespace mixp

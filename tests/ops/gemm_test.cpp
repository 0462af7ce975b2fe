// The rounding of bf16 products into bf16 results (ops/gemm_op.cpp). On CPUs with AVX-512 BF16,
// oneDNN rounds its fp32 sums to bf16 itself as it stores them; these tests hold that rounding
// against mixp's own rounding of the same sums (the fp32 result of the same product).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/gemm.h"
#include "mixp/float_types.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"
#include "ops/gemm_op.h"

namespace mixp {
namespace {

using kernels::GemmShape;

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

}  // namespace
}  // namespace mixp
